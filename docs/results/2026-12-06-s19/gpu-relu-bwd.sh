#!/usr/bin/env bash
# Session 19, issue 34's ReLU backward fused into the batch norm's
# (relu-bwd.md): (1) the CUDA tests that check it — the fused batch-norm
# backward against the CPU oracle (test_relu_fused: 8 and 6 channels, bf16 /
# fp16 fused, fp32 not), test_bn unchanged, and training: fused against
# --no-fuse bit for bit and auto at its smallest budget (offload invariance,
# fusion on) in fp32 / bf16 / fp16 (test_relu_fused_into_bn_and_add); the
# ReLU backward with its conv's bias gradient against the unfused passes bit
# for bit and the CPU oracle (test_relu_bias, relu-bwd.md's second part) and
# in training on a VGG-like net (test_conv_bias_relu_fused: offload
# invariance with it on, near --no-fuse and the CPU oracle);
# the whole-net CPU oracle (test_cpu_vs_cuda), the captured iteration
# (test_graph_vs_eager); (2) vdnn-bench b256 bf16 policy none, each setting
# measuring its own profile: ResNet-50 (33 batch norms take their ReLU's
# backward) and VGG-16 (13 ReLUs take their conv's bias gradient), default
# and --no-fuse, run twice in alternation; then VGG-16's conv + ReLU pairs'
# backward times from the measured profiles. Parts are skipped once the call nears DEADLINE
# seconds (default 470). Table last.
# usage (device machine, repository root, after unpacking BUILD):
#   bash docs/results/2026-12-06-s19/gpu-relu-bwd.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s19-relu}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-470}
. "$D/../2026-12-05-s15/env.sh"
left() { echo $(( DEADLINE - SECONDS )); }
export VD_BUILDDIR=$PWD/$B
tcase() {   # binary case limit
    CK_RUN_CASE=$2 CK_FORK=no timeout "$3" "$B/tests/cuda/$1" > "$O/$2.log" 2>&1
    local rc=$?
    echo "$2: exit $rc"; grep -E 'bitwise|fused|relu\+bias|Checks|:F:|:E:' "$O/$2.log" | tail -8
    return $rc
}
echo "== tests (at ${SECONDS} s)"
for c in test_relu_fused test_relu_bias test_bn; do tcase cuda_test_cuda_ops $c 90; done
for c in test_relu_fused_into_bn_and_add test_conv_bias_relu_fused test_cpu_vs_cuda \
         test_graph_vs_eager; do
    tcase cuda_test_cuda_train $c 90; done
ROWS=()
bench() {   # net tag args...
    local n=$1 tag=$2; shift 2
    [ "$(left)" -lt 60 ] && { ROWS+=("$n $tag: skipped"); return; }
    timeout 120 $B/vdnn-bench nets/$n.yaml --batch 256 --math bf16 --budgets peak --policies none \
        --warmup 6 --iters 10 --profile-out "$O/$n-$tag-prof.json" --csv "$O/$n-$tag.csv" "$@" \
        > "$O/$n-$tag.log" 2>&1
    local rc=$?
    ROWS+=("$(printf '%-9s %-10s exit %-3s iter_s %s predicted_s %s' $n $tag $rc \
        "$(awk -F, 'NR==1{for(i=1;i<=NF;i++)if($i=="iter_s")k=i} NR==2{print $k}' "$O/$n-$tag.csv" 2>/dev/null)" \
        "$(awk -F, 'NR==1{for(i=1;i<=NF;i++)if($i=="predicted_s")k=i} NR==2{print $k}' "$O/$n-$tag.csv" 2>/dev/null)")")
}
for r in 1 2; do
    for n in resnet50 vgg16; do
        echo "== bench $n round $r (at ${SECONDS} s)"
        bench $n fused-$r
        bench $n nofuse-$r --no-fuse
    done
done
printf '%s\n' "${ROWS[@]}" | tee "$O/table.txt"
# VGG-16's 13 conv + ReLU pairs (nets/vgg16.yaml: a relu right after a conv),
# from the measured profiles: the ReLUs' backward (default: with the bias
# gradient) and the convs' fastest backward (default: without it), summed;
# "taken": the ReLUs whose setup chose the fusion (cu_relu_bias_setup: only
# those get a backward workspace, the partial sums, at b256)
python3 - "$O" <<'PY' | tee -a "$O/table.txt"
import json, os, re, sys
o = sys.argv[1]
types = dict(re.findall(r"name: ([\w.]+), type: (\w+)", open("nets/vgg16.yaml").read()))
for tag in ("fused-1", "nofuse-1", "fused-2", "nofuse-2"):
    f = os.path.join(o, "vgg16-%s-prof.json" % tag)
    if not os.path.exists(f):
        print("vgg16 %s: no profile" % tag)
        continue
    L = json.load(open(f))["layers"]
    relu = conv = 0.0
    taken = []
    for p, l in zip(L, L[1:]):
        if types.get(l["name"]) == "relu" and types.get(p["name"]) == "conv":
            relu += l["algos"][0]["bwd_s"]
            conv += min(a["bwd_s"] for a in p["algos"])
            if l["algos"][0].get("bwd_workspace", 0) > 0:
                taken.append(l["name"])
    print("vgg16 %-8s conv+relu pairs: relu bwd %.3f ms  conv bwd %.3f ms  sum %.3f ms  taken %d: %s"
          % (tag, relu * 1e3, conv * 1e3, (relu + conv) * 1e3, len(taken), " ".join(taken)))
PY
