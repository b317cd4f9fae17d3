#!/usr/bin/env bash
# Session 20, issue 34's batch norm + add fusion, forward (bnadd-fuse.md):
# (1) the CUDA tests — test_bn_add_fused (folded against unfolded, --no-fuse
# and auto at its smallest budget bit for bit in tf32 / bf16 / fp16, 8 and 6
# channels; the CPU oracle), test_relu_fused_into_bn_and_add (the ReLU
# fusions, unchanged), test_cpu_vs_cuda, test_graph_vs_eager (the captured
# iteration); (2) vdnn-bench ResNet-50 b256 bf16 policy none, default and
# --no-fuse, twice in alternation, each measuring its own profile; (3) from
# those profiles, summed over the net: the folded batch norms' forward (the
# 16 bn3: statistics alone when folded), the other batch norms', the adds'
# forward and backward (the backward now timed as the plan runs it: no
# copies, cuda_profile.cu add_shares_dy). Parts are skipped once the call
# nears DEADLINE seconds (default 470). Table last.
# usage (device machine, repository root, after unpacking BUILD):
#   bash docs/results/2026-12-06-s20/gpu-bnadd.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s20-bnadd}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-470}
. "$D/../2026-12-05-s15/env.sh"
left() { echo $(( DEADLINE - SECONDS )); }
export VD_BUILDDIR=$PWD/$B
nvidia-smi --query-gpu=name --format=csv,noheader
tcase() {   # binary case limit
    CK_RUN_CASE=$2 CK_FORK=no timeout "$3" "$B/tests/cuda/$1" > "$O/$2.log" 2>&1
    local rc=$?
    echo "$2: exit $rc"; grep -E 'folded|bitwise|Checks|:F:|:E:' "$O/$2.log" | tail -10
    return $rc
}
echo "== tests (at ${SECONDS} s)"
for c in test_bn_add_fused test_relu_fused_into_bn_and_add test_cpu_vs_cuda test_graph_vs_eager; do
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
    s = {"bn3_fwd": 0.0, "bn_other_fwd": 0.0, "add_fwd": 0.0, "add_bwd": 0.0}
    l10 = {}
    for l in L:
        n, a = l["name"], l["algos"][0]
        if n.endswith(".bn3"): s["bn3_fwd"] += a["fwd_s"]
        elif ".bn" in n or n.endswith("downsample.1") or n == "bn1": s["bn_other_fwd"] += a["fwd_s"]
        if n.endswith(".add"):
            s["add_fwd"] += a["fwd_s"]
            s["add_bwd"] += a["bwd_s"]
        if n in ("layer1.0.bn3", "layer1.0.downsample.1", "layer1.0.add"):
            l10[n] = round(a["fwd_s"] * 1e3, 3)
    print("resnet50 %-9s ms: %s; layer1.0 fwd ms %s" % (
        tag, " ".join("%s %.3f" % (k, v * 1e3) for k, v in s.items()), l10))
PY
echo "== done at ${SECONDS} s"
