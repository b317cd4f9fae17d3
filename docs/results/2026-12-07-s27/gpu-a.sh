#!/usr/bin/env bash
# Session 27 (not run: no device machine started), meant as its first
# call: issue 32 part 5 with --graph auto (the default since dfb13fc:
# offloading plans run eagerly), on the card where one is lent:
# session 25's gpu-b.sh again (vdnn-bench none / auto at the bf16 tight
# budgets beside PyTorch channels-last checkpointing through
# tools/torch_compare.py: ResNet-152 10 / 8 / 6 GiB, VGG-16 6 / 4 GiB,
# ResNet-50 4 GiB), then fp32 VGG-16 8 GiB beside checkpoint_sequential(4).
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-a.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s27a}; mkdir -p "$O"
D=$(dirname "$0")
DEADLINE=${DEADLINE:-400} bash "$D/../2026-12-07-s25/gpu-b.sh" "$B" "$O"
. "$D/../2026-12-05-s15/env.sh"   # the libraries, for vdnn-bench under torch_compare.py
echo "== vgg16 fp32 8G,peak (at ${SECONDS} s)"
timeout 150 /opt/torch/.venv/bin/python tools/torch_compare.py --net vgg16 --batch 256 --math fp32 \
    --modes fp32-ckpt --segments 4 --iters 8 --warmup 3 --vdnn-bin "$B/vdnn-bench" \
    --vdnn-args "--budgets 8G,peak --policies none,auto" --vdnn-out "$O/vgg16-fp32-bench.json" \
    --json "$O/vgg16-fp32-compare.json" > "$O/vgg16-fp32-compare.txt" 2>&1
echo "exit $?"
grep -E '^[0-9.]+ GiB +(none|auto) |checkpoint  vdnn' "$O/vgg16-fp32-compare.txt" | cut -c1-140
xz -T0 "$O"/vgg16-fp32-*.json
echo "== done at ${SECONDS} s"
