#!/usr/bin/env bash
# Session 35, call A: issue 32 part 5's points on whatever card comes (the
# H200 the issue names, if it does), vdnn-bench b256, each net's profile
# measured at its start, 2 rounds, every point beside its none (peak):
# bf16 ResNet-152 12 / 10 / 8 / 6 GiB, ResNet-50 4 GiB, VGG-16 6 / 4 GiB,
# GoogLeNet 4 GiB; fp32 VGG-16 16 / 12 / 8 / 6 GiB (session 34's plans:
# the coarser split's longer search, 9f41285). Then the copy rates a
# profile measures beside a pass (--conv-debug 1) for fp32 VGG-16.
# Everything in $O/s35a.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s35/gpu-a.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s35a}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'xz -T0 "$W"/*.json "$W"/*.log 2>/dev/null; tar czf "$O/s35a.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
bench() {   # tag net math budgets timeout
    timeout $5 $B/vdnn-bench nets/$2.yaml --batch 256 --math $3 --budgets $4 \
        --policies auto --rounds 2 --profile-out "$W/$1-profile.json" \
        --json "$W/$1.json" > "$W/$1.txt" 2>&1
    echo "== $1: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +auto' "$W/$1.txt" | cut -c1-150
}
bench r152 resnet152 bf16 12G,10G,8G,6G,peak 150
bench r50 resnet50 bf16 4G,peak 80
bench vgg16 vgg16 bf16 6G,4G,peak 100
bench googlenet googlenet bf16 4G,peak 80
bench vgg16-fp32 vgg16 fp32 16G,12G,8G,6G,peak 240
timeout 60 $B/vdnn-train nets/vgg16.yaml --batch 256 --math fp32 --budget 8G --iters 1 \
    --conv-debug 1 --profile-out "$W/vgg16-fp32-rates-profile.json" > "$W/vgg16-fp32-rates.log" 2>&1
echo "== vgg16 fp32 rates: exit $? ($SECONDS s)"
grep -E "copies beside a pass" "$W/vgg16-fp32-rates.log" | cut -c1-240
echo "== done at ${SECONDS} s"
