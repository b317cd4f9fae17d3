#!/usr/bin/env bash
# The issue 31 GPU check: the tests, the none/all invariance and a short
# benchmark of this tree (tools/gpu-check), then the same runs of this tree
# and of the session's start (65891ae's build, packed as .carry/base.txz)
# side by side on one warm card: VGG-16 and ResNet-50, b256 bf16, no offload
# and a tight budget, one measured profile shared by both builds.
# usage (device machine): [A2_PART=check|speed] docs/results/2026-12-05-s14/gpu-a2.sh OUTDIR
set -u
O=${1:-/tmp/a2}; mkdir -p "$O"
tar xJf .carry/build-cuda.txz && mkdir -p base && tar xJf .carry/base.txz -C base
if [ "${A2_PART:-all}" != speed ]; then
    OUT=$O/check GPU_CHECK_POLICIES="none all" tools/gpu-check build-cuda nets/vgg16.yaml 64 10 \
        > "$O/check.txt" 2>&1; echo "gpu-check exit $?" >> "$O/check.txt"
    tail -15 "$O/check.txt"
    [ "${A2_PART:-all}" = check ] && exit 0
fi
libs=.carry/lib
for d in /opt/torch/.venv/lib/python3.*/site-packages/nvidia/cudnn/lib /usr/local/cuda/lib64; do
    [ -d "$d" ] && libs="$libs:$d"; done
export LD_LIBRARY_PATH=$libs
run() {   # tag build net budget-args...
    local tag=$1 b=$2 net=$3; shift 3
    local prof=$O/prof-$(basename $net .yaml).json
    local pa="--profile-out $prof"
    [ -f "$prof" ] && pa="--profile $prof"
    $b/vdnn-train nets/$net --batch 256 --math bf16 --iters 40 $pa "$@" > "$O/$tag.log" 2>&1
    printf '%-28s %s\n' "$tag" "$(grep -o 'measured [0-9.]* s' "$O/$tag.log" | head -1)"
}
for net in vgg16.yaml resnet50.yaml; do
    n=$(basename $net .yaml)
    for rep in 1 2; do
        run "$n-none-new-$rep" build-cuda $net --policy none
        run "$n-none-base-$rep" base/build-cuda $net --policy none
    done
    bud=6G; [ $n = resnet50 ] && bud=4G
    run "$n-$bud-new" build-cuda $net --budget $bud
    run "$n-$bud-base" base/build-cuda $net --budget $bud
done
