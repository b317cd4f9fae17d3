#!/usr/bin/env bash
# Session 20's fourth call (the session's last device time): the fixed
# test_pool_relu_fused; ResNet-50 bf16 none under --step-times (why the
# fused plan's prediction is 5% over the measured time in gpu-c.sh); VGG-16
# tf32 beside PyTorch eager (skipped in gpu-c.sh); where VGG-16 bf16 4 GiB's
# device memory grows beyond the pool (gpu-b.sh's '!'), with and without the
# captured iteration; ResNet-50 bf16 4 GiB under --step-times (the fused
# plans at a tight budget). Parts are
# skipped near DEADLINE seconds.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-d.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s20d}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-330}
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
PY=/opt/torch/.venv/bin/python
left() { echo $(( DEADLINE - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
CK_RUN_CASE=test_pool_relu_fused CK_FORK=no timeout 60 "$B/tests/cuda/cuda_test_cuda_train" > "$O/pool.log" 2>&1
echo "test_pool_relu_fused: exit $? ($SECONDS s)"; grep -E 'bf16 pool fused vs cpu|Checks|:F:|:E:' "$O/pool.log" | tail -12
echo "== ResNet-50 bf16 none --step-times (at ${SECONDS} s)"
row resnet50 bf16 256 none 20 --step-times --profile-out "$O/r50-prof.json"
sed -n '/steps furthest/,/all [0-9]* steps/p' "$O/resnet50-bf16-256-none.log" | head -30
xz -9 "$O/r50-prof.json"
mem() {   # args...
    [ "$(left)" -lt 50 ] && return
    echo "-- vdnn-train vgg16 bf16 4G $*"
    timeout 60 $B/vdnn-train nets/vgg16.yaml --batch 256 --math bf16 --budget 4G --iters 8 "$@" \
        > "$O/mem-$#.txt" 2>&1
    grep -E '^device memory|^growth|^outside' "$O/mem-$#.txt" | head -8
}
echo "== device memory beyond the pool (at ${SECONDS} s)"
mem; mem --graph off
if [ "$(left)" -gt 90 ]; then
    echo "== VGG-16 tf32 beside eager (at ${SECONDS} s)"
    timeout "$(left)" $PY tools/torch_compare.py --net vgg16 --batch 256 --math tf32 --modes tf32 \
        --iters 8 --warmup 4 --vdnn-bin "$B/vdnn-bench" --vdnn-args "--budgets peak --policies none" \
        --vdnn-out "$O/vgg16-tf32-bench.json" > "$O/vgg16-tf32-compare.txt" 2>&1
    grep -E "x speed|^[0-9.]+ GiB +none" "$O/vgg16-tf32-compare.txt" | cut -c1-140
fi
if [ "$(left)" -gt 60 ]; then
    echo "== ResNet-50 bf16 4 GiB --step-times (at ${SECONDS} s)"
    row resnet50 bf16 256 4G 20 --step-times
    sed -n '/steps furthest/,/all [0-9]* steps/p' "$O/resnet50-bf16-256-4G.log" | head -30
    grep -E '^  (D2H|H2D):' "$O/resnet50-bf16-256-4G.log"
fi
echo "== done at ${SECONDS} s"
