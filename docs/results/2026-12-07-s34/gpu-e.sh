#!/usr/bin/env bash
# Session 34, call 5: the copy rates the profile measures beside a pass of
# the net (time_compute_slow, on stderr with --conv-debug 1), against its
# busy rates (beside a memory-bound kernel): fp32 VGG-16 b256 (whose 8 GiB
# D2H copies ran at 49.5 GB/s in call 4 against 52.3 predicted) and bf16.
# vdnn-plan measuring the profile. Everything in $O/s34e.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s34/gpu-e.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s34e}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'tar czf "$O/s34e.tgz" -C "$W" .' EXIT
for nm in vgg16:fp32 vgg16:bf16 resnet50:bf16 resnet152:bf16; do
    n=${nm%:*} m=${nm#*:}
    timeout 120 $B/vdnn-train nets/$n.yaml --batch 256 --math $m --budget 8G --iters 1 \
        --conv-debug 1 --profile-out "$W/$n-$m-profile.json" > "$W/$n-$m.log" 2>&1
    echo "== $n $m: exit $? ($SECONDS s)"
    grep -E "copies beside a pass" "$W/$n-$m.log" | cut -c1-240
done
xz -T0 "$W"/*.json "$W"/*.log
echo "== done at ${SECONDS} s"
