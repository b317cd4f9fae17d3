#!/usr/bin/env bash
# Session 25, first call (machines were scarce: session 24's gpu-next.sh and
# this session's gpu-b.sh in one call). (1) The sustained profile (9f8fdce,
# never run on a GPU): test_profile, and VGG-16 bf16 none with
# --conv-debug 1 (the profile's line "a pass of the net (option 0) X ms
# timed alone, Y ms under load") and its prediction against the measured
# iteration (session 24, the profile timed alone: +6.8% on the H200).
# The copies' cost to the kernels beside them, now timed under load too
# (the line "profile: copies beside a pass"). (2) gpu-b.sh: the tight
# budgets beside PyTorch checkpointing. Prints as
# it runs; parts skipped near DEADLINE.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-a.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s25a}; mkdir -p "$O"
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
nvidia-smi --query-gpu=name --format=csv,noheader
CK_RUN_CASE=test_profile CK_FORK=no timeout 90 "$B/tests/cuda/cuda_test_cuda_ops" > "$O/t-profile.log" 2>&1
echo "test_profile: exit $? ($SECONDS s)"; grep -E 'Checks|:F:|:E:' "$O/t-profile.log" | tail -2
timeout 60 $B/vdnn-train nets/vgg16.yaml --batch 256 --math bf16 --iters 30 --policy none --conv-debug 1 \
    --step-times-out "$O/vgg16-none-steps.tsv" > "$O/vgg16-none.log" 2>&1
echo "-- vgg16 bf16 none: exit $? ($SECONDS s)"
grep -E "profile: a pass|profile: copies|profile measured|^iteration time|steps beside|^  all" "$O/vgg16-none.log" | cut -c1-160
xz -T0 "$O"/*.tsv
DEADLINE=$(( ${DEADLINE:-520} - SECONDS )) bash "$D/gpu-b.sh" "$B" "$O"
