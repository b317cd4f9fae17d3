#!/usr/bin/env bash
# Session 32, call 3 (the machine of call 2): why ResNet-50 4 GiB measured
# +3.9% over its prediction with 3 + 8 iterations and -0.7% with 10 + 30
# (call 2): the same point at --warmup 3, 10, 20 (8 timed each); then
# whether a captured iteration (--graph on) pays at offload points now that
# no timed step captures (vdnn-bench's warm-up): ResNet-50 4 GiB and
# ResNet-152 10 GiB with --graph on and off, 10 + 20 iterations each.
# Call 2's profiles. Everything in $O/s32c.tgz.
# There: bash docs/results/2026-12-07-s32/gpu-c.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s32c}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'tar czf "$O/s32c.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
xz -dc "$D/s32b/r50-profile.json.xz" > "$W/r50.json"
xz -dc "$D/s32b/r152-profile.json.xz" > "$W/r152.json"
one() {   # tag net profile budget warmup iters graph
    timeout 60 $B/vdnn-bench nets/$2.yaml --batch 256 --math bf16 --budgets $4 --policies auto \
        --profile "$W/$3.json" --warmup $5 --iters $6 --graph $7 > "$W/$1.txt" 2>&1
    printf '%-22s exit %s: %s\n' $1 $? "$(grep -E '^[0-9.]+ GiB +auto +yes' "$W/$1.txt" | cut -c1-150)"
}
for w in 3 10 20; do one r50-4G-w$w resnet50 r50 4G $w 8 auto; done
for g in on off; do
    one r50-4G-graph-$g resnet50 r50 4G 10 20 $g
    one r152-10G-graph-$g resnet152 r152 10G 10 20 $g
done
rm -f "$W"/*.json
echo "== done at ${SECONDS} s"
