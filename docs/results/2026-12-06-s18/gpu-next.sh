#!/usr/bin/env bash
# Issue 34's targets this session could not measure (no device time left),
# for the next one, one call: fp32 and tf32 without offload beside PyTorch
# eager and torch.compile (VGG-16, ResNet-50, b256), then VGG-16 fp32 at 16
# and 12 GiB against its own none (the ratios 0.974x / 0.945x to keep).
# Parts are skipped once the call nears DEADLINE seconds (default 560).
# usage (device machine, repository root, after unpacking BUILD): gpu-next.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s19}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-560}
. "$D/../2026-12-05-s15/env.sh"
PY=/opt/torch/.venv/bin/python
left() { echo $(( DEADLINE - SECONDS )); }
compare() {   # net math budgets need-seconds
    [ "$(left)" -lt "$4" ] && { echo "== $1 $2: skipped ($(left) s left)"; return; }
    echo "== $1 $2 (at ${SECONDS} s)"
    timeout "$(left)" $PY tools/torch_compare.py --net "$1" --batch 256 --math "$2" \
        --modes "$2,compile-$2" --iters 10 --warmup 6 --vdnn-bin "$B/vdnn-bench" \
        --vdnn-args "--budgets $3 --policies none,auto" --vdnn-out "$O/$1-$2-bench.json" \
        --json "$O/$1-$2-compare.json" > "$O/$1-$2-compare.txt" 2>&1
    echo "exit $?"; grep -E "no offload|first iteration" "$O/$1-$2-compare.txt"
}
compare vgg16 fp32 16G,12G,peak 200
compare resnet50 fp32 peak 120
compare vgg16 tf32 peak 120
compare resnet50 tf32 peak 100
echo "== VGG-16 fp32 against its own none"
grep -E "^ +[0-9.]+G +(none|auto)" "$O/vgg16-fp32-compare.txt" 2>/dev/null
echo "== done at ${SECONDS} s"
