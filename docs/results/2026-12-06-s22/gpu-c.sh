#!/usr/bin/env bash
# Session 22's next call (not run: no device time left): the CUDA profile's
# two changes after gpu-a.sh: one launch per op (f7a9705) and split layers'
# backward timed adding to the parameter gradients (cdff685). The profile
# test, then --step-times-out without offload (AlexNet, GoogLeNet,
# ResNet-50: gpu-a's +3.5% / +6.1% / +3.2% should fall to about +1-2%),
# VGG-16 bf16 4 GiB (its split convolutions' backward chunks ran 15-54%
# over), and vdnn-bench beside PyTorch at the tight budgets.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-c.sh BUILD OUTDIR
# (OUTDIR outside $OUT: a call returns at most 8 files; pack it into one)
set -u
B=${1:-build-h100}; O=${2:-/tmp/s22c}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-500}
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
left() { echo $(( DEADLINE - SECONDS )); }
nvidia-smi --query-gpu=name --format=csv,noheader
CK_RUN_CASE=test_profile CK_FORK=no timeout 90 "$B/tests/cuda/cuda_test_cuda_ops" > "$O/t-profile.log" 2>&1
echo "test_profile: exit $?"; grep -E 'Checks|:F:|:E:' "$O/t-profile.log" | tail -2
steps() {   # net math budget
    [ "$(left)" -lt 45 ] && { echo "== steps $1 $2 $3: skipped"; return; }
    timeout 45 $B/vdnn-train nets/$1.yaml --batch 256 --math $2 --budget $3 --iters 12 \
        --step-times-out "$O/$1-$2-$3-steps.tsv" --profile-out "$O/$1-$2-$3-profile.json" \
        > "$O/$1-$2-$3-steps.log" 2>&1
    echo "-- vdnn-train $1 $2 $3 --step-times: exit $? (at $SECONDS s)"
    grep -E '^vdnn-train: plan:|^  all|steps beside' "$O/$1-$2-$3-steps.log" | cut -c1-150
}
steps alexnet bf16 30G
steps googlenet bf16 30G
steps resnet50 bf16 12G
steps resnet50 bf16 4G
steps vgg16 bf16 4G
for n in resnet152:10G,8G,6G vgg16:6G,4G; do
    [ "$(left)" -lt 100 ] && { echo "== bench $n: skipped"; continue; }
    timeout 100 $B/vdnn-bench nets/${n%%:*}.yaml --batch 256 --math bf16 --budgets ${n#*:},peak \
        --policies none,auto --warmup 3 --iters 6 > "$O/${n%%:*}-bench.txt" 2>&1
    echo "-- vdnn-bench $n: exit $? (at $SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/${n%%:*}-bench.txt" | cut -c1-150
done
xz -T0 "$O"/*.json "$O"/*.tsv
echo "== done at ${SECONDS} s"
