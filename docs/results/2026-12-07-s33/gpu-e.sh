#!/usr/bin/env bash
# Session 33, call 5 (the machine of call 4): a fresh backend after
# measuring the profile (VD_PROFILE_FRESH, the experiment build of call 4)
# on ResNet-152 bf16 10 GiB and none (vdnn-bench, 2 rounds, its profile
# measured at its start); then fp32 VGG-16 none and 16 GiB the same way
# beside PyTorch fp32 checkpoint_sequential(4) (tools/torch_compare.py).
# Everything in $O/s33e.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s33/gpu-e.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s33e}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B VD_PROFILE_FRESH=1
trap 'tar czf "$O/s33e.tgz" -C "$W" .' EXIT
timeout 150 $B/vdnn-bench nets/resnet152.yaml --batch 256 --math bf16 --budgets 10G,peak \
    --policies auto --rounds 2 > "$W/r152.txt" 2>&1
echo "== r152 bf16: exit $? ($SECONDS s)"
grep -E '^[0-9.]+ GiB +auto' "$W/r152.txt" | cut -c1-150
timeout 200 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets 16G,peak \
    --policies auto --rounds 2 --json "$W/vgg16-fp32.json" > "$W/vgg16-fp32.txt" 2>&1
echo "== vgg16 fp32: exit $? ($SECONDS s)"
grep -E '^[0-9.]+ GiB +auto' "$W/vgg16-fp32.txt" | cut -c1-150
timeout 150 /opt/torch/.venv/bin/python tools/torch_compare.py --net vgg16 \
    --batch 256 --math fp32 --modes fp32-ckpt --segments 4 --iters 8 --warmup 3 \
    --vdnn "$W/vgg16-fp32.json" > "$W/vgg16-fp32-torch.txt" 2>&1
echo "== torch fp32-ckpt: exit $? ($SECONDS s)"
grep -vE "^(I|W|V)[0-9]{4} " "$W/vgg16-fp32-torch.txt" | tail -12 | cut -c1-160
echo "== done at ${SECONDS} s"
