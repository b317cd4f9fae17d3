#!/usr/bin/env bash
# Session 33, call 2 (the machine of call 1): the replayed iteration's
# prediction (graph_launch_s) where nothing times its steps: vdnn-bench
# bf16 b256 with call 1's profiles loaded, ResNet-50 none / 4 GiB and
# ResNet-152 none / 10 GiB, 2 rounds, --graph auto, then ResNet-152 none
# with --graph off. Everything in $O/s33b.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s33/gpu-b.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s33b}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'tar czf "$O/s33b.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for n in r50 r152; do xz -dc "$D/s33a/$n.json.xz" > "$W/$n.json"; done
bench() {   # tag net profile budgets graph
    timeout 150 $B/vdnn-bench nets/$2.yaml --batch 256 --math bf16 --budgets $4 --policies none,auto \
        --profile "$W/$3.json" --rounds 2 --graph $5 --csv "$W/$1.csv" > "$W/$1.txt" 2>&1
    echo "== $1: exit $? ($SECONDS s)"
    grep -E '^(none|[0-9.]+ GiB) ' "$W/$1.txt" | cut -c1-150
}
bench r50 resnet50 r50 4G,peak auto
bench r152 resnet152 r152 10G,peak auto
bench r152-off resnet152 r152 peak off
rm -f "$W"/r50.json "$W"/r152.json
echo "== done at ${SECONDS} s"
