#!/usr/bin/env bash
# Session 23, second call: auto's coarser split (AUTO_KS 2, 4, 8; the
# profile times chunks at 4 too). VGG-16 bf16 4 GiB planned 69.0 ms at
# k = 8 on session 22's profile and 62.7 at k = 4: does it run so?
# (1) --step-times at 4 GiB (the plan, its prediction, the steps);
# (2) tools/torch_compare.py: vdnn-bench none / auto at 6 and 4 GiB beside
# PyTorch bf16 channels-last checkpoint_sequential(4), the 1.5x;
# (3) ResNet-50 bf16 4 GiB against its none (issue 32's 0.80x, last
# measured in session 20).
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-b.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s23b}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-400}
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
left() { echo $(( DEADLINE - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
timeout 60 $B/vdnn-train nets/vgg16.yaml --batch 256 --math bf16 --budget 4G --iters 12 \
    --step-times-out "$O/vgg16-4G-steps.tsv" --profile-out "$O/vgg16-bf16-profile.json" \
    > "$O/vgg16-4G-steps.log" 2>&1
echo "-- vdnn-train vgg16 bf16 4G: exit $? (at $SECONDS s)"
grep -E '^iteration time|^vdnn-train: plan|^  all|steps beside' "$O/vgg16-4G-steps.log" | cut -c1-150
PY=/opt/torch/.venv/bin/python
timeout 200 $PY tools/torch_compare.py --net vgg16 --batch 256 --math bf16 --modes bf16-cl-ckpt \
    --segments 4 --iters 8 --warmup 3 --vdnn-bin "$B/vdnn-bench" \
    --vdnn-args "--budgets 6G,4G,peak --policies none,auto" --vdnn-out "$O/vgg16-bf16-bench.json" \
    --json "$O/vgg16-bf16-compare.json" > "$O/vgg16-bf16-compare.txt" 2>&1
echo "-- compare vgg16 bf16: exit $? (at $SECONDS s)"
grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/vgg16-bf16-compare.txt" | cut -c1-130
grep -E 'checkpoint  vdnn|no offload  vdnn' "$O/vgg16-bf16-compare.txt"
[ "$(left)" -gt 60 ] && { timeout 60 $B/vdnn-bench nets/resnet50.yaml --batch 256 --math bf16 \
    --budgets 4G,peak --policies none,auto --warmup 3 --iters 8 > "$O/resnet50-bench.txt" 2>&1
  echo "-- vdnn-bench resnet50 4G: exit $? (at $SECONDS s)"
  grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/resnet50-bench.txt" | cut -c1-130; }
xz -T0 "$O"/*.json "$O"/*.tsv
echo "== done at ${SECONDS} s"
