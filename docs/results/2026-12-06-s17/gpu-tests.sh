#!/usr/bin/env bash
# Issue 33 on the GPU, one call: the PyTorch reference of the optimizer test
# (tools/optim_reference.py with torch, into OUTDIR/adamw_reference.json),
# then every CUDA test binary (AdamW / Nesterov against the reference and
# against the CPU, the loss layer's counts, the inference executor, frozen
# layers), then vdnn-predict on CUDA after a short LeNet run.
# usage (device machine, after tar xJf .carry/BUILD.txz): gpu-tests.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s17t}; mkdir -p "$O"
. "$(dirname "$0")/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B CK_FORK=no CK_DEFAULT_TIMEOUT=600
/opt/torch/.venv/bin/python tools/optim_reference.py "$O/adamw_reference.json" > "$O/ref.log" 2>&1
echo "optim_reference.py: exit $? ($(tail -1 "$O/ref.log"))"
if cmp -s "$O/adamw_reference.json" tests/train/data/adamw_reference.json; then
    echo "reference: identical to the committed file"
else
    cp "$O/adamw_reference.json" tests/train/data/adamw_reference.json   # the tests below read it
    echo "reference: differs from the committed file (the CUDA test runs on torch's)"
fi
for t in cuda_test_cuda_ops cuda_test_cuda_train; do
    timeout 300 "$B/tests/cuda/$t" > "$O/$t.log" 2>&1
    echo "$t: exit $? ($(grep -E '^[0-9]+%:' "$O/$t.log" | tail -1))"
    grep -E ':[EF]:' "$O/$t.log" | head -8
done
timeout 120 $B/vdnn-train nets/lenet.yaml --iters 60 --save "$O/l.safetensors" --quiet > "$O/lenet.log" 2>&1
echo "lenet: exit $? ($(grep -o 'test accuracy.*' "$O/lenet.log"))"
timeout 60 $B/vdnn-predict nets/lenet.yaml --init "$O/l.safetensors" --data synthetic --backend cuda \
    > "$O/predict.log" 2>&1
echo "predict cuda: exit $? ($(tail -1 "$O/predict.log"))"
timeout 60 $B/vdnn-predict nets/lenet.yaml --init "$O/l.safetensors" --data synthetic --backend cpu \
    > "$O/predict-cpu.log" 2>&1
echo "predict cpu: exit $? ($(tail -1 "$O/predict-cpu.log"))"
