#!/usr/bin/env bash
# Session 22's second call (the warm machine after gpu-a.sh): VGG-16 fp32
# none / 16 / 12 GiB in one vdnn-bench process (issue 34: 0.974x / 0.945x to
# keep), then VGG-16 fp32 beside torch.compile (compile-fp32) for what is
# left of 280 s.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-b.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s22b}; mkdir -p "$O"
. "$(dirname "$0")/../2026-12-05-s15/env.sh"
timeout 120 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets 16G,12G,peak \
    --policies none,auto --warmup 3 --iters 6 --profile-out $O/vgg16-fp32-profile.json \
    > $O/vgg16-fp32-bench.txt 2>&1
echo "bench exit $? at $SECONDS"
grep -E '^[0-9.]+ GiB +(none|auto) +yes' $O/vgg16-fp32-bench.txt | cut -c1-150
timeout 280 /opt/torch/.venv/bin/python tools/torch_compare.py --net vgg16 --batch 256 --math fp32 \
    --modes compile-fp32 --iters 8 --warmup 3 --vdnn-bin $B/vdnn-bench \
    --vdnn-args "--budgets peak --policies none" --json $O/vgg16-fp32-compare.json \
    > $O/vgg16-fp32-compare.txt 2>&1
echo "compare exit $? at $SECONDS"
grep -E "x speed|first iteration|GiB +none" $O/vgg16-fp32-compare.txt | grep -v Warn | tail -5
