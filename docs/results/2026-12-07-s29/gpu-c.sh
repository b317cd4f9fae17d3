#!/usr/bin/env bash
# Session 29, call 2 (device time left: about 5 minutes): on an H200, the
# issue's card, the two near-miss points in rounds beside none: bf16
# ResNet-152 10 GiB (issue 32: 0.92x), fp32 VGG-16 16 / 12 GiB (issue 34:
# 0.974x / 0.945x); then the error of call 1's `--profile P --chunks
# features.5=2` at 12 GiB (exit 8 on the H100, its log did not come back).
# Everything in $O/s29c.tgz (a call brings back only a few files).
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s29/gpu-c.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s29c}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
DEADLINE=${DEADLINE:-270}
trap 'tar czf "$O/s29c.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
bench() {   # tag net math budgets rounds
    local tag=$1 net=$2 math=$3 budgets=$4 rounds=$5
    [ $(( DEADLINE - SECONDS )) -lt 40 ] && { echo "== $tag: skipped"; return; }
    timeout $(( DEADLINE - SECONDS )) $B/vdnn-bench nets/$net.yaml --batch 256 --math $math \
        --budgets "$budgets" --policies none,auto --profile-out "$W/$tag-profile.json" \
        --warmup 3 --iters 8 --rounds $rounds --json "$W/$tag.json" > "$W/$tag.txt" 2>&1
    echo "== $tag: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$W/$tag.txt" | cut -c1-150
}
bench r152 resnet152 bf16 10G,peak 3
bench vgg16-fp32 vgg16 fp32 16G,12G,peak 2
if [ -f "$W/vgg16-fp32-profile.json" ] && [ $(( DEADLINE - SECONDS )) -gt 30 ]; then
    timeout 30 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets 12G --policies auto \
        --profile "$W/vgg16-fp32-profile.json" --chunks features.5=2 --warmup 1 --iters 2 \
        > "$W/vgg16-fp32-12G-split.txt" 2>&1
    echo "== 12G --chunks features.5=2: exit $?"
    grep -iE 'error|option|fail' "$W/vgg16-fp32-12G-split.txt" | head -5 | cut -c1-300
fi
echo "== done at ${SECONDS} s"
