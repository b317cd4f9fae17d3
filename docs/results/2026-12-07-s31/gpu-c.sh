#!/usr/bin/env bash
# Session 31, call 3: vdnn-bench ran fp32 VGG-16 8 GiB at 0.4497 s (call
# 1), vdnn-train the same plan and profile at 0.4172 (call 2). A runtime
# conv plan (run_alt) was reused for any call whose workspace fit it, so a
# chunk's engine could be one chosen within less workspace by an earlier
# point; now only where the heuristics would choose the same engine. With
# call 1's profile: vdnn-bench 16G,12G,8G,peak (as call 1), vdnn-bench 8G
# alone, vdnn-train 8G with --conv-debug 1 (the runtime plans it builds).
# Everything in $O/s31c.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s31/gpu-c.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s31c}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'tar czf "$O/s31c.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
P=$W/p.json
xz -dc "$D/s31a/vgg16-fp32-profile.json.xz" > "$P"
for bs in "all 16G,12G,8G,peak" "8G 8G"; do
    set -- $bs
    timeout 240 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets $2 \
        --policies none,auto --profile "$P" --warmup 3 --iters 8 --rounds 2 > "$W/bench-$1.txt" 2>&1
    echo "== bench $2: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$W/bench-$1.txt" | cut -c1-150
done
timeout 150 $B/vdnn-train nets/vgg16.yaml --batch 256 --math fp32 --budget 8G --iters 12 \
    --profile "$P" --data synthetic --conv-debug 1 > "$W/train-8G.log" 2>&1
echo "== train 8G: exit $? ($SECONDS s)"
grep -E "^iteration time|error" "$W/train-8G.log" | cut -c1-170
echo "runtime plans built: $(grep -c 'runtime plan' "$W/train-8G.log")"
rm -f "$P"
echo "== done at ${SECONDS} s"
