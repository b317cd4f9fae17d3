#!/usr/bin/env bash
# Session 34, prepared for the next session (not run: the device time was
# spent): (1) fp32 VGG-16 b256 at 6 / 8 / 12 / 16 GiB beside none with the
# coarser split's longer search (9f41285: 8 GiB predicted 392.5 ms on call
# 1's profile, was 410.3 and measured 0.4235 s), vdnn-bench, its profile
# measured at its start, 2 rounds; (2) the copy rates the profile measures
# beside a pass of each net (--conv-debug 1), against its busy rates
# (fp32 VGG-16's copies ran 5% under them in call 4).
# Everything in $O/s34f.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s34/gpu-f.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s34f}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'xz -T0 "$W"/*.json "$W"/*.log; tar czf "$O/s34f.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 300 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets 6G,8G,12G,16G,peak \
    --policies auto --rounds 2 --profile-out "$W/vgg16-fp32-profile.json" \
    --json "$W/vgg16-fp32.json" > "$W/vgg16-fp32.txt" 2>&1
echo "== vgg16 fp32: exit $? ($SECONDS s)"
grep -E '^[0-9.]+ GiB +auto' "$W/vgg16-fp32.txt" | cut -c1-150
for nm in vgg16:fp32 vgg16:bf16 resnet50:bf16; do
    n=${nm%:*} m=${nm#*:}
    timeout 120 $B/vdnn-train nets/$n.yaml --batch 256 --math $m --budget 8G --iters 1 \
        --conv-debug 1 --profile-out "$W/$n-$m-rates-profile.json" > "$W/$n-$m-rates.log" 2>&1
    echo "== $n $m rates: exit $? ($SECONDS s)"
    grep -E "copies beside a pass" "$W/$n-$m-rates.log" | cut -c1-240
done
echo "== done at ${SECONDS} s"
