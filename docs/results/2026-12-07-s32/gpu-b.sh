#!/usr/bin/env bash
# Session 32, call 2: issue 32's bf16 b256 points against none in one
# vdnn-bench each (rounds), each net's profile measured at its start:
# ResNet-152 10 / 8 / 6 GiB, ResNet-50 4 GiB (and once more with 10 + 30
# iterations), VGG-16 6 / 4 GiB.
# Everything in $O/s32b.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s32/gpu-b.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s32b}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'xz -T0 "$W"/*.json 2>/dev/null; tar czf "$O/s32b.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
bench() {   # tag net budgets rounds seconds
    timeout $5 $B/vdnn-bench nets/$2.yaml --batch 256 --math bf16 --budgets $3 \
        --policies none,auto --profile-out "$W/$1-profile.json" --warmup 3 --iters 8 --rounds $4 \
        --json "$W/$1.json" > "$W/$1.txt" 2>&1
    echo "== $1: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$W/$1.txt" | cut -c1-150
}
bench r152 resnet152 10G,8G,6G,peak 2 220
bench r50 resnet50 4G,peak 3 120
# ResNet-50 4 GiB's prediction error in vdnn-bench (+2.0 / +4.0% in session
# 31, vdnn-train +1%): the same point with its profile, more warm-up and
# timed iterations
timeout 120 $B/vdnn-bench nets/resnet50.yaml --batch 256 --math bf16 --budgets 4G --policies auto \
    --profile "$W/r50-profile.json" --warmup 10 --iters 30 > "$W/r50-long.txt" 2>&1
echo "== r50 4G, 10 + 30 iterations: exit $? ($SECONDS s)"
grep -E '^[0-9.]+ GiB +auto +yes' "$W/r50-long.txt" | cut -c1-150
bench vgg16 vgg16 6G,4G,peak 3 120
echo "== done at ${SECONDS} s"
