#!/usr/bin/env bash
# Session 19's last call: the merged tree (BUILD) beside the session's start
# (OLD, ce4df34) on one warm card. In order, each part skipped once the call
# nears DEADLINE seconds (default 450):
#  1. CUDA tests of the session's CUDA code: cuda_test_cuda_ops whole, the
#     cases of cuda_test_cuda_train in TESTS_TRAIN;
#  2. b256 bf16 policy none, vdnn-bench, each run measuring its own profile:
#     ResNet-50 and VGG-16, OLD against BUILD (the backward fusions) and
#     BUILD --no-fuse;
#  3. offload predictions with the busy copy rates (predict-offload-model.md):
#     vdnn-train --step-times at ResNet-50 4 GiB and VGG-16 bf16 6 GiB;
#  4. VGG-16 fp32 at 12 GiB (auto now splits above the unsplit floor) beside
#     its own none;
#  5. tf32 channels-last: ResNet-50 / VGG-16 tf32 none, OLD against BUILD;
#  6. vdnn-predict GoogLeNet b64 at its floor (offloads; predict-offload.md)
#     against the whole batch;
#  7. step times at ResNet-152 8 GiB.
# usage (device machine, after unpacking both builds): gpu-c.sh BUILD OLD OUTDIR
set -u
B=${1:-build-h100}; OLD=${2:-old/build-h100}; O=${3:-/tmp/s19c}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-450}
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
left() { echo $(( DEADLINE - SECONDS )); }
TESTS_TRAIN=${TESTS_TRAIN:-"test_relu_fused_into_bn_and_add test_inference_cpu_vs_cuda test_cpu_vs_cuda test_conv_bias_relu_fused test_deterministic_and_offload_invariance test_graph_vs_eager"}
tcase() {   # binary case limit
    [ "$(left)" -lt 30 ] && { echo "$2: skipped"; return; }
    CK_RUN_CASE=$2 CK_FORK=no timeout "$3" "$B/tests/cuda/$1" > "$O/$2.log" 2>&1
    echo "$2: exit $? ($SECONDS s)"; grep -E 'Checks|:F:|:E:' "$O/$2.log" | tail -4
}
ROWS=()
bench() {   # bin net math tag budgets args...
    local bin=$1 n=$2 m=$3 tag=$4 bud=$5; shift 5
    [ "$(left)" -lt 45 ] && { ROWS+=("$n $m $tag: skipped"); return; }
    timeout "$(left)" $bin/vdnn-bench nets/$n.yaml --batch 256 --math $m --budgets $bud \
        --policies none,auto --warmup 6 --iters 10 --csv "$O/$n-$m-$tag.csv" "$@" \
        > "$O/$n-$m-$tag.log" 2>&1
    local rc=$?
    ROWS+=("$(python3 - "$O/$n-$m-$tag.csv" "$n $m $tag rc=$rc" <<'PY'
import csv, sys
out = [sys.argv[2]]
try:
    for r in csv.DictReader(open(sys.argv[1])):
        if r.get('iter_s'):
            out.append('%.2fG/%s %s s pred %s' % (float(r['budget_gib']), r['policy'],
                                                  r['iter_s'], r['predicted_s']))
except OSError:
    pass
print(' | '.join(out))
PY
)")
}
st() {   # net math budget
    [ "$(left)" -lt "$4" ] && { ROWS+=("step-times $1 $2 $3: skipped"); return; }
    local p="$O/st-$1-$2-$3"
    row "$1" "$2" 256 "$3" 20 --step-times --profile-out "$p.profile.json"
    mv "$O/$1-$2-256-$3.log" "$p.log"
    ROWS+=("step-times $1 $2 $3: $(grep -o 'measured [0-9.]* s ([0-9.]* img/s), predicted [0-9.]* s ([^)]*)' "$p.log")")
    python3 - "$p.profile.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))['device']
g = lambda k: d.get(k, 0) / 1e9
print('  profile GB/s: D2H %.1f alone %.1f busy | H2D %.1f alone %.1f busy' % (g('d2h_bw'), g('d2h_bw_busy'), g('h2d_bw'), g('h2d_bw_busy')))
PY
    grep -E '^  (D2H|H2D):' "$p.log"
}
echo "== tests (at ${SECONDS} s)"
CK_FORK=no timeout 150 "$B/tests/cuda/cuda_test_cuda_ops" > "$O/ops.log" 2>&1
echo "cuda_test_cuda_ops: exit $? ($SECONDS s)"; grep -E 'Checks|:F:|:E:' "$O/ops.log" | tail -6
for c in $TESTS_TRAIN; do tcase cuda_test_cuda_train $c 90; done
echo "== bf16 none: old / new / new --no-fuse (at ${SECONDS} s)"
for n in resnet50 vgg16; do
    bench $OLD $n bf16 old peak
    bench $B $n bf16 new peak
    bench $B $n bf16 nofuse peak --no-fuse
done
echo "== offload predictions (at ${SECONDS} s)"
st resnet50 bf16 4G 60
st vgg16 bf16 6G 60
echo "== VGG-16 fp32 12 GiB (at ${SECONDS} s)"
bench $B vgg16 fp32 new 12G,peak
echo "== tf32 (at ${SECONDS} s)"
for n in resnet50 vgg16; do bench $OLD $n tf32 old peak; bench $B $n tf32 new peak; done
echo "== vdnn-predict GoogLeNet b64 below its split-only floor (at ${SECONDS} s)"
if [ "$(left)" -gt 60 ]; then
    timeout 60 $B/vdnn-train nets/googlenet.yaml --batch 8 --iters 1 --save "$O/g.safetensors" > "$O/g-train.txt" 2>&1
    P="nets/googlenet.yaml --init $O/g.safetensors --batch 64 --data synthetic:64,640 --format jsonl"
    timeout 60 $B/vdnn-predict $P --profile-out "$O/g-prof.json" > "$O/g-whole.jsonl" 2> "$O/g-whole.txt"
    echo "whole: exit $?"; grep plan "$O/g-whole.txt"
    timeout 60 $B/vdnn-predict $P --profile "$O/g-prof.json" --budget 1K > /dev/null 2> "$O/g-floor.txt"
    floor=$(grep -o "([0-9]* bytes)" "$O/g-floor.txt" | head -1 | tr -dc 0-9)
    if [ -n "$floor" ]; then
        timeout 60 $B/vdnn-predict $P --profile "$O/g-prof.json" --budget $floor > "$O/g-floor.jsonl" 2> "$O/g-floor.txt"
        echo "floor $floor: exit $?"; grep plan "$O/g-floor.txt"
        cmp -s <(head -3 "$O/g-whole.jsonl") <(head -3 "$O/g-floor.jsonl") && echo "first 3 lines identical" || echo "first 3 lines differ"
    fi
fi
st resnet152 bf16 8G 100
echo "== table (done at ${SECONDS} s)"
printf '%s\n' "${ROWS[@]}"
