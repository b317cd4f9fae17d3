#!/usr/bin/env bash
# tf32 channels-last (tf32-nhwc.md): (1) the CUDA tests that run tf32 on the
# layout-dependent ops and against the CPU, (2) ResNet-50 / VGG-16 b256 tf32
# without offload (and fp32, whose path changed only in the fc bias's
# vector kernel), beside PyTorch eager and torch.compile where time is left.
# usage (device machine, in the tree of branch s19-tf32, after building
# BUILD): gpu-tf32.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s19tf32}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-560}
PY=/opt/torch/.venv/bin/python
left() { echo $(( DEADLINE - SECONDS )); }
echo "== cuda_test_cuda_ops (at ${SECONDS} s)"
for t in test_pool test_relu_dropout test_lrn test_bn test_relu_fused test_shape_ops \
         test_chunked test_conv test_fc test_deterministic; do
    CK_RUN_CASE=$t timeout 300 "$B/tests/cuda/cuda_test_cuda_ops" > "$O/ops-$t.txt" 2>&1
    echo "$t: exit $? $(grep -E '^[0-9]+%' "$O/ops-$t.txt")"
done
echo "== cuda_test_cuda_train (at ${SECONDS} s)"
for t in test_cpu_vs_cuda test_relu_fused_into_bn_and_add test_conv_bias_relu_fused \
         test_deterministic_and_offload_invariance; do
    CK_RUN_CASE=$t timeout 300 "$B/tests/cuda/cuda_test_cuda_train" > "$O/train-$t.txt" 2>&1
    echo "$t: exit $? $(grep -E '^[0-9]+%' "$O/train-$t.txt")"
done
grep -h "tf32 .*err\|tf32 iter" "$O"/train-test_cpu_vs_cuda.txt | tail -12
bench() {   # net math
    [ "$(left)" -lt 90 ] && { echo "== $1 $2: skipped ($(left) s left)"; return; }
    echo "== vdnn-bench $1 $2 (at ${SECONDS} s)"
    timeout "$(left)" "$B/vdnn-bench" "nets/$1.yaml" --batch 256 --math "$2" --warmup 6 --iters 10 \
        --budgets peak --policies none --json "$O/$1-$2-bench.json" > "$O/$1-$2-bench.txt" 2>&1
    echo "exit $?"; grep -E "s/iter" "$O/$1-$2-bench.txt" | tail -2
}
bench resnet50 tf32
bench vgg16 tf32
bench resnet50 fp32
compare() {   # net math modes need-seconds
    [ "$(left)" -lt "$4" ] && { echo "== $1 $2: skipped ($(left) s left)"; return; }
    echo "== torch_compare $1 $2 $3 (at ${SECONDS} s)"
    timeout "$(left)" $PY tools/torch_compare.py --net "$1" --batch 256 --math "$2" \
        --modes "$3" --iters 10 --warmup 6 --vdnn "$O/$1-$2-bench.json" \
        --json "$O/$1-$2-compare.json" > "$O/$1-$2-compare.txt" 2>&1
    echo "exit $?"; grep -E "^pytorch|s/iter" "$O/$1-$2-compare.txt" | grep -v Warn | tail -6
}
compare vgg16 tf32 tf32 100
compare resnet50 tf32 tf32,compile-tf32 150
echo "== done at ${SECONDS} s"
