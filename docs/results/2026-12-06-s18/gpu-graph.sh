#!/usr/bin/env bash
# Issue 34 item 3, a captured iteration (vdnn-train / vdnn-bench --graph),
# one call: the CUDA tests of captured iterations and the one-launch update
# (graph vs eager bit for bit; the update against the CPU), then
# vdnn-bench at b256 bf16, --graph off then on: AlexNet, VGG-16 and
# ResNet-50 with policy none at peak, ResNet-50 at a 6 GiB budget (policy
# auto). Each pair shares one measured profile (the off run writes it, the
# on run reads it). Parts are skipped once the call nears DEADLINE seconds
# (default 230); the table comes last.
# usage (device machine, repository root, after unpacking BUILD):
#   bash docs/results/2026-12-06-s18/gpu-graph.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s18}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-230}
. "$D/../2026-12-05-s15/env.sh"
left() { echo $(( DEADLINE - SECONDS )); }
export VD_BUILDDIR=$PWD/$B
echo "== tests (at ${SECONDS} s)"
for c in test_graph_vs_eager; do
    CK_RUN_CASE=$c CK_FORK=no timeout 100 $B/tests/cuda/cuda_test_cuda_train > "$O/$c.log" 2>&1
    echo "$c: exit $?"; grep -E 'graph bitwise|Checks|:F:|:E:' "$O/$c.log" | tail -8
done
for c in test_sgd test_optim_reference test_grad_scaler test_relu_dropout; do
    CK_RUN_CASE=$c CK_FORK=no timeout 30 $B/tests/cuda/cuda_test_cuda_ops > "$O/$c.log" 2>&1
    echo "$c: exit $?"; grep -E 'Checks|:F:|:E:|no test selected' "$O/$c.log" | tail -3
done
ROWS=()
bench() {   # tag net budget policy graph profile-args...
    local tag=$1 n=$2 bud=$3 pol=$4 g=$5; shift 5
    if [ "$(left)" -lt 40 ]; then ROWS+=("$(printf '%-14s graph %-3s skipped' "$tag" "$g")"); return; fi
    local log="$O/$tag-$g.log" csv="$O/$tag-$g.csv" lim=$(( $(left) < 90 ? $(left) : 90 ))
    timeout $lim $B/vdnn-bench nets/$n.yaml --batch 256 --math bf16 --budgets "$bud" \
        --policies "$pol" --warmup 6 --iters 10 --graph "$g" --csv "$csv" "$@" > "$log" 2>&1
    local rc=$? it
    it=$(awk -F, 'NR==1{for(i=1;i<=NF;i++)if($i=="iter_s")k=i} NR==2{print $k}' "$csv" 2>/dev/null)
    ROWS+=("$(printf '%-14s graph %-3s exit %-3s iter_s %s' "$tag" "$g" "$rc" "${it:-?}")")
    eval "IT_${tag//-/_}_$g=${it:-0}"
}
pair() {   # tag net budget policy
    echo "== $1 (at ${SECONDS} s)"
    bench "$1" "$2" "$3" "$4" off --profile-out "$O/$1.profile.json"
    if [ -s "$O/$1.profile.json" ]; then bench "$1" "$2" "$3" "$4" on --profile "$O/$1.profile.json"
    else bench "$1" "$2" "$3" "$4" on; fi
}
pair alexnet alexnet peak none
pair resnet50 resnet50 peak none
pair vgg16 vgg16 peak none
pair resnet50-6G resnet50 6G auto
echo "== done at ${SECONDS} s"
echo "== table (b256 bf16; iter_s: mean of 10 timed iterations after 6 warm-up)"
for r in "${ROWS[@]}"; do echo "$r"; done
for t in alexnet resnet50 vgg16 resnet50-6G; do
    v=${t//-/_}; off=$(eval echo "\${IT_${v}_off:-0}"); on=$(eval echo "\${IT_${v}_on:-0}")
    awk -v t="$t" -v a="$off" -v b="$on" 'BEGIN{ if (a > 0 && b > 0)
        printf "%-14s off %.4f s  on %.4f s  on/off %.3f\n", t, a, b, b / a;
        else printf "%-14s incomplete\n", t }'
done
