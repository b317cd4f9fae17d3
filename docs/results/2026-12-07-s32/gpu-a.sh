#!/usr/bin/env bash
# Session 32, call 1: fp32 VGG-16 b256 beside PyTorch in one call (issue 32
# part 5: 1.5x PyTorch checkpointing within its memory; issue 34: 16 / 12
# GiB against none; issue 32: 8 GiB against none), then the captured iteration's memory and speed on
# GoogLeNet bf16 4 GiB (c41e291: graph memory counted as context; session
# 31 call 5 had --graph auto 6% slower than off, one round each).
# vdnn-bench fp32 VGG-16 16G, 12G, 8G, peak x none, auto in 3 rounds with its
# profile measured at its start (saved), then tools/torch_compare.py
# --modes fp32,fp32-ckpt beside that bench's JSON. GoogLeNet: session 31
# call 4's profile, --graph auto and off, 3 rounds each.
# Everything in $O/s32a.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s32/gpu-a.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s32a}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'xz -T0 "$W"/*.json 2>/dev/null; tar czf "$O/s32a.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 300 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets 16G,12G,8G,peak \
    --policies none,auto --profile-out "$W/vgg16-fp32-profile.json" --warmup 3 --iters 8 --rounds 3 \
    --json "$W/vgg16-fp32.json" > "$W/vgg16-fp32.txt" 2>&1
echo "== vgg16 fp32: exit $? ($SECONDS s)"
grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$W/vgg16-fp32.txt" | cut -c1-150
timeout 200 /opt/torch/.venv/bin/python tools/torch_compare.py --net vgg16 \
    --batch 256 --math fp32 --modes fp32,fp32-ckpt --segments 4 --iters 8 --warmup 3 \
    --vdnn "$W/vgg16-fp32.json" --json "$W/vgg16-fp32-torch.json" > "$W/vgg16-fp32-torch.txt" 2>&1
echo "== torch fp32, fp32-ckpt: exit $? ($SECONDS s)"
grep -vE "^(I|W|V)[0-9]{4} " "$W/vgg16-fp32-torch.txt" | tail -24 | cut -c1-160
xz -dc "$D/../2026-12-07-s31/s31d/googlenet-profile.json.xz" > "$W/g.json"
for g in auto off; do
    timeout 100 $B/vdnn-bench nets/googlenet.yaml --batch 256 --math bf16 --budgets 4G \
        --policies auto --profile "$W/g.json" --graph $g --warmup 3 --iters 8 --rounds 3 \
        > "$W/googlenet-graph-$g.txt" 2>&1
    echo "== googlenet 4G --graph $g: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +auto +yes|^outside|graph' "$W/googlenet-graph-$g.txt" | cut -c1-150
done
rm -f "$W/g.json"
echo "== done at ${SECONDS} s"
