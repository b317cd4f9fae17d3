#!/usr/bin/env bash
# A fused conv's chunks (batch below the tuned one) as fused runtime plans:
# VGG-16 b256 bf16 at 4 GiB fused and --no-fuse (measured, predicted,
# runtime plans, fused ones), then the fused-conv and chunked CUDA tests.
# usage (device machine, repository root, after unpacking BUILD): gpu-chunkfuse.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s18}; mkdir -p "$O"
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
for v in fused no-fuse; do
    a=""; [ $v = no-fuse ] && a=--no-fuse
    timeout 60 $B/vdnn-train nets/vgg16.yaml --batch 256 --math bf16 --iters 6 --budget 4G \
        --conv-debug 1 --step-times $a > "$O/vgg16-4G-$v.log" 2>&1
    echo "vgg16 4G $v: exit $? $(grep -o 'measured [0-9.]* s' "$O/vgg16-4G-$v.log" | head -1)" \
        "$(grep -o 'predicted [0-9.]* s' "$O/vgg16-4G-$v.log" | head -1)" \
        "runtime plans $(grep -c 'runtime plan' "$O/vgg16-4G-$v.log")," \
        "fused $(grep -c 'runtime plan with its bias' "$O/vgg16-4G-$v.log")"
done
for c in test_conv_bias_relu_fused test_chunked_invariance; do
    CK_RUN_CASE=$c CK_FORK=no timeout 40 "$B/tests/cuda/cuda_test_cuda_train" > "$O/$c.log" 2>&1
    echo "$c: exit $?"; grep -E ':F:|:E:|Checks' "$O/$c.log" | tail -2
done
