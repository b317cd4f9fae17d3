#!/usr/bin/env bash
# Session 20, issue 34: the max pool + ReLU backward fusion (pool-fuse.md).
# (1) the CUDA tests that check it: test_pool (the tiling pools through
# k_pool_tile8 unfused, exact against the CPU), test_pool_relu (the fused
# pool backward alone against the CPU oracle: dx bit for bit, db within
# TOL_FP32; the one-pass kernel with and without the bias sums, and the
# two-kernel path of an overlapping pool), test_pool_relu_fused (training
# a three-block VGG-like net: offload invariance with the fusion on, near
# --no-fuse and the CPU), test_conv_bias_relu_fused (its head's max pool now
# takes its ReLU), the whole-net CPU oracle and the captured iteration;
# (2) vdnn-bench VGG-16 b256 bf16 policy none, default and --no-fuse (each
# measuring its own profile), twice in alternation, AlexNet once each;
# (3) from the measured profiles: the five ReLU + max pool pairs' backward
# (ReLU, pool, sum) and the pool forward, default against --no-fuse.
# Parts are skipped once the call nears DEADLINE seconds (default 560).
# usage (device machine, repository root, after unpacking BUILD):
#   bash docs/results/2026-12-06-s20/gpu-pool-fuse.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s20-pool}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-560}
. "$D/../2026-12-05-s15/env.sh"
left() { echo $(( DEADLINE - SECONDS )); }
export VD_BUILDDIR=$PWD/$B
nvidia-smi --query-gpu=name --format=csv,noheader
tcase() {   # binary case limit
    CK_RUN_CASE=$2 CK_FORK=no timeout "$3" "$B/tests/cuda/$1" > "$O/$2.log" 2>&1
    local rc=$?
    echo "$2: exit $rc"; grep -E 'pool\+relu|pool fused|bitwise|Checks|:F:|:E:' "$O/$2.log" | tail -10
    return $rc
}
echo "== tests (at ${SECONDS} s)"
for c in test_pool test_pool_relu test_relu_bias; do tcase cuda_test_cuda_ops $c 90; done
for c in test_pool_relu_fused test_conv_bias_relu_fused test_cpu_vs_cuda test_graph_vs_eager; do
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
    echo "== bench vgg16 round $r (at ${SECONDS} s)"
    bench vgg16 fused-$r
    bench vgg16 nofuse-$r --no-fuse
done
bench alexnet fused-1
bench alexnet nofuse-1 --no-fuse
printf '%s\n' "${ROWS[@]}" | tee "$O/table.txt"
# VGG-16's five ReLU + max pool pairs from the measured profiles (ms): the
# ReLU's backward (default: a no-op), the pool's backward (default: with the
# ReLU's mask and its conv's bias sums) and forward
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
    tot = 0.0
    for r, p in zip(L, L[1:]):
        if types.get(r["name"]) == "relu" and types.get(p["name"]) == "pool":
            rb, pb, pf = r["algos"][0]["bwd_s"], p["algos"][0]["bwd_s"], p["algos"][0]["fwd_s"]
            tot += rb + pb
            print("vgg16 %-8s %-11s relu bwd %6.3f  %-11s pool bwd %6.3f  sum %6.3f  pool fwd %6.3f"
                  % (tag, r["name"], rb * 1e3, p["name"], pb * 1e3, (rb + pb) * 1e3, pf * 1e3))
    print("vgg16 %-8s relu + pool backward, all five pairs: %.3f ms" % (tag, tot * 1e3))
PY
