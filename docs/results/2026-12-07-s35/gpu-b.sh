#!/usr/bin/env bash
# Session 35, call B: (1) which cuDNN engines a split layer's chunks run
# (fp32 VGG-16 b256 at 5 GiB: 24 layers in 8 chunks; --conv-debug 2 prints
# each layer's timed candidates at the setup batch and the runtime plan
# each chunk batch gets), where the profile times features.17's forward
# 4.9x slower per sample at half the batch; (2) PyTorch's checkpointing
# beside call A's vdnn points (issue 32 part 5: >= 1.5x at no more
# memory): bf16 channels_last with one checkpoint per ResNet block
# (ResNet-152 52 units, ResNet-50 18), VGG-16 checkpoint_sequential(4),
# and fp32 VGG-16 checkpoint_sequential(4). Everything in $O/s35b.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s35/gpu-b.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s35b}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'xz -T0 "$W"/*.log 2>/dev/null; tar czf "$O/s35b.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
timeout 120 $B/vdnn-train nets/vgg16.yaml --batch 256 --math fp32 --budget 5G --iters 2 \
    --conv-debug 2 > "$W/chunks-5g.log" 2>&1
echo "== vgg16 fp32 5G conv-debug: exit $? ($SECONDS s)"
grep -E "split layers|measured|predicted" "$W/chunks-5g.log" | head -4 | cut -c1-200
grep -E "'features\.(17|19|12)'" "$W/chunks-5g.log" | grep -E "runtime plan|fastest|chosen|option" | head -30 | cut -c1-220
tc() {   # tag net math modes segments
    timeout 150 /opt/torch/.venv/bin/python tools/torch_compare.py --net $2 --batch 256 \
        --math $3 --modes $4 --segments $5 --iters 8 --warmup 3 > "$W/$1.log" 2>&1
    echo "== torch $1: exit $? ($SECONDS s)"
    grep -vE "^(I|W|V)[0-9]{4} " "$W/$1.log" | grep -E "ckpt|checkpoint" | tail -3 | cut -c1-180
}
tc r152-ckpt resnet152 bf16 bf16-cl-ckpt 52
tc r50-ckpt resnet50 bf16 bf16-cl-ckpt 18
tc vgg16-ckpt vgg16 bf16 bf16-cl-ckpt 4
tc vgg16-fp32-ckpt vgg16 fp32 fp32-ckpt 4
echo "== done at ${SECONDS} s"
