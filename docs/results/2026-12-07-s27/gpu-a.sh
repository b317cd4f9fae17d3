#!/usr/bin/env bash
# Session 27 (not run: no device machine started), meant as its first
# call: issue 32 part 5 with --graph auto (the default since dfb13fc:
# offloading plans run eagerly), on the card where one is lent:
# vdnn-bench none / auto at the tight budgets beside PyTorch channels-last
# checkpointing (one checkpoint per block for the ResNets), all through
# tools/torch_compare.py. bf16 ResNet-152 10 / 8 / 6 GiB, ResNet-50 4 GiB,
# VGG-16 6 / 4 GiB; fp32 VGG-16 8 GiB. Prints as it runs.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-a.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s27a}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-520}   # (counted from its own start)
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
left() { echo $(( DEADLINE - SECONDS )); }
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
PY=/opt/torch/.venv/bin/python
compare() {   # net math segments budgets modes need-seconds
    [ "$(left)" -lt "$6" ] && { echo "== $1 $2: skipped ($(left) s left)"; return; }
    echo "== $1 $2 $4 (at ${SECONDS} s)"
    timeout "$(left)" $PY tools/torch_compare.py --net "$1" --batch 256 --math "$2" --modes "$5" \
        --segments "$3" --iters 8 --warmup 3 --vdnn-bin "$B/vdnn-bench" \
        --vdnn-args "--budgets $4 --policies none,auto" --vdnn-out "$O/$1-$2-bench.json" \
        --json "$O/$1-$2-compare.json" > "$O/$1-$2-compare.txt" 2>&1
    echo "exit $?"
    grep -E '^[0-9.]+ GiB +(none|auto) ' "$O/$1-$2-compare.txt" | cut -c1-140
    grep -E 'checkpoint  vdnn|no offload  vdnn' "$O/$1-$2-compare.txt"
}
compare resnet152 bf16 52 10G,8G,6G,peak bf16-cl-ckpt 150
compare resnet50 bf16 18 4G,peak bf16-cl-ckpt 60
compare vgg16 bf16 4 6G,4G,peak bf16-cl-ckpt 80
compare vgg16 fp32 4 8G,peak fp32-ckpt 120
xz -T0 "$O"/*.json
echo "== done at ${SECONDS} s"
