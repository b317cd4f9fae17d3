#!/usr/bin/env bash
# Issue 32's measurements left at session 16, one call: each part skipped
# once the call nears its 10-minute limit (DEADLINE seconds, default 560).
# In order: ResNet-152 b256 bf16 beside PyTorch's per-block checkpointing
# (torch_compare.py runs vdnn-bench at none and 10 / 8 / 6 GiB first, then
# PyTorch bf16 channels_last plain and checkpointed: 52 units, one segment
# each), VGG-16 with a chunk-timed profile (session 16's gpu-chunkprof.sh,
# QUICK), VGG-16 b1024 fp32 near its floor, ResNet-50 at 4 GiB beside
# PyTorch's per-block checkpointing (18 units).
# usage (device machine, after tar xJf .carry/BUILD.txz): gpu-s17.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s17}; mkdir -p "$O"
D=$(dirname "$0"); S16=$D/../2026-12-05-s16; DEADLINE=${DEADLINE:-560}
. "$D/../2026-12-05-s15/env.sh"
PY=/opt/torch/.venv/bin/python
left() { echo $(( DEADLINE - SECONDS )); }
part() {   # name min-seconds command...
    local n=$1 need=$2; shift 2
    if [ "$(left)" -lt "$need" ]; then echo "== $n: skipped ($(left) s left)"; return; fi
    echo "== $n (at ${SECONDS} s)"
    if declare -F "$1" >/dev/null; then "$@"   # a function here (its runs time out on their own)
    else timeout "$(left)" "$@"; fi
}
compare() {   # net segments budgets
    timeout "$(left)" $PY tools/torch_compare.py --net "$1" --batch 256 --math bf16 --modes bf16-cl,bf16-cl-ckpt \
        --segments "$2" --iters 10 --warmup 3 --vdnn-bin "$B/vdnn-bench" \
        --vdnn-args "--budgets $3 --policies none,auto" --vdnn-out "$O/$1-bench.json" \
        --json "$O/$1-compare.json" > "$O/$1-compare.txt" 2>&1
    echo "exit $?"; tail -30 "$O/$1-compare.txt"
}
part r152-torch 200 compare resnet152 52 10G,8G,6G,peak
part chunkprof 100 env QUICK=1 "$S16/gpu-chunkprof.sh" "$B" "$O/cp"
part b1024 150 row vgg16 fp32 1024 7G 3 --analytic-profile
part r50-torch 90 compare resnet50 18 4G,peak
echo "== done at ${SECONDS} s"
