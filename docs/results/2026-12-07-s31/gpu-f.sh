#!/usr/bin/env bash
# Session 31, call 6: call 5 ran GoogLeNet bf16 4 GiB (a plan that
# recomputes, offloads nothing: a captured iteration under --graph auto)
# at 0.0287 s replayed and 0.0270 eager. Both ways in rounds with call 4's
# profiles: GoogLeNet 4G and its need (peak), ResNet-50 4G (offloads: eager
# either way) and peak, each vdnn-bench with --graph auto then off; then
# GoogLeNet 4G in vdnn-train (graph auto), its device memory report with
# the graphs' growth counted as context (c41e291).
# Everything in $O/s31f.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s31/gpu-f.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s31f}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'tar czf "$O/s31f.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for net in googlenet:googlenet resnet50:r50; do
    n=${net%%:*}; t=${net##*:}
    xz -dc "$D/s31d/$t-profile.json.xz" > "$W/p.json"
    for g in auto off; do
        timeout 120 $B/vdnn-bench nets/$n.yaml --batch 256 --math bf16 --budgets 4G,peak \
            --policies auto --profile "$W/p.json" --graph $g --warmup 3 --iters 10 --rounds 3 \
            > "$W/$t-graph-$g.txt" 2>&1
        echo "== $t --graph $g: exit $? ($SECONDS s)"
        grep -E '^[0-9.]+ GiB +auto +yes' "$W/$t-graph-$g.txt" | cut -c1-150
    done
done
xz -dc "$D/s31d/googlenet-profile.json.xz" > "$W/p.json"
timeout 100 $B/vdnn-train nets/googlenet.yaml --batch 256 --math bf16 --budget 4G --iters 12 \
    --profile "$W/p.json" --data synthetic > "$W/googlenet-4G-train.log" 2>&1
echo "== googlenet 4G vdnn-train: exit $? ($SECONDS s)"
grep -E "^iteration time|^device memory|^growth|error" "$W/googlenet-4G-train.log" | cut -c1-200
rm -f "$W/p.json"
echo "== done at ${SECONDS} s"
