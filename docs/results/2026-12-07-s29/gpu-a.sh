#!/usr/bin/env bash
# Session 29, call 1: every tight-budget point of issues 32 and 34 in rounds
# (vdnn-bench --rounds: the points in turn, so that the device's drift
# during a sweep lands on every point alike), each net's profile measured
# by its own vdnn-bench at its start. bf16 b256: ResNet-152 10 / 8 / 6 GiB,
# VGG-16 6 / 4 GiB, ResNet-50 4 GiB, GoogLeNet 4 GiB; fp32 VGG-16 16 / 12 /
# 8 GiB; each beside none. Then fp32 VGG-16 16 / 12 GiB again with one
# layer split by hand (search.md: auto's plans there are not the best the
# planner can reach), the split of the best prediction among a few on this
# call's profile, in rounds beside none. Tables and profiles under $O.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s29/gpu-a.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s29a}; mkdir -p "$O"
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
DEADLINE=${DEADLINE:-560}
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
bench() {   # tag net math budgets rounds [vdnn-bench args: else the profile measured]
    local tag=$1 net=$2 math=$3 budgets=$4 rounds=$5; shift 5
    [ $(( DEADLINE - SECONDS )) -lt 60 ] && { echo "== $tag: skipped"; return; }
    [ $# -eq 0 ] && set -- --profile-out "$O/$tag-profile.json"
    timeout $(( DEADLINE - SECONDS )) $B/vdnn-bench nets/$net.yaml --batch 256 --math $math \
        --budgets "$budgets" --policies none,auto "$@" \
        --warmup 3 --iters 8 --rounds $rounds --json "$O/$tag.json" > "$O/$tag.txt" 2>&1
    echo "== $tag: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/$tag.txt" | cut -c1-150
}
bench r152 resnet152 bf16 10G,8G,6G,peak 3
bench vgg16-fp32 vgg16 fp32 16G,12G,8G,peak 2
P=$O/vgg16-fp32-profile.json
for b in 16G 12G; do
    best=; bt=
    for c in features.0=2 features.0=4 features.5=2 features.5=4; do
        t=$($B/vdnn-plan nets/vgg16.yaml --batch 256 --math fp32 --profile "$P" --budget $b \
            --chunks $c --quiet 2>/dev/null | awk '/predicted iteration/ {print $3}')
        echo "-- vdnn-plan fp32 vgg16 $b --chunks $c: ${t:-failed} ms"
        [ -n "$t" ] && { [ -z "$bt" ] || awk "BEGIN {exit !($t < $bt)}"; } && { best=$c; bt=$t; }
    done
    [ -n "$best" ] && bench vgg16-fp32-$b-split vgg16 fp32 $b,peak 2 --profile "$P" --chunks $best
done
bench vgg16 vgg16 bf16 6G,4G,peak 2
bench r50 resnet50 bf16 4G,peak 2
bench googlenet googlenet bf16 4G,peak 2
xz -T0 "$O"/*.json
echo "== done at ${SECONDS} s"
