#!/usr/bin/env bash
# Session 34: the NCHW max-pool backward that takes the windows tiling its
# input in one pass (k_pool_tile_nchw, with the in-place ReLU's mask): its
# GPU tests (test_pool_bwd_tiled bit for bit against the general kernel,
# test_pool and test_pool_relu against the CPU, test_profile, the fused
# train test, the 2.16e9-element pool of test_cuda_big), then fp32 VGG-16
# b256 none / 16 / 8 GiB (vdnn-bench, its profile measured at its start,
# 2 rounds) beside PyTorch fp32 checkpoint_sequential(4). Everything in
# $O/s34b.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s34/gpu-b.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s34b}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B CK_FORK=no
trap 'xz -T0 "$W"/*.json; tar czf "$O/s34b.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
t() {   # binary tags
    CK_INCLUDE_TAGS="$2" timeout 300 $B/tests/cuda/$1 > "$W/$1.log" 2>&1
    echo "== $1 ($2): exit $? ($SECONDS s)"
    grep -E '^[0-9]+%:|:[EF]:' "$W/$1.log" | head -5
}
t cuda_test_cuda_ops "test_pool_bwd_tiled test_pool test_pool_relu test_profile"
t cuda_test_cuda_train test_pool_relu_fused
t cuda_test_cuda_big test_relu_pool_big
timeout 200 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets 16G,8G,peak \
    --policies auto --rounds 2 --profile-out "$W/vgg16-fp32-profile.json" \
    --json "$W/vgg16-fp32.json" > "$W/vgg16-fp32.txt" 2>&1
echo "== vgg16 fp32: exit $? ($SECONDS s)"
grep -E '^[0-9.]+ GiB +auto' "$W/vgg16-fp32.txt" | cut -c1-150
timeout 150 /opt/torch/.venv/bin/python tools/torch_compare.py --net vgg16 \
    --batch 256 --math fp32 --modes fp32-ckpt --segments 4 --iters 8 --warmup 3 \
    --vdnn "$W/vgg16-fp32.json" > "$W/vgg16-fp32-torch.txt" 2>&1
echo "== torch fp32-ckpt: exit $? ($SECONDS s)"
grep -vE "^(I|W|V)[0-9]{4} " "$W/vgg16-fp32-torch.txt" | tail -6 | cut -c1-160
echo "== done at ${SECONDS} s"
