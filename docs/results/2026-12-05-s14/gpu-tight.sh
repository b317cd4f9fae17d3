#!/usr/bin/env bash
# Issue 32's tight budgets against vdnn's own no-offload run, one card, one
# call: b256, 20 iterations each, compute-only iteration time. Per net and
# math one measured profile (the first run's, --profile-out) loaded by the
# rest, so the runs plan on the same numbers; VGG-16 bf16 loads the H100
# profile of tests/plan/data instead.
# usage (device machine, after tar xJf .carry/BUILD.txz):
#   [TIGHT_PART=first|second] gpu-tight.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/tight}; mkdir -p "$O"
libs=.carry/lib
for d in /opt/torch/.venv/lib/python3.*/site-packages/nvidia/cudnn/lib /usr/local/cuda/lib64; do
    [ -d "$d" ] && libs="$libs:$d"; done
export LD_LIBRARY_PATH=$libs
row() {   # net math budget profile-args
    local n=$1 m=$2 b=$3; shift 3
    local log="$O/$n-$m-$b.log" pa="--policy none"
    [ "$b" != none ] && pa="--budget $b"
    $B/vdnn-train nets/$n.yaml --batch 256 --math $m --iters 20 $pa "$@" > "$log" 2>&1
    printf '%-10s %-5s %-5s %s | %s | %s\n' $n $m $b \
        "$(grep -o 'measured [0-9.]* s' "$log" | head -1)" \
        "$(grep -o 'predicted [0-9.]* s/iter' "$log" | head -1)" \
        "$(grep -o 'process peak [0-9.]* [GM]iB' "$log" | head -1)$(grep -o 'error.*' "$log" | head -c 120)"
}
P=tests/plan/data/vgg16-b256-h100-bf16.json
if [ "${TIGHT_PART:-all}" != second ]; then
    for b in none 6G 4G; do row vgg16 bf16 $b --profile $P; done
    row resnet50 bf16 none --profile-out "$O/r50.json"
    for b in 8G 4G; do row resnet50 bf16 $b --profile "$O/r50.json"; done
fi
if [ "${TIGHT_PART:-all}" != first ]; then
    row vgg16 fp32 none --profile-out "$O/vgg16-fp32.json"
    row vgg16 fp32 8G --profile "$O/vgg16-fp32.json"
    row resnet152 bf16 none --profile-out "$O/r152.json"
    for b in 10G 8G 6G; do row resnet152 bf16 $b --profile "$O/r152.json"; done
fi
