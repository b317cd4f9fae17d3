#!/usr/bin/env bash
# Session 37, call A: session 36's last build (busy copy rates from a pass
# of the net, split_largest, refine_again, the flips), each vdnn-bench
# measuring its own profile, 1 round, auto against none: fp32 VGG-16 b256
# 16 / 12 / 10 / 8 / 5 / 4 GiB (issue 32 parts 4-5, issue 34's 16 / 12
# GiB), then bf16 b256 ResNet-152 12 / 10 / 8 / 6 GiB, ResNet-50 4 GiB,
# VGG-16 6 / 4 GiB, GoogLeNet 4 GiB (issue 32 part 5). --conv-debug 1
# prints the copy rates beside a pass and beside the kernel.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s37/gpu-a.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s37a}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
trap 'xz -T0 "$W"/*.json 2>/dev/null; tar czf "$O/s37a.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
bench() {   # name net math budgets
    timeout 240 $B/vdnn-bench nets/$2.yaml --batch 256 --math $3 --budgets $4 \
        --policies auto --rounds 1 --conv-debug 1 --json "$W/$1.json" > "$W/$1.txt" 2>&1
    echo "== $1: exit $? ($SECONDS s)"
    grep -E "copies beside a pass" "$W/$1.txt" | cut -c1-160
    grep -E '^[0-9.]+ GiB +auto' "$W/$1.txt" | cut -c1-150
}
bench vgg16-fp32 vgg16 fp32 16G,12G,10G,8G,5G,4G,peak
bench resnet152-bf16 resnet152 bf16 12G,10G,8G,6G,peak
bench resnet50-bf16 resnet50 bf16 4G,peak
bench vgg16-bf16 vgg16 bf16 6G,4G,peak
bench googlenet-bf16 googlenet bf16 4G,peak
echo "== done at ${SECONDS} s"
