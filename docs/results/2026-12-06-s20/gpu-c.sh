#!/usr/bin/env bash
# Session 20's last call, the merged tree: (1) CUDA tests of the session's
# fusions and the invariance / graph tests; (2) issue 34 item 4: bf16 no
# offload beside eager and torch.compile (VGG-16, ResNet-50, AlexNet), vdnn
# fused and --no-fuse in the same call; (3) tf32 beside eager (and
# torch.compile for ResNet-50; VGG-16's fp32 compile did not finish in 5
# minutes in session 19); (4) where VGG-16 bf16 4 GiB's device memory grows
# beyond the budget plus the outside (gpu-b.sh). Parts are skipped near DEADLINE seconds.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-c.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s20c}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-560}
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
PY=/opt/torch/.venv/bin/python
left() { echo $(( DEADLINE - SECONDS )); }
TESTS_TRAIN=${TESTS_TRAIN:-"test_bn_add_fused test_pool_relu_fused test_cpu_vs_cuda test_relu_fused_into_bn_and_add test_conv_bias_relu_fused test_deterministic_and_offload_invariance test_graph_vs_eager"}
nvidia-smi --query-gpu=name --format=csv,noheader
echo "== tests (at ${SECONDS} s)"
CK_FORK=no timeout 150 "$B/tests/cuda/cuda_test_cuda_ops" > "$O/ops.log" 2>&1
echo "cuda_test_cuda_ops: exit $? ($SECONDS s)"; grep -E 'Checks|:F:|:E:' "$O/ops.log" | tail -6
for t in $TESTS_TRAIN; do
    CK_RUN_CASE=$t CK_FORK=no timeout 90 "$B/tests/cuda/cuda_test_cuda_train" > "$O/$t.log" 2>&1
    echo "$t: exit $? ($SECONDS s)"; grep -E 'Checks|:F:|:E:' "$O/$t.log" | tail -3
done
nofuse() {   # net math
    [ "$(left)" -lt 60 ] && return
    timeout 60 $B/vdnn-bench nets/$1.yaml --batch 256 --math $2 --budgets peak --policies none \
        --warmup 6 --iters 10 --no-fuse > "$O/$1-$2-nofuse.txt" 2>&1
    echo "--no-fuse: $(grep -E '^[0-9.]+ GiB +none' "$O/$1-$2-nofuse.txt" | awk '{print $5, "s/iter, predicted", $(NF-2), $(NF-1)}')"
}
compare() {   # net math modes need-seconds
    [ "$(left)" -lt "$4" ] && { echo "== $1 $2: skipped ($(left) s left)"; return; }
    echo "== $1 $2 $3 (at ${SECONDS} s)"
    timeout "$(left)" $PY tools/torch_compare.py --net "$1" --batch 256 --math "$2" \
        --modes "$3" --iters 10 --warmup 6 --vdnn-bin "$B/vdnn-bench" \
        --vdnn-args "--budgets peak --policies none" --vdnn-out "$O/$1-$2-bench.json" \
        --json "$O/$1-$2-compare.json" > "$O/$1-$2-compare.txt" 2>&1
    echo "exit $?"; grep -E "x speed|first iteration" "$O/$1-$2-compare.txt" | grep -v Warn | tail -4
    grep -E '^[0-9.]+ GiB +none' "$O/$1-$2-compare.txt" | head -1 | cut -c1-130
}
mem() {   # args...: where a tight point's device memory grows beyond the pool
    [ "$(left)" -lt 60 ] && return
    echo "-- vdnn-train vgg16 bf16 4G $*"
    timeout 60 $B/vdnn-train nets/vgg16.yaml --batch 256 --math bf16 --budget 4G --iters 8 "$@" \
        > "$O/mem-$#.txt" 2>&1
    grep -E '^device memory|^growth|^outside|^memory trace|^  training' "$O/mem-$#.txt" | head -12
}
compare vgg16 bf16 bf16-cl,compile-bf16-cl 100; nofuse vgg16 bf16
compare resnet50 bf16 bf16-cl,compile-bf16-cl 130; nofuse resnet50 bf16
compare alexnet bf16 bf16-cl,compile-bf16-cl 60
compare resnet50 tf32 tf32,compile-tf32 150
compare vgg16 tf32 tf32 60
echo "== device memory beyond the pool at VGG-16 bf16 4 GiB (at ${SECONDS} s)"
mem; mem --graph off
echo "== done at ${SECONDS} s"
