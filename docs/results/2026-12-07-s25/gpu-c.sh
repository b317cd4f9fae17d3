#!/usr/bin/env bash
# Session 25, third call: VGG-16 fp32 beside torch.compile (issue 34's
# ">= 1.0x torch.compile where it compiles within 10 minutes"; sessions 19
# and 24 did not get it to finish). vdnn-bench none (peak) first, then
# tools/torch_compare.py --modes compile-fp32 with what is left of the
# call. Inductor's caches go to /tmp/inductor-s25 (TORCHINDUCTOR_CACHE_DIR),
# which a second call on the same warm machine reuses: what it compiled is
# then loaded, not compiled again (say so where it is quoted).
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-c.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s25c}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-570}
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-s25
left() { echo $(( DEADLINE - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
ls -d "$TORCHINDUCTOR_CACHE_DIR" 2>/dev/null && du -sh "$TORCHINDUCTOR_CACHE_DIR"
[ -f "$O/vgg16-fp32-bench.json" ] || {
    timeout 120 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets peak --policies none \
        --warmup 3 --iters 8 --json "$O/vgg16-fp32-bench.json" > "$O/vgg16-fp32-bench.txt" 2>&1
    echo "-- vdnn-bench vgg16 fp32 none: exit $? ($SECONDS s)"; }
grep -E '^[0-9.]+ GiB +none +yes' "$O/vgg16-fp32-bench.txt" | cut -c1-130
echo "== compile-fp32 with $(left) s (at $SECONDS s)"
timeout "$(left)" /opt/torch/.venv/bin/python tools/torch_compare.py --net vgg16 --batch 256 --math fp32 \
    --modes compile-fp32 --iters 8 --warmup 3 --vdnn "$O/vgg16-fp32-bench.json" \
    --json "$O/vgg16-fp32-compile.json" > "$O/vgg16-fp32-compile.txt" 2>&1
echo "exit $? (at $SECONDS s)"; tail -12 "$O/vgg16-fp32-compile.txt"
echo "== done at ${SECONDS} s"
