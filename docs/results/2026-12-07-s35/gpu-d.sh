#!/usr/bin/env bash
# Session 35, call D: the rest of issue 32 part 5 on this card: bf16 b256
# ResNet-152 12 / 10 / 8 / 6 GiB and GoogLeNet 4 GiB beside their none
# (vdnn-bench, each profile measured at its start, 2 rounds), then
# PyTorch's checkpointing for the ratios at no more memory: bf16
# channels_last with one checkpoint per ResNet block (ResNet-152 52 units,
# ResNet-50 18), VGG-16 checkpoint_sequential(4), fp32 VGG-16
# checkpoint_sequential(4). Everything in $O/s35d.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s35/gpu-d.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s35d}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'xz -T0 "$W"/*.json "$W"/*.log 2>/dev/null; tar czf "$O/s35d.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
bench() {   # tag net math budgets timeout
    timeout $5 $B/vdnn-bench nets/$2.yaml --batch 256 --math $3 --budgets $4 \
        --policies auto --rounds 2 --profile-out "$W/$1-profile.json" \
        --json "$W/$1.json" > "$W/$1.txt" 2>&1
    echo "== $1: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +auto' "$W/$1.txt" | cut -c1-150
}
bench r152 resnet152 bf16 12G,10G,8G,6G,peak 150
bench googlenet googlenet bf16 4G,peak 80
bench r50 resnet50 bf16 4G,peak 70
bench vgg16 vgg16 bf16 6G,4G,peak 90
tc() {   # tag net math modes segments
    timeout 120 /opt/torch/.venv/bin/python tools/torch_compare.py --net $2 --batch 256 \
        --math $3 --modes $4 --segments $5 --iters 8 --warmup 3 > "$W/$1.log" 2>&1
    echo "== torch $1: exit $? ($SECONDS s)"
    grep -E "^ +[a-z0-9-]+-ckpt +[0-9]" "$W/$1.log" | cut -c1-120
}
tc r152-ckpt resnet152 bf16 bf16-cl-ckpt 52
tc r50-ckpt resnet50 bf16 bf16-cl-ckpt 18
tc vgg16-ckpt vgg16 bf16 bf16-cl-ckpt 4
tc vgg16-fp32-ckpt vgg16 fp32 fp32-ckpt 4
echo "== done at ${SECONDS} s"
