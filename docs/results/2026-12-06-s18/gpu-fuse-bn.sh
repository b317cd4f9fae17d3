#!/usr/bin/env bash
# Issue 34, ReLU fused into batch norm and add (cu_fuse_relu_setup), one call
# of at most 4 minutes: the CUDA tests of the fusion (each op against the CPU,
# fused against --no-fuse bit for bit, offload invariance with fusion on), then
# vdnn-bench b256 bf16, fused beside --no-fuse: ResNet-50 at none and at 6 GiB
# (auto), GoogLeNet at none. Table last: measured and predicted s/iter, and
# the --no-fuse / fused ratio of the measured times (> 1: fusion is faster).
# Each run is cut at what is left of DEADLINE seconds (default 230); a bench
# with under 30 s left is skipped.
# usage (device machine, repository root, after unpacking BUILD):
#   gpu-fuse-bn.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/fuse-bn}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-230}
left() { echo $(( DEADLINE - SECONDS )); }
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
case_run() {   # binary case
    echo "== $1 $2"
    CK_RUN_CASE=$2 timeout 60 "$B/tests/cuda/$1" > "$O/$2.log" 2>&1
    echo "exit $?"; grep -E "relu|bitwise|Checks|Failure|failed|rror" "$O/$2.log" | tail -20
}
case_run cuda_test_cuda_ops test_relu_fused
case_run cuda_test_cuda_train test_relu_fused_into_bn_and_add
case_run cuda_test_cuda_train test_deterministic_and_offload_invariance
bench() {   # tag net budgets policies args...
    local t=$1 n=$2 bu=$3 po=$4; shift 4
    if [ "$(left)" -lt 30 ]; then echo "== bench $t: skipped ($(left) s left)"; return; fi
    echo "== bench $t (at ${SECONDS} s)"
    timeout "$(left)" "$B/vdnn-bench" "nets/$n.yaml" --batch 256 --math bf16 --budgets "$bu" \
        --policies "$po" --warmup 3 --iters 10 --csv "$O/$t.csv" "$@" > "$O/$t.txt" 2>&1
    echo "exit $?"
}
bench r50-fused resnet50 6G,peak none,auto
bench r50-nofuse resnet50 6G,peak none,auto --no-fuse
bench gn-fused googlenet peak none
bench gn-nofuse googlenet peak none --no-fuse
echo "== table (bf16 b256; s/iter measured | predicted; ratio = no-fuse / fused measured)"
printf '%-10s %-7s %-6s %-21s %-21s %s\n' net budget policy "fused meas|pred" "no-fuse meas|pred" ratio
for n in r50 gn; do
    [ -f "$O/$n-fused.csv" ] && [ -f "$O/$n-nofuse.csv" ] || { echo "$n: no csv"; continue; }
    # budget_gib,policy,feasible -> iter_s, predicted_s (columns 2,3,4,6,15)
    join -t, <(awk -F, 'NR>1 && $4=="yes" {print $2"/"$3","$6","$15}' "$O/$n-fused.csv" | sort) \
             <(awk -F, 'NR>1 && $4=="yes" {print $2"/"$3","$6","$15}' "$O/$n-nofuse.csv" | sort) |
    awk -F, -v n=$n '{split($1, k, "/"); r = $2 > 0 ? $4 / $2 : 0;
        printf "%-10s %-7s %-6s %-21s %-21s %.3f\n", n, k[1], k[2], sprintf("%.4f|%.4f", $2, $3),
               sprintf("%.4f|%.4f", $4, $5), r}'
done
echo "== done at ${SECONDS} s"
