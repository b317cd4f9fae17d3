#!/usr/bin/env bash
# Session 26, the last call (what device time was left): vdnn-bench bf16
# b256 none / auto at the tight budgets with --graph auto (dfb13fc: the
# offloading plans eager), ResNet-152, ResNet-50, VGG-16; no PyTorch.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-d.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s26d}; mkdir -p "$O"
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
nvidia-smi --query-gpu=name --format=csv,noheader
bench() {   # net budgets
    timeout 100 $B/vdnn-bench nets/$1.yaml --batch 256 --math bf16 --budgets "$2" --policies none,auto \
        --warmup 3 --iters 8 --json "$O/$1-bench.json" > "$O/$1-bench.txt" 2>&1
    echo "== $1: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/$1-bench.txt" | cut -c1-150
}
bench resnet152 10G,8G,6G,peak
bench resnet50 4G,peak
bench vgg16 6G,4G,peak
xz -T0 "$O"/*.json
