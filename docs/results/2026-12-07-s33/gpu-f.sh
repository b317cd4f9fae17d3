#!/usr/bin/env bash
# Session 33, prepared for the next call (not run: the session's device
# time was spent): the replayed pick (1a43e54) on the GPU. vdnn-bench bf16
# b256, each profile measured at its start (then the backend made again),
# 2 rounds: ResNet-152 none / 12 / 10 / 8 GiB (predicted on session 33's
# profile: 101.0 / 103.7 / 106.3 ms replayed, recomputing, where the
# search's offloading plans predict 103.8 / 106.6 / 109.2) and ResNet-50
# none / 5500 MiB / 4 GiB. Everything in $O/s33f.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s33/gpu-f.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s33f}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'tar czf "$O/s33f.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
bench() {   # tag net budgets
    timeout 200 $B/vdnn-bench nets/$2.yaml --batch 256 --math bf16 --budgets $3 \
        --policies auto --rounds 2 --profile-out "$W/$1-profile.json" > "$W/$1.txt" 2>&1
    echo "== $1: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +auto' "$W/$1.txt" | cut -c1-150
}
bench r152 resnet152 12G,10G,8G,peak
bench r50 resnet50 5500M,4G,peak
xz -T0 "$W"/*.json
echo "== done at ${SECONDS} s"
