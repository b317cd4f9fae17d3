#!/usr/bin/env bash
# Session 27 (not run: no device machine started): the captured iteration
# cut into graphs with the copy streams' work issued eagerly at each launch
# (script-capture.patch, cuda_backend.cu's script), beside the one-graph
# capture it replaces (the tree it applies to) and the eager walk. First
# graphcopy (a CUDA graph's memcpy nodes against eager copies; what cuts
# cost; whether an eager wait after a launch waits for that launch's
# external record), then the GPU tests of the captured iteration (bitwise
# against eager), then vdnn-bench bf16 b256 ResNet-152 10 / 6 GiB and
# ResNet-50 4 GiB with one measured profile per net: new --graph on, old
# --graph on, new --graph off; between them the copy rates of a replayed
# ResNet-152 10 GiB iteration (vdnn-train --step-times), new and old.
# Prints as it runs.
# Here: nvcc -O2 -arch=sm_90 -o .carry/graphcopy docs/results/2026-12-07-s27/graphcopy.cu;
#   tools/gpu-pack build-h100 && cp .carry/build-h100.txz .carry/build-old.txz;
#   git apply docs/results/2026-12-07-s27/script-capture.patch && ninja -C build-h100 && tools/gpu-pack build-h100
# There: tar xJf .carry/build-h100.txz && mkdir -p old && tar xJf .carry/build-old.txz -C old &&
#   DEADLINE=440 bash docs/results/2026-12-07-s27/gpu-b.sh build-h100 old/build-h100 /tmp/s27b
# usage (device machine): gpu-b.sh NEW_BUILD OLD_BUILD OUTDIR
set -u
B=${1:-build-h100}; OLD=${2:-old/build-h100}; O=${3:-/tmp/s27b}; mkdir -p "$O"
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 60 .carry/graphcopy | tee "$O/graphcopy.txt"
for t in test_graph_vs_eager test_step_times_graph; do
    CK_RUN_CASE=$t CK_FORK=no timeout 90 $B/tests/cuda/cuda_test_cuda_train > "$O/$t.log" 2>&1
    echo "== $t: exit $? ($SECONDS s)"; tail -2 "$O/$t.log"
done
DEADLINE=${DEADLINE:-560}
bench() {   # tag build net budgets graph
    [ $(( DEADLINE - SECONDS )) -lt 100 ] && { echo "== $3 $1: skipped"; return; }
    local P="$O/$3-profile.json"
    local prof="--profile $P"; [ -f "$P" ] || prof="--profile-out $P"
    timeout $(( DEADLINE - SECONDS )) $2/vdnn-bench nets/$3.yaml --batch 256 --math bf16 --budgets "$4" --policies none,auto \
        --graph "$5" $prof --warmup 3 --iters 10 --json "$O/$3-$1.json" > "$O/$3-$1.txt" 2>&1
    echo "== $3 $1 (--graph $5): exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/$3-$1.txt" | cut -c1-130
}
bench new-on $B resnet152 10G,6G,peak on
bench old-on $OLD resnet152 10G,6G,peak on
bench new-off $B resnet152 10G,6G,peak off
# the copy rates of a replayed iteration (--no-stage-input: the last one is
# replayed too), patched and one-graph
for b in new:$B old:$OLD; do
    [ $(( DEADLINE - SECONDS )) -lt 100 ] && break
    timeout 60 ${b#*:}/vdnn-train nets/resnet152.yaml --batch 256 --math bf16 --budget 10G --iters 12 \
        --graph on --no-stage-input --step-times --profile "$O/resnet152-profile.json" \
        > "$O/resnet152-10G-${b%%:*}-steps.txt" 2>&1
    echo "== resnet152 10G ${b%%:*} step times: exit $?"
    grep -E "D2H|H2D|captured|measured" "$O/resnet152-10G-${b%%:*}-steps.txt" | head -6 | cut -c1-150
done
bench new-on $B resnet50 4G,peak on
bench old-on $OLD resnet50 4G,peak on
bench new-off $B resnet50 4G,peak off
xz -T0 "$O"/*.json
echo "== done at ${SECONDS} s"
