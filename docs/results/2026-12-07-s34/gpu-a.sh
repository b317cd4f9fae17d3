#!/usr/bin/env bash
# Session 34, call 1: session 33's replayed pick (1a43e54) and the fresh
# backend (5acf30f) at the tight bf16 points of issue 32. vdnn-bench bf16
# b256, each profile measured at its start (then the backend made again),
# 2 rounds: ResNet-152 12 / 10 / 8 / 6 GiB, ResNet-50 5500 MiB / 4 GiB,
# VGG-16 6 / 4 GiB, each beside its none (peak). Everything in $O/s34a.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s34/gpu-a.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s34a}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'xz -T0 "$W"/*.json; tar czf "$O/s34a.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
bench() {   # tag net budgets timeout
    timeout $4 $B/vdnn-bench nets/$2.yaml --batch 256 --math bf16 --budgets $3 \
        --policies auto --rounds 2 --profile-out "$W/$1-profile.json" \
        --json "$W/$1.json" > "$W/$1.txt" 2>&1
    echo "== $1: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +auto' "$W/$1.txt" | cut -c1-150
}
bench r152 resnet152 12G,10G,8G,6G,peak 260
bench r50 resnet50 5500M,4G,peak 120
bench vgg16 vgg16 6G,4G,peak 150
echo "== done at ${SECONDS} s"
