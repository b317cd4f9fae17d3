#!/usr/bin/env bash
# This session's one GPU call: each part skipped once the call nears its
# 10-minute limit (DEADLINE seconds, default 570). Parts, in order: the
# recompute test and the ResNet rows (gpu-bnrc.sh), the b1024 sub-batches
# (gpu-b1024.sh), VGG-16 with a chunk-timed profile (gpu-chunkprof.sh,
# QUICK), PyTorch's per-block checkpointing of ResNet-152 (torch_compare.py).
# usage (device machine, after tar xJf .carry/BUILD.txz): gpu-all.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/all}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-570}
left() { echo $(( DEADLINE - SECONDS )); }
part() {   # name min-seconds command...
    local n=$1 need=$2; shift 2
    if [ "$(left)" -lt "$need" ]; then echo "== $n: skipped ($(left) s left)"; return; fi
    echo "== $n (at ${SECONDS} s)"
    timeout "$(left)" "$@"
}
part bnrc 150 "$D/gpu-bnrc.sh" "$B" "$O/bnrc"
part b1024 60 "$D/gpu-b1024.sh" "$B" "$O/b1024"
part chunkprof 60 env QUICK=1 "$D/gpu-chunkprof.sh" "$B" "$O/cp"
part torch 60 /opt/torch/.venv/bin/python tools/torch_compare.py --net resnet152 --batch 256 \
    --math bf16 --modes bf16-cl,bf16-cl-ckpt --segments 52 --iters 10 --warmup 3 \
    --json "$O/torch.json" 2>&1 | tail -25
echo "== done at ${SECONDS} s"
