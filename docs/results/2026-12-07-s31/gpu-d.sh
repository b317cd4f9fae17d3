#!/usr/bin/env bash
# Session 31, call 4: every tight point of issues 32 and 34 again in rounds
# beside none, on the tree with the session's three changes (the bound's
# start's wider gate, split conv options' own chunk times, runtime conv
# plans reused only for the same engine), each net's profile measured at
# its bench's start: the GPU tests of the changes; bf16 b256 ResNet-152
# 10 / 9 / 8 GiB, fp32 VGG-16 16 / 12 / 8 GiB, bf16 VGG-16 6 / 4 GiB,
# ResNet-50 4 GiB, GoogLeNet 4 GiB; then ResNet-152 10 GiB in vdnn-train
# with the bench's profile and its step times. Everything in $O/s31d.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s31/gpu-d.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s31d}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
DEADLINE=${DEADLINE:-560}
trap 'xz -T0 "$W"/*.json "$W"/*.tsv 2>/dev/null; tar czf "$O/s31d.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for t in "cuda_test_cuda_ops test_profile" "cuda_test_cuda_ops test_chunked" "cuda_test_cuda_ops test_conv_split"; do
    set -- $t
    CK_RUN_CASE=$2 timeout 150 $B/tests/cuda/$1 > "$W/$2.log" 2>&1
    echo "== $2: exit $? ($SECONDS s)"; tail -1 "$W/$2.log" | cut -c1-300
done
bench() {   # tag net math budgets rounds
    local tag=$1 net=$2 math=$3 budgets=$4 rounds=$5
    [ $(( DEADLINE - SECONDS )) -lt 60 ] && { echo "== $tag: skipped"; return; }
    timeout $(( DEADLINE - SECONDS )) $B/vdnn-bench nets/$net.yaml --batch 256 --math $math \
        --budgets "$budgets" --policies none,auto --profile-out "$W/$tag-profile.json" \
        --warmup 3 --iters 8 --rounds $rounds --json "$W/$tag.json" > "$W/$tag.txt" 2>&1
    echo "== $tag: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$W/$tag.txt" | cut -c1-150
}
bench r152 resnet152 bf16 10G,9G,8G,peak 3
bench vgg16-fp32 vgg16 fp32 16G,12G,8G,peak 2
bench vgg16 vgg16 bf16 6G,4G,peak 2
bench r50 resnet50 bf16 4G,peak 2
bench googlenet googlenet bf16 4G,peak 2
P=$W/r152-profile.json
if [ -f "$P" ] && [ $(( DEADLINE - SECONDS )) -gt 40 ]; then
    timeout $(( DEADLINE - SECONDS - 5 )) $B/vdnn-train nets/resnet152.yaml --batch 256 --math bf16 \
        --budget 10G --iters 20 --profile "$P" --data synthetic \
        --step-times-out "$W/r152-10G-steps.tsv" > "$W/r152-10G-train.log" 2>&1
    echo "== r152 10G vdnn-train: exit $? ($SECONDS s)"
    grep -E "^iteration time|steps beside|^  all|^  (D2H|H2D):|error" "$W/r152-10G-train.log" | cut -c1-170
fi
echo "== done at ${SECONDS} s"
