#!/usr/bin/env bash
# Session 21, issue 34's batch norm + add + ReLU backward fusion
# (bnadd-bwd.md): (1) the CUDA tests — test_cuda_ops test_bn_add_relu (the
# batch norm's backward with relu_y against the CPU oracle, and bitwise
# against CUDA's unfused backward on the masked dy; 8 channels: k_chan_red8
# MODE 5, 6: the ReLU's kernel first; fp32 / tf32 / bf16 / fp16),
# test_bn (unchanged kernels' callers), test_cuda_train
# test_bn_add_relu_fused (training bitwise --no-fuse, first loss against
# the CPU), test_bn_add_fused and test_relu_fused_into_bn_and_add (the
# other batch norm fusions), test_cpu_vs_cuda, test_graph_vs_eager (the
# captured iteration); (2) vdnn-bench ResNet-50 b256 bf16 policy none,
# default and --no-fuse, twice in alternation, each measuring its own
# profile; (3) from those profiles, summed over the 16 blocks: the ReLU
# after each add (backward: ~0 fused), the batch norm that takes it (bn3,
# or downsample.1 in the first block of a stage; backward: up by the
# extra read of y and write of dy), the adds' backward (0 both). Parts are
# skipped once the call nears DEADLINE seconds (default 470). Table last.
# usage (device machine, repository root, after unpacking BUILD):
#   bash docs/results/2026-12-06-s21/gpu-bnadd-bwd.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s21-bnadd-bwd}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-470}
. "$D/../2026-12-05-s15/env.sh"
left() { echo $(( DEADLINE - SECONDS )); }
export VD_BUILDDIR=$PWD/$B
nvidia-smi --query-gpu=name --format=csv,noheader
tcase() {   # binary case limit
    CK_RUN_CASE=$2 CK_FORK=no timeout "$3" "$B/tests/cuda/$1" > "$O/$2.log" 2>&1
    local rc=$?
    echo "$2: exit $rc"; grep -E 'bn\+add\+relu|bitwise|folded|Checks|:F:|:E:' "$O/$2.log" | tail -12
    return $rc
}
echo "== tests (at ${SECONDS} s)"
for c in test_bn_add_relu test_bn; do tcase cuda_test_cuda_ops $c 90; done
for c in test_bn_add_relu_fused test_bn_add_fused test_relu_fused_into_bn_and_add \
         test_cpu_vs_cuda test_graph_vs_eager; do
    tcase cuda_test_cuda_train $c 90; done
ROWS=()
bench() {   # tag args...
    local tag=$1; shift
    [ "$(left)" -lt 60 ] && { ROWS+=("resnet50 $tag: skipped"); return; }
    timeout 120 $B/vdnn-bench nets/resnet50.yaml --batch 256 --math bf16 --budgets peak \
        --policies none --warmup 6 --iters 10 --profile-out "$O/resnet50-$tag-prof.json" \
        --csv "$O/resnet50-$tag.csv" "$@" > "$O/resnet50-$tag.log" 2>&1
    local rc=$?
    ROWS+=("$(printf 'resnet50 %-10s exit %-3s iter_s %s predicted_s %s' $tag $rc \
        "$(awk -F, 'NR==1{for(i=1;i<=NF;i++)if($i=="iter_s")k=i} NR==2{print $k}' "$O/resnet50-$tag.csv" 2>/dev/null)" \
        "$(awk -F, 'NR==1{for(i=1;i<=NF;i++)if($i=="predicted_s")k=i} NR==2{print $k}' "$O/resnet50-$tag.csv" 2>/dev/null)")")
}
for r in 1 2; do
    echo "== bench round $r (at ${SECONDS} s)"
    bench fused-$r
    bench nofuse-$r --no-fuse
done
printf '%s\n' "${ROWS[@]}" | tee "$O/table.txt"
python3 - "$O" <<'PY' | tee -a "$O/table.txt"
import json, os, sys
o = sys.argv[1]
for tag in ("fused-1", "nofuse-1", "fused-2", "nofuse-2"):
    f = os.path.join(o, "resnet50-%s-prof.json" % tag)
    if not os.path.exists(f):
        print("resnet50 %s: no profile" % tag)
        continue
    L = json.load(open(f))["layers"]
    names = [l["name"] for l in L]
    s = {"relu_bwd": 0.0, "taker_bwd": 0.0, "add_bwd": 0.0}
    l10 = {}
    for i, l in enumerate(L):
        n, a = l["name"], l["algos"][0]
        if n.endswith(".add"):
            s["add_bwd"] += a["bwd_s"]
            t = L[i - 1]   # the layer right before the add: bn3 or downsample.1
            s["taker_bwd"] += t["algos"][0]["bwd_s"]
            s["relu_bwd"] += L[i + 1]["algos"][0]["bwd_s"]
            if n == "layer1.0.add" or n == "layer1.1.add":
                l10[t["name"]] = round(t["algos"][0]["bwd_s"] * 1e3, 3)
                l10[L[i + 1]["name"]] = round(L[i + 1]["algos"][0]["bwd_s"] * 1e3, 3)
    print("resnet50 %-9s bwd ms: %s; pair sum %.3f; %s" % (
        tag, " ".join("%s %.3f" % (k, v * 1e3) for k, v in s.items()),
        (s["relu_bwd"] + s["taker_bwd"]) * 1e3, l10))
PY
echo "== done at ${SECONDS} s"
