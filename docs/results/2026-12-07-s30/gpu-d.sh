#!/usr/bin/env bash
# Session 30, call 3: a split conv option on a chunk of whole sub-batches
# runs through its own sub-batch plan (cuda_convgraph_run.cu; before, a
# plan built for the chunk's batch: fp32 VGG-16 8 GiB's features.2
# backward chunks 19.1 ms against 17.1 predicted, call 2). The chunk tests
# on the GPU (test_cuda_ops test_chunked, test_cuda_train
# test_chunked_invariance), then fp32 VGG-16 8 GiB with call 1's profile
# and its step times, as call 2 ran it. Everything in $O/s30d.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s30/gpu-d.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s30d}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'xz -T0 "$W"/*.tsv 2>/dev/null; tar czf "$O/s30d.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
for t in "cuda_test_cuda_ops test_chunked" "cuda_test_cuda_train test_chunked_invariance"; do
    set -- $t
    CK_RUN_CASE=$2 timeout 150 $B/tests/cuda/$1 > "$W/$2.log" 2>&1
    echo "== $2: exit $? ($SECONDS s)"; tail -3 "$W/$2.log" | cut -c1-300
done
xz -dc "$D/s30a/vgg16-fp32-profile.json.xz" > "$W/vgg16-fp32-profile.json"
timeout 150 $B/vdnn-train nets/vgg16.yaml --batch 256 --math fp32 --budget 8G --iters 12 \
    --profile "$W/vgg16-fp32-profile.json" --data synthetic \
    --step-times-out "$W/vgg16-fp32-8G-steps.tsv" > "$W/vgg16-fp32-8G.log" 2>&1
echo "== vgg16-fp32-8G: exit $? ($SECONDS s)"
grep -E "^iteration time|steps beside|^  all|^  (D2H|H2D):|error|bwd features.(2|10) " "$W/vgg16-fp32-8G.log" | cut -c1-170
rm -f "$W/vgg16-fp32-profile.json"
echo "== done at ${SECONDS} s"
