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
# Fine-tuning against torchvision: its seeded ResNet-18 as --init, a new
# 10-class head, the backbone up to layer3 frozen, 20 iterations on CUDA
# (synthetic data, batch 32); the result loads into torchvision strictly and
# the frozen tensors are torchvision's bit for bit.
PY=/opt/torch/.venv/bin/python
sed 's/classes: 1000/classes: 10/; s/type: fc, out: 1000/type: fc, out: 10/' \
    nets/examples/resnet18.yaml > "$O/r18-10.yaml"
$PY tools/make_resnet18_init.py "$O/r18.safetensors" --seed 1 > "$O/r18.log" 2>&1
timeout 120 $B/vdnn-train "$O/r18-10.yaml" --data synthetic --batch 32 --iters 20 --backend cuda \
    --init "$O/r18.safetensors" --init-skip '^fc\.' --freeze '^(conv1|bn1|layer[1-3])\.' \
    --save "$O/r18-10.safetensors" >> "$O/r18.log" 2>&1
echo "resnet18 fine-tune cuda: exit $? ($(grep -o 'loaded [0-9]* of the [0-9]* tensors' "$O/r18.log"))"
$PY tools/make_resnet18_init.py --check "$O/r18.safetensors" "$O/r18-10.safetensors" \
    --freeze '^(conv1|bn1|layer[1-3])\.' --skip '^fc\.' > "$O/r18-check.log" 2>&1
echo "torchvision check: exit $? ($(tail -1 "$O/r18-check.log"))"
rm -f "$O"/*.safetensors "$O"/*.state
