#!/usr/bin/env bash
# Session 30, call 1: every tight-budget point of issues 32 and 34 in rounds
# beside none (vdnn-bench --rounds), on the tree with the start order of
# session 29 (ResNet-152 planned slower with more memory), each net's
# profile measured by its own vdnn-bench at its start. bf16 b256:
# ResNet-152 10 / 8 / 6 GiB, VGG-16 6 / 4 GiB, ResNet-50 4 GiB, GoogLeNet
# 4 GiB; fp32 VGG-16 16 / 12 / 8 GiB. Then the saved fp32 VGG-16 profile
# reused with one layer split by hand (session 29: exit 8, log lost).
# Everything in $O/s30a.tgz (a call brings back only a few files).
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s30/gpu-a.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s30a}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
DEADLINE=${DEADLINE:-570}
trap 'xz -T0 "$W"/*.json; tar czf "$O/s30a.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
bench() {   # tag net math budgets rounds
    local tag=$1 net=$2 math=$3 budgets=$4 rounds=$5
    [ $(( DEADLINE - SECONDS )) -lt 60 ] && { echo "== $tag: skipped"; return; }
    timeout $(( DEADLINE - SECONDS )) $B/vdnn-bench nets/$net.yaml --batch 256 --math $math \
        --budgets "$budgets" --policies none,auto --profile-out "$W/$tag-profile.json" \
        --warmup 3 --iters 8 --rounds $rounds --json "$W/$tag.json" > "$W/$tag.txt" 2>&1
    echo "== $tag: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$W/$tag.txt" | cut -c1-150
}
bench r152 resnet152 bf16 10G,8G,6G,peak 3
bench vgg16-fp32 vgg16 fp32 16G,12G,8G,peak 2
bench vgg16 vgg16 bf16 6G,4G,peak 2
bench r50 resnet50 bf16 4G,peak 2
bench googlenet googlenet bf16 4G,peak 2
P=$W/vgg16-fp32-profile.json
if [ -f "$P" ] && [ $(( DEADLINE - SECONDS )) -gt 40 ]; then
    timeout $(( DEADLINE - SECONDS - 5 )) $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 \
        --budgets 12G --policies auto --profile "$P" --chunks features.5=2 --warmup 1 --iters 2 \
        > "$W/vgg16-fp32-12G-split.txt" 2>&1
    echo "== 12G --profile P --chunks features.5=2: exit $? ($SECONDS s)"
    grep -iE 'error|option|fail|^[0-9.]+ GiB' "$W/vgg16-fp32-12G-split.txt" | head -5 | cut -c1-300
fi
echo "== done at ${SECONDS} s"
