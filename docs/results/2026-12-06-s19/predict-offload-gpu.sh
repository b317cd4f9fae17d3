#!/usr/bin/env bash
# Issue 33 item 1 on the GPU (s19-predict, predict-offload.md): the CUDA
# inference test with its new plans (batch norm split at build()'s net's
# floor, a residual block's input offloaded below the split-only floor),
# then GoogLeNet b64 through vdnn-predict on the measured profile: the
# floor (exit 6), the unconstrained run, and runs at budgets between the
# floor and the whole need, each with the plan's note (split, offloads,
# predicted ms per batch) and the wall time of 10 batches of synthetic
# images, all planned with the unconstrained run's measured profile
# (--profile-out, --profile). Outputs in OUTDIR.
# usage (device machine, repository root, after unpacking BUILD):
#   predict-offload-gpu.sh BUILD OUTDIR
set -u
B=${1:-build-cuda}; O=${2:-/tmp/s19-predict}; mkdir -p "$O"
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
echo "== test_inference_cpu_vs_cuda"
CK_RUN_CASE=test_inference_cpu_vs_cuda VD_BUILDDIR=$PWD/$B timeout 300 \
    $B/tests/cuda/cuda_test_cuda_train > "$O/test.txt" 2>&1
echo "exit $?"; cat "$O/test.txt"
echo "== GoogLeNet weights (1 iteration, batch 8)"
timeout 200 $B/vdnn-train nets/googlenet.yaml --batch 8 --iters 1 --save "$O/g.safetensors" \
    > "$O/train.txt" 2>&1
echo "exit $?"
P="nets/googlenet.yaml --init $O/g.safetensors --batch 64 --data synthetic:64,640 --format jsonl"
run() {   # label args
    local l=$1; shift
    local t0=$SECONDS
    timeout 300 $B/vdnn-predict $P "$@" > "$O/$l.jsonl" 2> "$O/$l.txt"
    echo "-- $l ($*): exit $?, $((SECONDS - t0)) s wall"
    grep "plan" "$O/$l.txt"
}
echo "== unconstrained (its measured profile kept for the runs below)"
run whole --profile-out "$O/profile.json"
echo "== floor (exit 6 expected)"
run floor --profile "$O/profile.json" --budget 1K
floor=$(grep -o "([0-9]* bytes)" "$O/floor.txt" | head -1 | tr -dc 0-9)
grep -o "the smallest budget.*" "$O/floor.txt"
[ -n "$floor" ] || { echo "no floor found"; exit 1; }
for f in 100 105 115 130 160; do   # per cent of the floor
    run "b$f" --profile "$O/profile.json" --budget $((floor * f / 100))
done
echo "== the probabilities against the unconstrained run's (first 3 lines)"
for f in 100 115 160; do cmp -s <(head -3 "$O/whole.jsonl") <(head -3 "$O/b$f.jsonl") \
    && echo "b$f: identical" || echo "b$f: differ (other engines at a chunk's batch)"; done
echo "== done at ${SECONDS} s"
