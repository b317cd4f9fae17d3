#!/usr/bin/env bash
# Session 22, first call: (1) the CUDA tests of session 21's changes after
# its last call (gpu-d.sh: fused adds recomputed, no backward pairs in fp32,
# the pairs' times alone); (2) --step-times with the profiles kept
# (--profile-out) so the plans can be re-made on the build machine:
# ResNet-50 bf16 4 GiB beside 12 GiB (no offload), VGG-16 bf16 4 GiB, and
# without offload AlexNet / GoogLeNet bf16 and VGG-16 tf32 (issue 34's
# predictions outside 2%); (3) tools/torch_compare.py, vdnn-bench's none and
# auto beside PyTorch bf16 channels-last checkpointing (one checkpoint per
# block for ResNet-152): ResNet-152 bf16 10 / 8 / 6 GiB, VGG-16 bf16 6 /
# 4 GiB. Parts skipped near DEADLINE.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-a.sh BUILD OUTDIR
# (OUTDIR outside $OUT: a call returns at most 8 files; pack it into one)
set -u
B=${1:-build-h100}; O=${2:-/tmp/s22a}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-500}
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
left() { echo $(( DEADLINE - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
command -v nsys ncu || echo "no nsys/ncu"
for c in test_bn_add_fused test_bn_add_relu_fused test_graph_vs_eager; do
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
PY=/opt/torch/.venv/bin/python
compare() {   # net math segments budgets modes need-seconds
    [ "$(left)" -lt "$6" ] && { echo "== $1 $2: skipped ($(left) s left)"; return; }
    echo "== $1 $2 $4 (at ${SECONDS} s)"
    timeout "$(left)" $PY tools/torch_compare.py --net "$1" --batch 256 --math "$2" --modes "$5" \
        --segments "$3" --iters 8 --warmup 3 --vdnn-bin "$B/vdnn-bench" \
        --vdnn-args "--budgets $4 --policies none,auto" --vdnn-out "$O/$1-$2-bench.json" \
        --json "$O/$1-$2-compare.json" > "$O/$1-$2-compare.txt" 2>&1
    echo "exit $?"
    grep -E '^[0-9.]+ GiB +(none|auto) ' "$O/$1-$2-compare.txt" | cut -c1-130
    grep -E 'checkpoint  vdnn|no offload  vdnn' "$O/$1-$2-compare.txt"
}
steps resnet50 bf16 4G
steps resnet50 bf16 12G
steps vgg16 bf16 4G
compare resnet152 bf16 52 10G,8G,6G,peak bf16-cl-ckpt 200
compare vgg16 bf16 4 6G,4G,peak bf16-cl-ckpt 90
steps alexnet bf16 30G
steps googlenet bf16 30G
steps vgg16 tf32 40G
xz -T0 "$O"/*-profile.json "$O"/*-steps.tsv
echo "== done at ${SECONDS} s"
