#!/usr/bin/env bash
# Session 34, call 4: PyTorch tf32 channels_last (tf32-cl) beside call 3's
# vdnn tf32 points (s34c/*-tf32.json: its tf32 is channels-last too) for
# VGG-16 and ResNet-50 b256; then fp32 VGG-16 8 GiB (+3.2% over its
# prediction in call 2) in vdnn-train with call 2's profile, its step times.
# Everything in $O/s34d.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s34/gpu-d.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s34d}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'tar czf "$O/s34d.tgz" -C "$W" .' EXIT
for n in vgg16 resnet50; do
    xz -dc "$D/s34c/$n-tf32.json.xz" > "$W/$n-tf32.json"
    timeout 150 /opt/torch/.venv/bin/python tools/torch_compare.py --net $n --batch 256 \
        --math tf32 --modes tf32-cl --iters 8 --warmup 3 --vdnn "$W/$n-tf32.json" \
        > "$W/$n-tf32cl.txt" 2>&1
    echo "== $n tf32-cl: exit $? ($SECONDS s)"
    grep -vE "^(I|W|V)[0-9]{4} " "$W/$n-tf32cl.txt" | grep -E "tf32-cl +[0-9]|vs tf32-cl" | cut -c1-160
done
xz -dc "$D/s34b/vgg16-fp32-profile.json.xz" > "$W/prof.json"
timeout 150 $B/vdnn-train nets/vgg16.yaml --batch 256 --math fp32 --budget 8G --iters 12 \
    --profile "$W/prof.json" --step-times --step-times-out "$W/vgg16-fp32-8G-steps.tsv" \
    > "$W/vgg16-fp32-8G.log" 2>&1
echo "== vgg16 fp32 8G train: exit $? ($SECONDS s)"
grep -E "measured|steps beside|predicted" "$W/vgg16-fp32-8G.log" | tail -8 | cut -c1-160
rm -f "$W/prof.json" "$W"/*-tf32.json; xz -T0 "$W"/*.tsv
echo "== done at ${SECONDS} s"
