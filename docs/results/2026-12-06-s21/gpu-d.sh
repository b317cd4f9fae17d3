#!/usr/bin/env bash
# Session 21's next call (not run: no device time left): the CUDA tests of
# the changes after gpu-c.sh, then the split layers' fusion pairs timed
# alone (bwd_alone_s): VGG-16 bf16 b256 4 GiB under --step-times (features.3's
# chunks ran 0.22 ms each against 0.001 predicted in gpu-c), then VGG-16 bf16
# none / 6 / 4 GiB in one vdnn-bench process, ResNet-50 4 GiB's steps beside
# its steps without offload (gpu-c: at 4 GiB the steps beside no copy ran
# 5.6% over, the whole none iteration 0.7%).
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-d.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s21d}; mkdir -p "$O"
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
export VD_BUILDDIR=$PWD/$B
# the CUDA tests of what changed after gpu-c.sh: fused adds recomputed
# (test_bn_add_fused: auto at a tight budget), no backward pairs in fp32
# (test_bn_add_relu_fused), the profile's pair-alone timings (any test that
# profiles: test_graph_vs_eager)
for c in test_bn_add_fused test_bn_add_relu_fused test_graph_vs_eager; do
    CK_RUN_CASE=$c CK_FORK=no timeout 90 "$B/tests/cuda/cuda_test_cuda_train" > "$O/t-$c.log" 2>&1
    echo "$c: exit $? ($SECONDS s)"; grep -E 'Checks|:F:|:E:' "$O/t-$c.log" | tail -2
done
steps() {   # net budget
    timeout 40 $B/vdnn-train nets/$1.yaml --batch 256 --math bf16 --budget $2 --iters 12 \
        --step-times > "$O/$1-$2-steps.log" 2>&1
    echo "-- vdnn-train $1 $2 --step-times: exit $? (at $SECONDS s)"
    grep -E '^iteration time|^vdnn-train: plan|^  all|steps beside|bwd features.3 ' "$O/$1-$2-steps.log" | head -12
}
steps vgg16 4G
timeout 70 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math bf16 --budgets 6G,4G,peak \
    --policies none,auto --warmup 3 --iters 6 > "$O/vgg16-bench.txt" 2>&1
echo "-- vdnn-bench vgg16 bf16: exit $? (at $SECONDS s)"
grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/vgg16-bench.txt" | cut -c1-150
steps resnet50 4G
steps resnet50 12G   # fits without offload: the marks' own cost, no copy, no recompute
echo "== done at ${SECONDS} s"
