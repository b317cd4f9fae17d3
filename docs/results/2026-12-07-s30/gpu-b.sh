#!/usr/bin/env bash
# Session 30, call 2: where the offload points' predictions miss (issue 32
# part 4: call 1's vdnn-bench had ResNet-50 bf16 4 GiB +3.5%, fp32 VGG-16
# 8 GiB +4.2%, every round alike) and fp32 VGG-16 beside PyTorch
# checkpointing (part 5). ResNet-50: vdnn-bench 4G beside none in rounds,
# its profile saved, then vdnn-train at 4 GiB with that profile and the
# step times of its last iteration (--step-times-out); fp32 VGG-16 8 GiB
# likewise with call 1's profile (measured on another machine: the saved
# profile's options run by label since 0ace5a3). Then
# tools/torch_compare.py --modes fp32-ckpt (checkpoint_sequential(4))
# beside call 1's vdnn-bench points. Everything in $O/s30b.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s30/gpu-b.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s30b}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
DEADLINE=${DEADLINE:-560}
trap 'tar czf "$O/s30b.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 120 $B/vdnn-bench nets/resnet50.yaml --batch 256 --math bf16 --budgets 4G,peak \
    --policies none,auto --profile-out "$W/r50-profile.json" --warmup 3 --iters 8 --rounds 2 \
    > "$W/r50-bench.txt" 2>&1
echo "== r50 bench: exit $? ($SECONDS s)"
grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$W/r50-bench.txt" | cut -c1-150
train() {   # tag net math budget iters profile
    timeout 150 $B/vdnn-train nets/$2.yaml --batch 256 --math $3 --budget $4 --iters $5 \
        --profile "$6" --data synthetic --step-times-out "$W/$1-steps.tsv" > "$W/$1.log" 2>&1
    echo "== $1: exit $? ($SECONDS s)"
    grep -E "^iteration time|steps beside|^  all|^  (D2H|H2D):|error|note" "$W/$1.log" | cut -c1-170
}
train r50-4G resnet50 bf16 4G 30 "$W/r50-profile.json"
xz -dc "$D/s30a/vgg16-fp32-profile.json.xz" > "$W/vgg16-fp32-profile.json"
train vgg16-fp32-8G vgg16 fp32 8G 12 "$W/vgg16-fp32-profile.json"
xz -dc "$D/s30a/vgg16-fp32.json.xz" > "$W/vgg16-fp32-bench.json"
timeout $(( DEADLINE - SECONDS )) /opt/torch/.venv/bin/python tools/torch_compare.py --net vgg16 \
    --batch 256 --math fp32 --modes fp32-ckpt --segments 4 --iters 8 --warmup 3 \
    --vdnn "$W/vgg16-fp32-bench.json" --json "$W/vgg16-fp32-ckpt.json" > "$W/vgg16-fp32-ckpt.txt" 2>&1
echo "== torch fp32-ckpt: exit $? ($SECONDS s)"
grep -vE "^(I|W|V)[0-9]{4} " "$W/vgg16-fp32-ckpt.txt" | tail -22 | cut -c1-160
xz -T0 "$W"/*.json "$W"/*.tsv 2>/dev/null
echo "== done at ${SECONDS} s"
