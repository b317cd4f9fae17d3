#!/usr/bin/env bash
# Session 21, the last device minutes: the split layers' fusion pairs timed
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
