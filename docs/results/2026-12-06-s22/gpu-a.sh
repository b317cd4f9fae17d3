#!/usr/bin/env bash
# Session 22, first call: (1) the CUDA tests of session 21's changes after
# its last call (gpu-d.sh: fused adds recomputed, no backward pairs in fp32,
# the pairs' times alone); (2) --step-times with the profiles kept
# (--profile-out) so the plans can be re-made on the build machine:
# ResNet-50 bf16 4 GiB beside 12 GiB (no offload), VGG-16 bf16 4 GiB, and
# without offload AlexNet / GoogLeNet bf16 and VGG-16 tf32 (issue 34's
# predictions outside 2%); (3) one vdnn-bench process each: ResNet-152 bf16
# none / 10 / 8 / 6 GiB, VGG-16 bf16 none / 6 / 4 GiB, VGG-16 fp32 none /
# 16 / 12 / 8 GiB. Parts skipped near DEADLINE.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-a.sh BUILD OUTDIR
# (OUTDIR outside $OUT: a call returns at most 8 files; pack it into one)
set -u
B=${1:-build-h100}; O=${2:-/tmp/s22a}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-540}
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
left() { echo $(( DEADLINE - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
command -v nsys ncu || echo "no nsys/ncu"
for c in test_bn_add_fused test_bn_add_relu_fused test_graph_vs_eager test_deterministic_and_offload_invariance; do
    CK_RUN_CASE=$c CK_FORK=no timeout 90 "$B/tests/cuda/cuda_test_cuda_train" > "$O/t-$c.log" 2>&1
    echo "$c: exit $? ($SECONDS s)"; grep -E 'Checks|:F:|:E:' "$O/t-$c.log" | tail -2
done
steps() {   # net math budget
    [ "$(left)" -lt 45 ] && { echo "== steps $1 $2 $3: skipped"; return; }
    timeout 45 $B/vdnn-train nets/$1.yaml --batch 256 --math $2 --budget $3 --iters 12 \
        --step-times-out "$O/$1-$2-$3-steps.tsv" --profile-out "$O/$1-$2-profile.json" > "$O/$1-$2-$3-steps.log" 2>&1
    echo "-- vdnn-train $1 $2 $3 --step-times: exit $? (at $SECONDS s)"
    grep -E '^iteration time|^vdnn-train: plan|^  all|steps beside' "$O/$1-$2-$3-steps.log" | cut -c1-150
}
bench() {   # net math budgets limit
    [ "$(left)" -lt "$4" ] && { echo "== bench $1 $2: skipped ($(left) s left)"; return; }
    timeout "$4" $B/vdnn-bench nets/$1.yaml --batch 256 --math $2 --budgets $3,peak \
        --policies none,auto --warmup 3 --iters 6 > "$O/$1-$2-bench.txt" 2>&1
    echo "-- vdnn-bench $1 $2: exit $? (at $SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/$1-$2-bench.txt" | cut -c1-150
}
steps resnet50 bf16 4G
steps resnet50 bf16 12G
steps vgg16 bf16 4G
bench resnet152 bf16 10G,8G,6G 120
bench vgg16 bf16 6G,4G 70
steps alexnet bf16 30G
steps googlenet bf16 30G
steps vgg16 tf32 40G
bench vgg16 fp32 16G,12G,8G 110
xz -T0 "$O"/*-profile.json "$O"/*-steps.tsv
echo "== done at ${SECONDS} s"
