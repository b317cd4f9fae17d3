#!/usr/bin/env bash
# Session 36, call H: the busy copy rates from a pass of the net
# (vd_device_busy_from_pass; .carry/vdnn-bench-pass, this tree's
# vdnn-bench for sm_90): fp32 VGG-16 b256 at 5 and 4 GiB and bf16 at 4 GiB
# beside none, each profile measured at its start (--conv-debug 1 prints
# the rates beside the pass and beside the kernel), 1 round.
# There: bash docs/results/2026-12-07-s36/gpu-h.sh $OUT
set -u
O=${1:-/tmp/s36h}
. "$(dirname "$0")/../2026-12-05-s15/env.sh"
for m in fp32:5G,4G,peak bf16:4G,peak; do
    timeout 120 .carry/vdnn-bench-pass nets/vgg16.yaml --batch 256 --math ${m%%:*} \
        --budgets ${m#*:} --policies auto --rounds 1 --conv-debug 1 > "$O/${m%%:*}.txt" 2>&1
    echo "== ${m%%:*}: exit $? ($SECONDS s)"
    grep -E "copies beside a pass" "$O/${m%%:*}.txt" | cut -c1-200
    grep -E '^[0-9.]+ GiB +auto' "$O/${m%%:*}.txt" | cut -c1-150
done
