#!/usr/bin/env bash
# Session 19's first call: (1) where offload plans' time goes — vdnn-train
# --step-times at issue 32's tight points (ResNet-50 4 GiB, ResNet-152 8 GiB,
# VGG-16 6 GiB bf16, VGG-16 fp32 8 GiB, b256), with the profile and plan
# written for the simulator to be checked against on the CPU; (2) the CUDA
# inference test (a split plan against the CPU); (3) issue 34's fp32 / tf32
# targets (session 18's gpu-next.sh) in the time left.
# usage (device machine, after tar xJf .carry/BUILD.txz): gpu-a.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s19}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-560}
. "$D/../2026-12-05-s15/env.sh"
left() { echo $(( DEADLINE - SECONDS )); }
st() {   # net math budget
    [ "$(left)" -lt 100 ] && { echo "== $1 $2 $3: skipped"; return; }
    local p="$O/st-$1-$2-$3"
    row "$1" "$2" 256 "$3" 20 --step-times --profile-out "$p.profile.json" --plan-json "$p.plan.json"
    mv "$O/$1-$2-256-$3.log" "$p.log"
}
echo "== step times (at ${SECONDS} s)"
st resnet50 bf16 4G
st resnet152 bf16 8G
st vgg16 bf16 6G
st vgg16 fp32 8G
echo "== inference test (at ${SECONDS} s)"
CK_RUN_CASE=test_inference_cpu_vs_cuda timeout 120 $B/tests/cuda/cuda_test_cuda_train 2>&1 | tail -3
echo "== issue 34 (at ${SECONDS} s)"
DEADLINE=$(left) bash "$D/../2026-12-06-s18/gpu-next.sh" "$B" "$O/next"
