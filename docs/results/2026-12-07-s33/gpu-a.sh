#!/usr/bin/env bash
# Session 33, call 1: where a captured iteration with offload loses what
# capturing saves (session 32: --graph on at ResNet-50 4 GiB 0.0507 s
# against 0.0501 eager, ResNet-152 10 GiB 0.1057 against 0.1048, where
# none captured runs ~3.7 us per step under its eager prediction), and
# why offload points ran 2-5% slower in the process that measured its
# profile. vdnn-train bf16 b256, 20 iterations, the last one's step times
# (--step-times-out): each net's profile measured (--profile-out), then
# loaded, eager and captured (--graph on), at the offload budget and at
# none; the profile's launch overheads, eager and in a graph. Everything in $O/s33a.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s33/gpu-a.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s33a}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'xz -T0 "$W"/*.json "$W"/*.tsv 2>/dev/null; tar czf "$O/s33a.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
train() {   # tag net budget profile-args...
    local t=$1 n=$2 b=$3; shift 3
    local pa="--budget $b"; [ "$b" = none ] && pa="--policy none"
    timeout 200 $B/vdnn-train nets/$n.yaml --batch 256 --math bf16 $pa --iters 20 \
        --data synthetic --step-times-out "$W/$t-steps.tsv" "$@" > "$W/$t.log" 2>&1
    printf '%-16s exit %s %4ss: %s | %s\n' $t $? $SECONDS \
        "$(grep -o 'measured [0-9.]* s' "$W/$t.log" | head -1)" \
        "$(grep -E 'steps beside|error' "$W/$t.log" | tr -s ' ' | cut -c1-150 | paste -sd'|')"
}
train r50-4G-meas resnet50 4G --profile-out "$W/r50.json" --conv-debug 1
grep -oE '"(graph_)?launch_s": [0-9.e-]+' "$W/r50.json" | paste -sd' '
train r50-4G-load resnet50 4G --profile "$W/r50.json" --conv-debug 1
train r50-4G-graph resnet50 4G --profile "$W/r50.json" --graph on
train r50-none-graph resnet50 none --profile "$W/r50.json" --graph on
train r50-none-eager resnet50 none --profile "$W/r50.json" --graph off
train r152-10G-meas resnet152 10G --profile-out "$W/r152.json"
train r152-10G-load resnet152 10G --profile "$W/r152.json"
train r152-10G-graph resnet152 10G --profile "$W/r152.json" --graph on
train r152-none-graph resnet152 none --profile "$W/r152.json" --graph on
train r152-none-eager resnet152 none --profile "$W/r152.json" --graph off
echo "== done at ${SECONDS} s"
