#!/usr/bin/env bash
# Issue 34 item 2: conv + bias (+ ReLU) forward as one cuDNN graph. One call,
# under 4 minutes (DEADLINE seconds, default 230; each part skipped once the
# call nears it): the CUDA tests of the fusion, then vdnn-train fused beside
# --no-fuse (the flag of the merged tree): VGG-16 and AlexNet b256 bf16
# --policy none, VGG-16 b256 fp32 --policy none, VGG-16 b256 bf16 --budget 4G;
# iteration time measured and predicted, their ratio, table last. The
# --conv-debug 1 lines saying which layers fused go to OUTDIR/*.log.
# usage (device machine, repository root, after unpacking BUILD):
#   bash docs/results/2026-12-06-s18/gpu-fuse-conv.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/fuse-conv}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-230}
. "$D/../2026-12-05-s15/env.sh"
left() { echo $(( DEADLINE - SECONDS )); }
t() {   # name min-seconds binary case: one Check case, its log in OUTDIR
    if [ "$(left)" -lt "$2" ]; then echo "== $1: skipped ($(left) s left)"; return; fi
    CK_FORK=no CK_RUN_CASE=$4 VD_BUILDDIR=$PWD/$B timeout "$(left)" "$B/tests/cuda/$3" > "$O/$1.log" 2>&1
    echo "== $1: exit $? (at ${SECONDS} s)"; grep -E "fused|Checks|[Ff]ailure|Error" "$O/$1.log" | tail -12
}
t ops-fused 40 cuda_test_cuda_ops test_conv_fused
t train-fused 60 cuda_test_cuda_train test_conv_bias_relu_fused
t train-direct 30 cuda_test_cuda_train test_relu_fused_into_direct_conv
t ops-conv 40 cuda_test_cuda_ops test_conv
rows=()
run() {   # net math budget label args...
    local n=$1 m=$2 b=$3 lab=$4; shift 4
    if [ "$(left)" -lt 25 ]; then rows+=("$n $m $b $lab: skipped"); return; fi
    local log="$O/$n-$m-$b-$lab.log" pa="--policy none"
    [ "$b" != none ] && pa="--budget $b"
    timeout "$(( $(left) - 5 ))" "$B/vdnn-train" nets/$n.yaml --batch 256 --math $m --iters 10 \
        $pa --conv-debug 1 "$@" > "$log" 2>&1
    local rc=$? me pr
    me=$(grep -o 'measured [0-9.]* s' "$log" | head -1 | awk '{print $2}')
    pr=$(grep -o 'predicted [0-9.]* s' "$log" | head -1 | awk '{print $2}')
    rows+=("$(printf '%-8s %-5s %-5s %-8s measured %-9s predicted %-9s pred/meas %-6s fused convs %s exit %s' \
        $n $m $b $lab "${me:--}" "${pr:--}" \
        "$( [ -n "$me" ] && [ -n "$pr" ] && awk -v a="$pr" -v b="$me" 'BEGIN{printf "%.3f", a/b}' || echo -)" \
        "$(grep -c 'fused: yes' "$log")" $rc)")
}
for cfg in "vgg16 bf16 none" "alexnet bf16 none" "vgg16 fp32 none" "vgg16 bf16 4G"; do
    set -- $cfg
    run "$1" "$2" "$3" fused
    run "$1" "$2" "$3" no-fuse --no-fuse
done
echo "== timings (b256, 10 iterations; fused vs --no-fuse; at ${SECONDS} s)"
printf '%s\n' "${rows[@]}"
