#!/usr/bin/env bash
# Session 20's first call: (1) the two test fixes of session 19 not yet run
# on a GPU (cuda_test_cuda_ops' fp32 dropout cases, test_cpu_vs_cuda's tf32
# bound); (2) issue 34 item 1, per conv layer and direction: vdnn's measured
# profile beside PyTorch bf16 channels-last (tools/torch_layer_bench.py) on
# VGG-16 and ResNet-50; (3) issue 34 item 4, bf16 no offload beside eager
# and torch.compile (tools/torch_compare.py) on VGG-16, ResNet-50, AlexNet.
# Parts are skipped once the call nears DEADLINE seconds.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-a.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s20a}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-560}
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
PY=/opt/torch/.venv/bin/python
left() { echo $(( DEADLINE - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
echo "== tests (at ${SECONDS} s)"
CK_FORK=no timeout 150 "$B/tests/cuda/cuda_test_cuda_ops" > "$O/ops.log" 2>&1
echo "cuda_test_cuda_ops: exit $? ($SECONDS s)"; grep -E 'Checks|:F:|:E:' "$O/ops.log" | tail -6
CK_RUN_CASE=test_cpu_vs_cuda CK_FORK=no timeout 90 "$B/tests/cuda/cuda_test_cuda_train" > "$O/cpu_vs_cuda.log" 2>&1
echo "test_cpu_vs_cuda: exit $? ($SECONDS s)"; grep -E 'Checks|:F:|:E:' "$O/cpu_vs_cuda.log" | tail -4
layers() {   # net
    [ "$(left)" -lt 120 ] && { echo "== layers $1: skipped"; return; }
    echo "== layers $1 (at ${SECONDS} s)"
    timeout 100 $B/vdnn-bench nets/$1.yaml --batch 256 --math bf16 --budgets peak \
        --policies none --warmup 1 --iters 3 --profile-out "$O/$1-bf16-prof.json" \
        --json "$O/$1-bench.json" > "$O/$1-bench.txt" 2>&1 || tail -3 "$O/$1-bench.txt"
    timeout 150 $PY tools/torch_layer_bench.py --model $1 --batch 256 --math bf16 --iters 5 \
        --vdnn-profile "$O/$1-bf16-prof.json" --json "$O/$1-layers.json" > "$O/$1-layers.txt" 2>&1
    echo "exit $?"; grep -v Warn "$O/$1-layers.txt" | tail -40
    xz -9 "$O/$1-bf16-prof.json"
}
compare() {   # net math modes need-seconds
    [ "$(left)" -lt "$4" ] && { echo "== $1 $2: skipped ($(left) s left)"; return; }
    echo "== $1 $2 $3 (at ${SECONDS} s)"
    timeout "$(left)" $PY tools/torch_compare.py --net "$1" --batch 256 --math "$2" \
        --modes "$3" --iters 10 --warmup 6 --vdnn-bin "$B/vdnn-bench" \
        --vdnn-args "--budgets peak --policies none" --vdnn-out "$O/$1-$2-bench.json" \
        --json "$O/$1-$2-compare.json" > "$O/$1-$2-compare.txt" 2>&1
    echo "exit $?"; grep -E "^pytorch|x speed|first iteration" "$O/$1-$2-compare.txt" | grep -v Warn | tail -8
}
layers vgg16
compare vgg16 bf16 bf16-cl,compile-bf16-cl 100
compare resnet50 bf16 bf16-cl,compile-bf16-cl 130
compare alexnet bf16 bf16-cl,compile-bf16-cl 80
layers resnet50
echo "== done at ${SECONDS} s"
