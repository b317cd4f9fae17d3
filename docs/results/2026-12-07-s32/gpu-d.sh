#!/usr/bin/env bash
# Session 32, call 4: ResNet-50 bf16 4 GiB ran 0.0523 s in the vdnn-bench
# that measured its profile (call 2) and 0.0499-0.0501 in those that loaded
# that profile (calls 2-3), whatever the warm-up; ResNet-152 10 GiB 0.1085
# against 0.1048. Which steps: vdnn-train at 4 GiB measuring its profile
# (measured), then with that profile loaded (loaded), 20 iterations each,
# the last iteration's step times (--step-times-out), each conv layer's
# choices and runtime plans on stderr (--conv-debug 1).
# Everything in $O/s32d.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s32/gpu-d.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s32d}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'xz -T0 "$W"/*.json "$W"/*.tsv 2>/dev/null; tar czf "$O/s32d.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
train() {   # tag profile-args...
    local t=$1; shift
    timeout 150 $B/vdnn-train nets/resnet50.yaml --batch 256 --math bf16 --budget 4G --iters 20 \
        --data synthetic --step-times-out "$W/$t-steps.tsv" --conv-debug 1 "$@" > "$W/$t.log" 2>&1
    echo "== $t: exit $? ($SECONDS s)"
    grep -E "^iteration time|steps beside|error" "$W/$t.log" | cut -c1-170
    echo "runtime plans: $(grep -c 'runtime plan' "$W/$t.log"), legacy: $(grep -c 'legacy API' "$W/$t.log")"
}
train measured --profile-out "$W/r50-profile.json"
train loaded --profile "$W/r50-profile.json"
echo "== done at ${SECONDS} s"
