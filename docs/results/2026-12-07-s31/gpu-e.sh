#!/usr/bin/env bash
# Session 31, call 5: ResNet-152 bf16 b256 10 / 9 / 8 GiB in rounds beside
# none with the bound's start's retries from tighter seeds (9fdcd7c; 10 GiB
# planned 108.1 -> 107.0 ms on call 4's profile), the profile measured at
# the bench's start. Then why GoogLeNet 4 GiB's device memory runs 4 MiB
# over the budget plus what was outside the pool (calls 4 and session 30's):
# with call 4's profile, vdnn-bench 4G with --graph auto (the plan offloads
# nothing: the iteration is a CUDA graph) and --graph off.
# Everything in $O/s31e.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s31/gpu-e.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s31e}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'xz -T0 "$W"/*.json 2>/dev/null; tar czf "$O/s31e.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 200 $B/vdnn-bench nets/resnet152.yaml --batch 256 --math bf16 --budgets 10G,9G,8G,peak \
    --policies none,auto --profile-out "$W/r152-profile.json" --warmup 3 --iters 8 --rounds 3 \
    --json "$W/r152.json" > "$W/r152.txt" 2>&1
echo "== r152: exit $? ($SECONDS s)"
grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$W/r152.txt" | cut -c1-150
xz -dc "$D/s31d/googlenet-profile.json.xz" > "$W/g.json"
for g in auto off; do
    timeout 100 $B/vdnn-bench nets/googlenet.yaml --batch 256 --math bf16 --budgets 4G \
        --policies auto --profile "$W/g.json" --graph $g --warmup 3 --iters 8 > "$W/googlenet-graph-$g.txt" 2>&1
    echo "== googlenet 4G --graph $g: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +auto +yes|^outside' "$W/googlenet-graph-$g.txt" | cut -c1-150
done
rm -f "$W/g.json"
echo "== done at ${SECONDS} s"
