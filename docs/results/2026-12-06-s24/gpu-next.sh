#!/usr/bin/env bash
# The first call of the next session: the sustained profile (9f8fdce,
# never run on a GPU). (1) test_profile; (2) VGG-16 bf16 none with
# --conv-debug 1: the profile's line "a pass of the net (option 0) X ms
# timed alone, Y ms under load", and the prediction against the measured
# iteration (session 24, profile timed alone: +9%); (3) vdnn-bench VGG-16
# 6G,4G and ResNet-50 4G against none (session 24: predictions +7.8%,
# +12.0%, +6.9%). Prints as it runs; keeps under 300 s.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-next.sh BUILD OUTDIR
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
grep -E "profile: a pass|profile measured|^iteration time|steps beside" "$O/vgg16-none.log" | cut -c1-160
for spec in "vgg16 6G,4G,peak" "resnet50 4G,peak"; do
    set -- $spec
    timeout 90 $B/vdnn-bench nets/$1.yaml --batch 256 --math bf16 --budgets $2 --policies none,auto \
        --warmup 3 --iters 8 > "$O/$1-bench.txt" 2>&1
    echo "-- vdnn-bench $1: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/$1-bench.txt" | cut -c1-140
done
xz -T0 "$O"/*.tsv
echo "== done at ${SECONDS} s"
