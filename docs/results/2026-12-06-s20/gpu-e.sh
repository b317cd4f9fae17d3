#!/usr/bin/env bash
# Session 20's last device minutes: ResNet-152 bf16 b256 at 10 and 8 GiB
# beside its none in one vdnn-bench process, with auto's start from the
# bound's recompute set (seed.md), against gpu-b.sh's 0.818x / 0.803x.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-e.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s20e}; mkdir -p "$O"
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 170 $B/vdnn-bench nets/resnet152.yaml --batch 256 --math bf16 --budgets 10G,8G,peak \
    --policies none,auto --warmup 3 --iters 8 > "$O/r152.txt" 2>&1
echo "exit $? at ${SECONDS} s"
grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/r152.txt" | cut -c1-140
