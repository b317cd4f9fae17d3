#!/usr/bin/env bash
# Session 34, call 5 (the last device time): fp32 VGG-16 b256 at 8 GiB
# with the coarser split's longer search (9f41285), vdnn-train with call
# 1's profile (s34b/), 10 iterations: measured against predicted (call 1's
# plan there: 0.4235 s measured, 0.4103 predicted; this one predicts
# 0.3925). Everything in $O/s34g.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s34/gpu-g.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s34g}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'tar czf "$O/s34g.tgz" -C "$W" .' EXIT
xz -dc "$D/s34b/vgg16-fp32-profile.json.xz" > "$W/prof.json"
timeout 70 $B/vdnn-train nets/vgg16.yaml --batch 256 --math fp32 --budget 8G --iters 10 \
    --profile "$W/prof.json" > "$W/vgg16-fp32-8G.log" 2>&1
echo "== vgg16 fp32 8G: exit $? ($SECONDS s)"
rm -f "$W/prof.json"
grep -E "plan:|iteration time|split layers|process peak" "$W/vgg16-fp32-8G.log" | cut -c1-200
