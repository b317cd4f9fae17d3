#!/usr/bin/env bash
# Session 29, call 2: fp32 VGG-16 b256 beside PyTorch checkpointing
# (checkpoint_sequential(4), tools/torch_compare.py --modes fp32-ckpt),
# vdnn's side the points of call 1's vdnn-bench JSON (16 / 12 / 8 GiB and
# none, in rounds), so that the whole call is PyTorch's (session 28 left it
# 44 s, too few).
# There: bash docs/results/2026-12-07-s29/gpu-b.sh $OUT docs/results/2026-12-07-s29/s29a/vgg16-fp32.json
set -u
O=${1:-/tmp/s29b}; J=$2; mkdir -p "$O"
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 560 /opt/torch/.venv/bin/python tools/torch_compare.py --net vgg16 --batch 256 --math fp32 \
    --modes fp32-ckpt --segments 4 --iters 8 --warmup 3 --vdnn "$J" \
    --json "$O/vgg16-fp32-ckpt.json" > "$O/vgg16-fp32-ckpt.txt" 2>&1
echo "exit $? (at $SECONDS s)"
grep -vE "^(I|W|V)[0-9]{4} " "$O/vgg16-fp32-ckpt.txt" | tail -22 | cut -c1-160
