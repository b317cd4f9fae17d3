#!/usr/bin/env bash
# Issue 34 item 1 before any fusion: where the time goes, vdnn beside
# torch.compile, per layer kind (b256 bf16, channels-last for PyTorch).
# Per net: vdnn-bench at policy none (its measured profile kept), vdnn-plan's
# JSON on that profile, torch_kernels.py --compile with it (per-kind table),
# then torch_compare.py with the eager and compiled bf16-cl modes.
# usage (device machine, after tar xJf .carry/BUILD.txz): gpu-base.sh BUILD OUTDIR [NETS]
set -u
B=${1:-build-h100}; O=${2:-/tmp/s18}; mkdir -p "$O"
NETS=${3:-vgg16 resnet50}
D=$(dirname "$0"); DEADLINE=${DEADLINE:-570}
. "$D/../2026-12-05-s15/env.sh"
PY=/opt/torch/.venv/bin/python
left() { echo $(( DEADLINE - SECONDS )); }
for n in $NETS; do
    [ "$(left)" -lt 150 ] && { echo "== $n: skipped ($(left) s left)"; continue; }
    echo "== $n (at ${SECONDS} s)"
    timeout "$(left)" $PY tools/torch_compare.py --net $n --batch 256 --math bf16 \
        --modes bf16-cl,compile-bf16-cl --iters 10 --warmup 3 --vdnn-bin "$B/vdnn-bench" \
        --vdnn-args "--budgets peak --policies none --profile-out $O/$n-prof.json" \
        --vdnn-out "$O/$n-bench.json" --json "$O/$n-compare.json" > "$O/$n-compare.txt" 2>&1
    echo "compare exit $?"
    $B/vdnn-plan nets/$n.yaml --batch 256 --math bf16 --policy none --profile "$O/$n-prof.json" \
        --format json > "$O/$n-plan.json" 2>"$O/$n-plan.err" || cat "$O/$n-plan.err"
    timeout "$(left)" $PY tools/torch_kernels.py --net $n --batch 256 --math bf16 --compile \
        --vdnn-plan "$O/$n-plan.json" --top 12 > "$O/$n-kernels.txt" 2>&1
    echo "kernels exit $?"
done
echo "== done at ${SECONDS} s"
for n in $NETS; do
    echo "---- $n"; grep -A8 "^category" "$O/$n-kernels.txt"; grep "^torch\|^vdnn" "$O/$n-kernels.txt"
    grep -E "no offload|compile" "$O/$n-compare.txt" | tail -4
done
