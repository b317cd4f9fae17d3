#!/usr/bin/env bash
# Session 26, second call: why the captured iteration runs slower than the
# eager one at offload points (first call: ResNet-152 bf16 6 GiB eager
# iterations 113.6 ms, replayed 117.2; none the other way, 99.7 / 96.0).
# ResNet-152 bf16 b256 at 6 and 10 GiB, ResNet-50 at 4 GiB, one profile per
# net (the first call's): the captured iteration (default), --graph off,
# and --no-stage-input (every iteration then one key: the step times of
# the last iteration are of a replayed graph, beside the same eagerly);
# per-iteration step times printed.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-c.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s26c}; mkdir -p "$O"
P=$O; for f in r152 r50; do xz -dc "$(dirname "$0")/s26a/$f-profile.json.xz" > "$O/$f-profile.json"; done
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
nvidia-smi --query-gpu=name --format=csv,noheader
run() {   # name net budget profile args...
    local n=$1 net=$2 b=$3 prof=$4; shift 4
    timeout 100 $B/vdnn-train nets/$net.yaml --batch 256 --math bf16 --iters 24 --budget $b \
        --profile "$prof" "$@" > "$O/$n.log" 2>&1
    printf '%-22s exit %d  %s | %s\n' "$n" $? \
        "$(grep -o 'measured [0-9.]* s' "$O/$n.log" | head -1) $(grep -o 'predicted [0-9.]* s' "$O/$n.log" | head -1)" \
        "$(grep -E '^epoch' "$O/$n.log" | awk '{for(i=1;i<=NF;i++) if($i=="step") printf "%s ", $(i+1)}')"
}
for b in 6G 10G; do
    run r152-$b-graph resnet152 $b $P/r152-profile.json
    run r152-$b-eager resnet152 $b $P/r152-profile.json --graph off
    run r152-$b-nostage resnet152 $b $P/r152-profile.json --no-stage-input --step-times-out "$O/r152-$b-nostage-steps.tsv"
    run r152-$b-nostage-eager resnet152 $b $P/r152-profile.json --no-stage-input --graph off --step-times-out "$O/r152-$b-nostage-eager-steps.tsv"
done
run r50-4G-graph resnet50 4G $P/r50-profile.json
run r50-4G-eager resnet50 4G $P/r50-profile.json --graph off
run r50-4G-nostage resnet50 4G $P/r50-profile.json --no-stage-input
grep -E "^  (D2H|H2D):|^  all|captured iteration" "$O"/r152-*-nostage*.log | cut -c1-200
xz -T0 "$O"/*.tsv
echo "== done at ${SECONDS} s"
