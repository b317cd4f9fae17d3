#!/usr/bin/env bash
# Session 21, second call: where the offload points' time goes, the steps
# grouped by the copies beside them (--step-times' new rows), captured
# iterations, bf16 b256 (ResNet-152 8 / 10 GiB, ResNet-50 4 GiB, VGG-16 4 /
# 6 GiB; AlexNet without offload, +4.3% in gpu-a.sh); VGG-16 fp32 none, 16 and 12 GiB in one vdnn-bench process (issue
# 34: offload keeps its ratio to none, 0.974x / 0.945x).
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-b.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s21b}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-330}
. "$D/../2026-12-05-s15/env.sh"
left() { echo $(( DEADLINE - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
steps() {   # net budget
    [ "$(left)" -lt 50 ] && { echo "== steps $1 $2: skipped"; return; }
    timeout 50 $B/vdnn-train nets/$1.yaml --batch 256 --math bf16 --budget $2 --iters 12 \
        --step-times > "$O/$1-$2-steps.log" 2>&1
    echo "-- vdnn-train $1 $2 --step-times: exit $? (at $SECONDS s)"
    grep -E '^iteration time|^  all|steps beside|^  D2H:|^  H2D:' "$O/$1-$2-steps.log"
}
steps alexnet 30G
steps resnet152 8G
steps resnet152 10G
steps resnet50 4G
steps vgg16 4G
steps vgg16 6G
echo "== VGG-16 fp32 none / 16 / 12 GiB (at ${SECONDS} s)"
timeout 150 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets 16G,12G,peak \
    --policies none,auto --warmup 3 --iters 6 > "$O/vgg16-fp32-bench.txt" 2>&1
echo "exit $? (at $SECONDS s)"
grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/vgg16-fp32-bench.txt" | cut -c1-150
echo "== done at ${SECONDS} s"
