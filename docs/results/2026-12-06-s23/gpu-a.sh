#!/usr/bin/env bash
# Session 23's first call: session 22's gpu-c.sh (the profile's launch per
# op and chunks timed adding, never run on a GPU), then why VGG-16 bf16
# 4 GiB's split convolutions' backward chunks ran 70-110 us over their
# profiled time at session 22 (all 8 chunks alike, so not dw_beta alone):
# --conv-debug 1 lists each runtime plan the graph-API convs build (batch,
# alignment, workspace, engine) in the profile and in the run.
# usage (device, after tar xJf .carry/build-h100.txz): gpu-a.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s23a}; mkdir -p "$O"
D=$(dirname "$0")
DEADLINE=420 bash "$D/../2026-12-06-s22/gpu-c.sh" "$B" "$O"
. "$D/../2026-12-05-s15/env.sh"
timeout 60 $B/vdnn-train nets/vgg16.yaml --batch 256 --math bf16 --budget 4G --iters 4 \
    --conv-debug 1 > "$O/vgg16-convdebug.log" 2>&1
echo "-- vgg16 bf16 4G --conv-debug 1: exit $? (at $SECONDS s)"
grep -c "runtime plan" "$O/vgg16-convdebug.log"
grep "runtime plan\|legacy API" "$O/vgg16-convdebug.log" | sed 's/^vdnn conv: //' | sort | uniq -c | sort -rn | head -30
