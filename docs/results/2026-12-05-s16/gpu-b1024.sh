#!/usr/bin/env bash
# Issue 32 item 1's b1024 floor on CUDA: convolutions whose whole-batch maps
# pass cuDNN's 2^31 elements (VGG-16 b1024 fp32: features.0's output is
# 3.3e9) run as sub-batches; the CUDA test of that (test_cuda_big), then
# VGG-16 b1024 fp32 at 12 GiB and near its floor (vdnn-plan --min-budget:
# 6.61 GiB) with the analytic profile (measuring one needs the whole-batch
# maps of every layer at once: about 70 GiB for features.2).
# usage (device machine, after tar xJf .carry/BUILD.txz): gpu-b1024.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/b1024}; mkdir -p "$O"
. "$(dirname "$0")/../2026-12-05-s15/env.sh"
VD_BUILDDIR=$PWD/$B CK_FORK=no timeout 300 $B/tests/cuda/cuda_test_cuda_big > "$O/big.log" 2>&1
echo "cuda_test_cuda_big: exit $? ($(tail -1 "$O/big.log"))"
for b in 12G 7G; do row vgg16 fp32 1024 $b 5 --analytic-profile; done
