#!/usr/bin/env bash
# Session 26, the torch.compile call (issue 34: VGG-16 fp32 beside
# torch.compile, which sessions 19, 22 and 24 saw run past 280-570 s
# without finishing). tools/torch_compare.py --modes compile-fp32 alone
# (vdnn's side from the first call's vdnn-bench JSON when given, else none
# here first), with inductor's INFO log (its compile phases, timestamped)
# and, every 30 s, the GPU's utilisation and memory and the processes'
# CPU: where the time goes when it does not finish. Caches in
# /tmp/inductor-s26 (a second call on the same warm machine reuses them).
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-b.sh BUILD OUTDIR [VDNN_JSON]
set -u
B=${1:-build-h100}; O=${2:-/tmp/s26b}; J=${3:-}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-570}
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B TORCHINDUCTOR_CACHE_DIR=/tmp/inductor-s26 TORCH_LOGS=inductor
nvidia-smi --query-gpu=name --format=csv,noheader
du -sh "$TORCHINDUCTOR_CACHE_DIR" 2>/dev/null
if [ -z "$J" ]; then
    J="$O/vgg16-fp32-bench.json"
    timeout 120 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets peak --policies none \
        --warmup 3 --iters 8 --json "$J" > "$O/vgg16-fp32-bench.txt" 2>&1
    echo "-- vdnn-bench vgg16 fp32 none: exit $? ($SECONDS s)"
fi
( while sleep 30; do
    printf '%s %4ds gpu %s | cpu %s\n' "$(date +%T)" $SECONDS \
        "$(nvidia-smi --query-gpu=utilization.gpu,memory.used --format=csv,noheader | tr -d '\n')" \
        "$(ps -eo pcpu,comm --sort=-pcpu | sed -n 2,4p | tr -s ' ' | tr '\n' ';')"
  done ) > "$O/monitor.txt" 2>&1 &
MON=$!
echo "== compile-fp32 with $(( DEADLINE - SECONDS )) s (at $SECONDS s)"
timeout $(( DEADLINE - SECONDS )) /opt/torch/.venv/bin/python tools/torch_compare.py --net vgg16 --batch 256 \
    --math fp32 --modes compile-fp32 --iters 8 --warmup 3 --vdnn "$J" \
    --json "$O/vgg16-fp32-compile.json" > "$O/vgg16-fp32-compile.txt" 2>&1
echo "exit $? (at $SECONDS s)"
kill $MON
grep -E "torchinductor|Step [0-9]" "$O/vgg16-fp32-compile.txt" | cut -c1-160 | tail -8
tail -6 "$O/monitor.txt"
grep -vE "^(I|W|V)[0-9]{4} " "$O/vgg16-fp32-compile.txt" | tail -12
echo "== done at ${SECONDS} s"
