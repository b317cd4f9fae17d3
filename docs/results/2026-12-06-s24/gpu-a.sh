#!/usr/bin/env bash
# Session 24, first call. (1) The synthetic replay on the GPU (session 23's
# gpu-c.sh, never run): its CUDA tests, vdnn-train's replay count, --graph
# on / off byte-identical checkpoints. (2) Where the split convolutions'
# backward chunks lose 0.10-0.18 ms each (session 23: every `bwd
# features.N xK` over its chunk timing by about that much, whatever its
# size): VGG-16 bf16 step times at 4 GiB replayed (the synthetic replay now
# captures vdnn-train's iteration, timing marks inside the graph) and eager,
# and at no budget unsplit and with every layer split in 4 (no copies). If the
# replayed chunks run to their timings, the host's launches are the cost.
# (3) fp32 VGG-16 at 16 and 12 GiB against its none (issue 34 keeps 0.974x /
# 0.945x); (4) VGG-16 fp32 beside torch.compile with what is left (>= 300 s).
# The first try (DEADLINE 540, the summary to a file) hit the call's 600 s
# and returned nothing: the summary now goes to standard output as it runs.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-a.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s24a}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-560}
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
left() { echo $(( DEADLINE - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
CK_RUN_CASE=test_graph_vs_eager CK_FORK=no timeout 120 "$B/tests/cuda/cuda_test_cuda_train" > "$O/t-graph.log" 2>&1
echo "test_graph_vs_eager: exit $? ($SECONDS s)"; grep -E 'Checks|:F:|:E:' "$O/t-graph.log" | tail -2
grep -c "synthetic batches.*graph bitwise ok" "$O/t-graph.log"
for c in test_synth_slot_replay test_fill_synthetic test_fill_synthetic_f16; do
    CK_RUN_CASE=$c CK_FORK=no timeout 60 "$B/tests/cuda/cuda_test_cuda_ops" > "$O/t-$c.log" 2>&1
    echo "$c: exit $?"; grep -E 'Checks|:F:|:E:' "$O/t-$c.log" | tail -1
done
for g in on off; do
    timeout 60 $B/vdnn-train nets/resnet50.yaml --batch 256 --math bf16 --iters 30 --deterministic \
        --graph $g --save "$O/r50-$g.ckpt" > "$O/r50-graph-$g.log" 2>&1
    echo "-- resnet50 bf16 --graph $g: exit $? ($SECONDS s)"
    grep -E "captured iteration|^iteration time|^end to end" "$O/r50-graph-$g.log" | cut -c1-160
done
cmp "$O/r50-on.ckpt" "$O/r50-off.ckpt" && echo "checkpoints --graph on / off: identical"
rm -f "$O"/r50-*.ckpt
V="nets/vgg16.yaml --batch 256 --math bf16 --iters 12"
run_steps() {   # name, then vdnn-train's options
    local n=$1; shift
    timeout 60 $B/vdnn-train $V --step-times-out "$O/vgg16-$n-steps.tsv" "$@" > "$O/vgg16-$n.log" 2>&1
    echo "-- vgg16 bf16 $n: exit $? ($SECONDS s)"
    grep -E '^iteration time|split layers|captured iteration|steps beside' "$O/vgg16-$n.log" | cut -c1-150
}
run_steps 4G-replay --budget 4G --profile-out "$O/vgg16-bf16-profile.json"
run_steps 4G-eager --budget 4G --graph off --profile "$O/vgg16-bf16-profile.json"
run_steps none-replay --policy none --profile "$O/vgg16-bf16-profile.json"
run_steps none-k4-replay --policy none --chunks 4 --profile "$O/vgg16-bf16-profile.json"
run_steps none-k4-eager --policy none --chunks 4 --graph off --profile "$O/vgg16-bf16-profile.json"
timeout 120 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets 16G,12G,peak \
    --policies none,auto --warmup 3 --iters 8 --json "$O/vgg16-fp32-bench.json" > "$O/vgg16-fp32-bench.txt" 2>&1
echo "-- vdnn-bench vgg16 fp32 16G,12G,none: exit $? ($SECONDS s)"
grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/vgg16-fp32-bench.txt" | cut -c1-130
PY=/opt/torch/.venv/bin/python
if [ "$(left)" -lt 300 ]; then echo "== VGG-16 fp32 beside torch.compile: skipped ($(left) s left)"; else
echo "== compile-fp32 with $(left) s (at $SECONDS s)"
timeout "$(left)" $PY tools/torch_compare.py --net vgg16 --batch 256 --math fp32 --modes compile-fp32 \
    --iters 8 --warmup 3 --vdnn "$O/vgg16-fp32-bench.json" --json "$O/vgg16-fp32-compile.json" \
    > "$O/vgg16-fp32-compile.txt" 2>&1
echo "exit $? (at $SECONDS s)"; tail -12 "$O/vgg16-fp32-compile.txt"
fi
xz -T0 "$O"/*.json "$O"/*.tsv 2>/dev/null
echo "== done at ${SECONDS} s"
