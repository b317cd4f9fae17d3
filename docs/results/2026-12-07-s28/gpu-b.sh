#!/usr/bin/env bash
# Session 28 (not run: written after the session's device time was spent):
# the points left within 1% of their targets, each measured in rounds
# (vdnn-bench --rounds, the points in turn) so that drift between points
# does not decide them: bf16 b256 ResNet-152 10 GiB beside none (issue 32:
# 0.92x), fp32 VGG-16 16 / 12 GiB beside none (issue 34: 0.974x / 0.945x).
# Then, if time is left, where the patched replay loses in vdnn-bench: the
# same ResNet-152 10 GiB with --no-stage-input, --graph on and off (needs
# the build with session 27's script-capture.patch as PATCHED).
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s28/gpu-b.sh build-h100 /tmp/s28b [PATCHED]
set -u
B=${1:-build-h100}; O=${2:-/tmp/s28b}; PATCHED=${3:-}; mkdir -p "$O"
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
DEADLINE=${DEADLINE:-480}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
bench() {   # tag build net math budgets extra-args...
    local tag=$1 bin=$2 net=$3 math=$4 budgets=$5; shift 5
    [ $(( DEADLINE - SECONDS )) -lt 60 ] && { echo "== $tag: skipped"; return; }
    local P="$O/$net-$math-profile.json"
    local prof="--profile $P"; [ -f "$P" ] || prof="--profile-out $P"
    timeout $(( DEADLINE - SECONDS )) $bin/vdnn-bench nets/$net.yaml --batch 256 --math $math \
        --budgets "$budgets" --policies none,auto $prof --warmup 3 --iters 8 --json "$O/$tag.json" "$@" \
        > "$O/$tag.txt" 2>&1
    echo "== $tag: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/$tag.txt" | cut -c1-130
}
bench r152-rounds $B resnet152 bf16 10G,peak --rounds 3
bench vgg16-fp32-rounds $B vgg16 fp32 16G,12G,peak --rounds 2
if [ -n "$PATCHED" ]; then
    bench r152-nostage-on $PATCHED resnet152 bf16 10G --no-stage-input --graph on --rounds 2
    bench r152-nostage-off $PATCHED resnet152 bf16 10G --no-stage-input --graph off --rounds 2
fi
xz -T0 "$O"/*.json
echo "== done at ${SECONDS} s"
