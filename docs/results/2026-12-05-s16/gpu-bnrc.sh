#!/usr/bin/env bash
# Issue 32 items 3-5 with batch norm recomputable, one call: the CUDA test
# of recomputes (batch norm's too) in every math, then ResNet-152 and
# ResNet-50 b256 bf16 at the issue's tight budgets beside vdnn's own none
# (one measured profile per net, the none run's, loaded by the rest).
# usage (device machine, after tar xJf .carry/BUILD.txz): [ITERS=N] gpu-bnrc.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/bnrc}; mkdir -p "$O"
. "$(dirname "$0")/../2026-12-05-s15/env.sh"
CK_RUN_CASE=test_recompute_invariance $B/tests/cuda/cuda_test_cuda_train > "$O/rc.log" 2>&1
echo "test_recompute_invariance: exit $? ($(grep -c 'bitwise ok' "$O/rc.log") maths ok; $(tail -1 "$O/rc.log"))"
row resnet50 bf16 256 none ${ITERS:-20} --profile-out "$O/r50.json"
row resnet50 bf16 256 4G ${ITERS:-20} --profile "$O/r50.json"
row resnet152 bf16 256 none ${ITERS:-20} --profile-out "$O/r152.json"
for b in 10G 8G 6G; do row resnet152 bf16 256 $b ${ITERS:-20} --profile "$O/r152.json"; done
