#!/usr/bin/env bash
# Session 23, third call: (1) synthetic batches made on the device replay
# the captured iteration (synth-replay.md): the CUDA tests, vdnn-train's
# replay count, --graph on / off byte-identical checkpoints and their
# iteration times; (2) VGG-16 fp32 beside torch.compile (issue 34: >= 1.0x
# where it compiles within 10 minutes; session 22's call gave it 280 s):
# vdnn-bench's none first, then the compile with what the call has left
# (skipped under 300 s).
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-c.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s23c}; mkdir -p "$O"
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
if [ "$(left)" -lt 300 ]; then echo "== VGG-16 fp32 beside torch.compile: skipped ($(left) s left)"; else
timeout 90 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets peak --policies none \
    --warmup 3 --iters 8 --json "$O/vgg16-fp32-bench.json" > "$O/vgg16-fp32-bench.txt" 2>&1
echo "-- vdnn-bench vgg16 fp32 none: exit $? ($SECONDS s)"
python3 -c "import json,sys; d=json.load(open(sys.argv[1])); print([(p['policy'], p['iter_s'], p['predicted_s']) for p in d['points'] if p['feasible']])" "$O/vgg16-fp32-bench.json"
PY=/opt/torch/.venv/bin/python
echo "== compile-fp32 with $(left) s (at $SECONDS s)"
timeout "$(left)" $PY tools/torch_compare.py --net vgg16 --batch 256 --math fp32 --modes compile-fp32 \
    --iters 8 --warmup 3 --vdnn "$O/vgg16-fp32-bench.json" --json "$O/vgg16-fp32-compile.json" \
    > "$O/vgg16-fp32-compile.txt" 2>&1
echo "exit $? (at $SECONDS s)"; tail -12 "$O/vgg16-fp32-compile.txt"
fi
echo "== done at ${SECONDS} s"
