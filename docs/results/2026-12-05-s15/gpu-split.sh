#!/usr/bin/env bash
# Issue 32 item 1 on the GPU, one call: the CUDA tests of split layers
# (test_chunked_invariance: the CPU oracle split the same way, and offload
# invariance bitwise in fp32 and bf16; test_chunked: every op on a chunk),
# then VGG-16 b256 trained at tight budgets and at the floors, beside its
# own none in the same call (compute-only iteration, the prediction, the
# driver-measured process peak). The bf16 runs load the H100 profile of
# tests/plan/data; fp32 loads the profile of its first run.
# usage (device machine, after tar xJf .carry/BUILD.txz): gpu-split.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/split}; mkdir -p "$O"
. "$(dirname "$0")/env.sh"
CK_RUN_CASE=test_chunked_invariance $B/tests/cuda/cuda_test_cuda_train > "$O/train.log" 2>&1
echo "test_chunked_invariance: exit $? ($(tail -1 "$O/train.log"))"
grep -E "split in 4|fp32 iter 9" "$O/train.log"
CK_RUN_CASE=test_chunked $B/tests/cuda/cuda_test_cuda_ops > "$O/ops.log" 2>&1
echo "test_chunked (ops): exit $? ($(tail -1 "$O/ops.log"))"
P=tests/plan/data/vgg16-b256-h100-bf16.json
for b in none 6G 4G 2G; do row vgg16 bf16 256 $b 20 --profile $P --plan-json "$O/vgg16-bf16-$b.json"; done
row vgg16 fp32 256 none 10 --profile-out "$O/vgg16-fp32.json"
for b in 8G 3G; do row vgg16 fp32 256 $b 10 --profile "$O/vgg16-fp32.json" --plan-json "$O/vgg16-fp32-$b.json"; done
row vgg16 fp32 1024 12G 3
