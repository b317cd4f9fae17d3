#!/usr/bin/env bash
# Issue 32 items 1 and 5, one call, auto's final splits: VGG-16
# b256 at tight budgets and the floors beside its own none (as gpu-split.sh),
# then PyTorch's checkpoint_sequential on the same card in the same call
# (tools/torch_compare.py, bf16 channels_last, 4 and 10 segments).
# usage (device machine, after tar xJf .carry/BUILD.txz): gpu-split2.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/split2}; mkdir -p "$O"
. "$(dirname "$0")/env.sh"
P=tests/plan/data/vgg16-b256-h100-bf16.json
for b in none 6G 4G 3G 2G; do row vgg16 bf16 256 $b 20 --profile $P; done
# fp32: each run measures its own profile (a loaded one can name other
# split options than this process's tuning kept: "profile comes from
# another setup")
for b in none 8G 3G; do row vgg16 fp32 256 $b 10; done
PY=/opt/torch/.venv/bin/python
for s in 4 10; do
    $PY tools/torch_compare.py --net vgg16 --batch 256 --modes bf16-cl,bf16-cl-ckpt --segments $s \
        --iters 10 --warmup 3 --json "$O/torch-ckpt$s.json" > "$O/torch-ckpt$s.log" 2>&1
    echo "torch segments $s: exit $?"; tail -6 "$O/torch-ckpt$s.log"
done
