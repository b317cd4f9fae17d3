#!/usr/bin/env bash
# Session 21, last call (the device time left after failed starts): (1) the
# CUDA tests of the batch norm + add + ReLU backward fusion (bnadd-bwd.md)
# and of the captured iteration; (2) ResNet-50 bf16 b256 beside eager and
# torch.compile with it; (3) VGG-16 fp32 none / 16 / 12 GiB in one
# vdnn-bench process (issue 34: 0.974x / 0.945x to keep); (4) the steps
# grouped by the copies beside them (--step-times) at ResNet-152 8 GiB,
# ResNet-50 4 GiB, VGG-16 4 GiB and AlexNet without offload; (5) VGG-16
# tf32 beside torch.compile if time is left. Parts skipped near DEADLINE.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-c.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s21c}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-500}
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
PY=/opt/torch/.venv/bin/python
left() { echo $(( DEADLINE - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
tcase() {   # binary case limit
    CK_RUN_CASE=$2 CK_FORK=no timeout "$3" "$B/tests/cuda/$1" > "$O/t-$2.log" 2>&1
    echo "$2: exit $? ($SECONDS s)"; grep -E 'Checks|:F:|:E:' "$O/t-$2.log" | tail -3
}
echo "== tests (at ${SECONDS} s)"
for c in test_bn_add_relu test_bn; do tcase cuda_test_cuda_ops $c 60; done
for c in test_bn_add_relu_fused test_bn_add_fused test_relu_fused_into_bn_and_add \
         test_graph_vs_eager test_step_times_graph test_cpu_vs_cuda; do
    tcase cuda_test_cuda_train $c 60; done
compare() {   # net math modes need
    [ "$(left)" -lt "$4" ] && { echo "== $1 $2: skipped ($(left) s left)"; return; }
    echo "== $1 $2 $3 (at ${SECONDS} s)"
    timeout "$(left)" $PY tools/torch_compare.py --net "$1" --batch 256 --math "$2" \
        --modes "$3" --iters 10 --warmup 6 --vdnn-bin "$B/vdnn-bench" \
        --vdnn-args "--budgets peak --policies none" --vdnn-out "$O/$1-$2-bench.json" \
        --json "$O/$1-$2-compare.json" > "$O/$1-$2-compare.txt" 2>&1
    echo "exit $?"; grep -E "x speed|first iteration" "$O/$1-$2-compare.txt" | grep -v Warn | tail -4
    grep -E '^[0-9.]+ GiB +none' "$O/$1-$2-compare.txt" | head -1 | cut -c1-150
}
steps() {   # net budget
    [ "$(left)" -lt 40 ] && { echo "== steps $1 $2: skipped"; return; }
    timeout 40 $B/vdnn-train nets/$1.yaml --batch 256 --math bf16 --budget $2 --iters 12 \
        --step-times > "$O/$1-$2-steps.log" 2>&1
    echo "-- vdnn-train $1 $2 --step-times: exit $? (at $SECONDS s)"
    grep -E '^iteration time|^  all|steps beside|^  D2H:|^  H2D:' "$O/$1-$2-steps.log"
}
compare resnet50 bf16 bf16-cl,compile-bf16-cl 150
echo "== VGG-16 fp32 none / 16 / 12 GiB (at ${SECONDS} s)"
[ "$(left)" -gt 100 ] && { timeout 100 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 \
    --budgets 16G,12G,peak --policies none,auto --warmup 3 --iters 6 > "$O/vgg16-fp32-bench.txt" 2>&1
    echo "exit $? (at $SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/vgg16-fp32-bench.txt" | cut -c1-150; }
steps resnet152 8G
steps resnet50 4G
steps vgg16 4G
steps alexnet 30G
compare vgg16 tf32 compile-tf32 150
echo "== done at ${SECONDS} s"
