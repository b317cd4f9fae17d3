#!/usr/bin/env bash
# Session 28: session 27's gpu-b.sh cut to what decides the patch
# (script-capture.patch) in about five minutes, for a session whose device
# time is mostly spent on failed starts: graphcopy, the GPU tests of the
# captured iteration, then vdnn-bench bf16 b256 ResNet-152 10 / 6 GiB with
# one measured profile: patched --graph on against --graph off (the eager
# walk; session 26 measured the one-graph replay slower than it at both),
# then the copy rates of a replayed 10 GiB iteration, then ResNet-50 4 GiB
# the same way if time is left.
# Here: as session 27's gpu-b.sh (the patched build in .carry/build-h100.txz).
# There: tar xJf .carry/build-h100.txz && DEADLINE=330 bash docs/results/2026-12-07-s28/gpu-a.sh build-h100 /tmp/s28a
set -u
B=${1:-build-h100}; O=${2:-/tmp/s28a}; mkdir -p "$O"
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
timeout 60 .carry/graphcopy | tee "$O/graphcopy.txt"
for t in test_graph_vs_eager test_step_times_graph; do
    CK_RUN_CASE=$t CK_FORK=no timeout 90 $B/tests/cuda/cuda_test_cuda_train > "$O/$t.log" 2>&1
    echo "== $t: exit $? ($SECONDS s)"; tail -2 "$O/$t.log"
done
DEADLINE=${DEADLINE:-330}
bench() {   # tag net budgets graph
    [ $(( DEADLINE - SECONDS )) -lt 60 ] && { echo "== $2 $1: skipped"; return; }
    local P="$O/$2-profile.json"
    local prof="--profile $P"; [ -f "$P" ] || prof="--profile-out $P"
    timeout $(( DEADLINE - SECONDS )) $B/vdnn-bench nets/$2.yaml --batch 256 --math bf16 --budgets "$3" --policies none,auto \
        --graph "$4" $prof --warmup 3 --iters 10 --json "$O/$2-$1.json" > "$O/$2-$1.txt" 2>&1
    echo "== $2 $1 (--graph $4): exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/$2-$1.txt" | cut -c1-130
}
bench on resnet152 10G,6G,peak on
bench off resnet152 10G,6G,peak off
if [ $(( DEADLINE - SECONDS )) -ge 60 ]; then
    timeout 60 $B/vdnn-train nets/resnet152.yaml --batch 256 --math bf16 --budget 10G --iters 12 \
        --graph on --no-stage-input --step-times --profile "$O/resnet152-profile.json" \
        > "$O/resnet152-10G-steps.txt" 2>&1
    echo "== resnet152 10G step times: exit $?"
    grep -E "D2H|H2D|captured|measured" "$O/resnet152-10G-steps.txt" | head -6 | cut -c1-150
fi
bench on resnet50 4G,peak on
bench off resnet50 4G,peak off
xz -T0 "$O"/*.json
echo "== done at ${SECONDS} s"
