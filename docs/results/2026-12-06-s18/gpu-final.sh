#!/usr/bin/env bash
# Session 18's one closing call (b256 bf16): the CUDA tests of the
# captured iteration and the fusions, then vdnn (fusion and --graph on, the
# defaults) beside PyTorch eager and torch.compile, each bf16 channels-last
# (torch_compare.py), then vdnn with --graph off and with --no-fuse --graph
# off (the tree before this session) on the profile the default run
# measured, then VGG-16 at a 4 GiB budget fused and not, with each conv's
# path (--conv-debug 1). Parts are skipped once the call nears DEADLINE
# seconds (default 470). If the captured-iteration test fails, every later
# vdnn run takes --graph off. Tables last.
# usage (device machine, repository root, after unpacking BUILD):
#   bash docs/results/2026-12-06-s18/gpu-final.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s18}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-470}
. "$D/../2026-12-05-s15/env.sh"
PY=/opt/torch/.venv/bin/python
left() { echo $(( DEADLINE - SECONDS )); }
export VD_BUILDDIR=$PWD/$B
G=""
tcase() {   # binary case limit
    CK_RUN_CASE=$2 CK_FORK=no timeout "$3" "$B/tests/cuda/$1" > "$O/$2.log" 2>&1
    local rc=$?
    echo "$2: exit $rc"; grep -E 'bitwise|fused|Checks|:F:|:E:' "$O/$2.log" | tail -6
    return $rc
}
echo "== tests (at ${SECONDS} s)"
tcase cuda_test_cuda_train test_graph_vs_eager 90 || G="--graph off"
for c in test_relu_fused_into_bn_and_add test_conv_bias_relu_fused test_cpu_vs_cuda; do
    tcase cuda_test_cuda_train $c 60; done
for c in test_sgd test_optim_reference test_grad_scaler test_relu_dropout; do
    tcase cuda_test_cuda_ops $c 30; done
echo "graph flag for the runs below: '${G:-default (on)}'"
compare() {   # net need-seconds
    [ "$(left)" -lt "$2" ] && { echo "== compare $1: skipped ($(left) s left)"; return; }
    echo "== compare $1 (at ${SECONDS} s)"
    timeout "$(left)" $PY tools/torch_compare.py --net "$1" --batch 256 --math bf16 \
        --modes bf16-cl,compile-bf16-cl --iters 10 --warmup 6 --vdnn-bin "$B/vdnn-bench" \
        --vdnn-args "--budgets peak --policies none --profile-out $O/$1-prof.json $G" \
        --vdnn-out "$O/$1-bench.json" --json "$O/$1-compare.json" > "$O/$1-compare.txt" 2>&1
    echo "exit $?"
}
ROWS=()
bench() {   # net tag args...: vdnn-bench on the compare run's profile
    local n=$1 tag=$2; shift 2
    [ "$(left)" -lt 35 ] && { ROWS+=("$n $tag: skipped"); return; }
    [ -s "$O/$n-prof.json" ] || { ROWS+=("$n $tag: no profile"); return; }
    timeout 60 $B/vdnn-bench nets/$n.yaml --batch 256 --math bf16 --budgets peak --policies none \
        --warmup 6 --iters 10 --profile "$O/$n-prof.json" --csv "$O/$n-$tag.csv" "$@" \
        > "$O/$n-$tag.log" 2>&1
    local rc=$?
    ROWS+=("$(printf '%-9s %-16s exit %-3s iter_s %s' $n $tag $rc \
        "$(awk -F, 'NR==1{for(i=1;i<=NF;i++)if($i=="iter_s")k=i} NR==2{print $k}' "$O/$n-$tag.csv" 2>/dev/null)")")
}
for n in vgg16 resnet50 alexnet; do
    compare $n 70
    bench $n graph-off --graph off
    bench $n nofuse-graph-off --no-fuse --graph off
done
compare googlenet 70
four() {   # label args...
    [ "$(left)" -lt 45 ] && { ROWS+=("vgg16 4G $1: skipped"); return; }
    timeout 60 $B/vdnn-train nets/vgg16.yaml --batch 256 --math bf16 --iters 10 --budget 4G \
        --conv-debug 1 $G "${@:2}" > "$O/vgg16-4G-$1.log" 2>&1
    ROWS+=("$(printf 'vgg16 4G %-8s exit %s %s | %s | runtime plans %s, fused convs %s' $1 $? \
        "$(grep -o 'measured [0-9.]* s' "$O/vgg16-4G-$1.log" | head -1)" \
        "$(grep -o 'predicted [0-9.]* s' "$O/vgg16-4G-$1.log" | head -1)" \
        "$(grep -c 'runtime plan' "$O/vgg16-4G-$1.log")" "$(grep -c 'fused: yes' "$O/vgg16-4G-$1.log")")")
}
four fused
four no-fuse --no-fuse
echo "== done at ${SECONDS} s"
echo "== vdnn-bench on each compare's profile (none at peak; iter_s mean of 10 after 6 warm-up)"
for r in "${ROWS[@]}"; do echo "$r"; done
echo "== compare headlines"
for n in vgg16 resnet50 alexnet googlenet; do
    [ -f "$O/$n-compare.txt" ] && grep -E "no offload|first iteration" "$O/$n-compare.txt"
done
