#!/usr/bin/env bash
# Session 20's second call: issue 32 item 5 (speed at tight budgets against
# vdnn's own none in the same vdnn-bench process, and against PyTorch
# bf16 channels-last checkpointing, one checkpoint per block for ResNets)
# at the tree of gpu-a.sh. Parts are skipped near DEADLINE seconds.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-b.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s20b}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-560}
. "$D/../2026-12-05-s15/env.sh"
PY=/opt/torch/.venv/bin/python
left() { echo $(( DEADLINE - SECONDS )); }
compare() {   # net math segments budgets modes need-seconds
    [ "$(left)" -lt "$6" ] && { echo "== $1 $2: skipped ($(left) s left)"; return; }
    echo "== $1 $2 $4 (at ${SECONDS} s)"
    timeout "$(left)" $PY tools/torch_compare.py --net "$1" --batch 256 --math "$2" --modes "$5" \
        --segments "$3" --iters 8 --warmup 3 --vdnn-bin "$B/vdnn-bench" \
        --vdnn-args "--budgets $4 --policies none,auto" --vdnn-out "$O/$1-$2-bench.json" \
        --json "$O/$1-$2-compare.json" > "$O/$1-$2-compare.txt" 2>&1
    echo "exit $?"
    grep -E '^[0-9.]+ GiB +(none|auto) ' "$O/$1-$2-compare.txt" | cut -c1-130
    grep -E 'checkpoint  vdnn|no offload  vdnn' "$O/$1-$2-compare.txt"
}
nvidia-smi --query-gpu=name --format=csv,noheader
compare resnet152 bf16 52 10G,8G,6G,peak bf16-cl-ckpt 200
compare resnet50 bf16 18 4G,peak bf16-cl-ckpt 90
compare vgg16 bf16 4 6G,4G,peak bf16-cl-ckpt 90
compare vgg16 fp32 4 8G,peak fp32-ckpt 120
echo "== done at ${SECONDS} s"
