#!/usr/bin/env bash
# Session 19's second call (same warm H100 as gpu-a.sh): issue 34's fp32 /
# tf32 targets without offload beside PyTorch eager, and torch.compile where
# it compiles in the time left (VGG-16 fp32's compile did not finish in 5
# minutes in gpu-a.sh, so VGG-16 tf32 runs beside eager only).
# usage (device machine, after tar xJf .carry/BUILD.txz): gpu-b.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s19b}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-560}
. "$D/../2026-12-05-s15/env.sh"
PY=/opt/torch/.venv/bin/python
left() { echo $(( DEADLINE - SECONDS )); }
compare() {   # net math modes need-seconds
    [ "$(left)" -lt "$4" ] && { echo "== $1 $2: skipped ($(left) s left)"; return; }
    echo "== $1 $2 $3 (at ${SECONDS} s)"
    timeout "$(left)" $PY tools/torch_compare.py --net "$1" --batch 256 --math "$2" \
        --modes "$3" --iters 10 --warmup 6 --vdnn-bin "$B/vdnn-bench" \
        --vdnn-args "--budgets peak --policies none" --vdnn-out "$O/$1-$2-bench.json" \
        --json "$O/$1-$2-compare.json" > "$O/$1-$2-compare.txt" 2>&1
    echo "exit $?"; grep -E "^pytorch|s/iter|compile" "$O/$1-$2-compare.txt" | grep -v Warn | tail -8
}
compare resnet50 tf32 tf32,compile-tf32 150
compare vgg16 tf32 tf32 100
compare resnet50 fp32 fp32,compile-fp32 150
echo "== done at ${SECONDS} s"
