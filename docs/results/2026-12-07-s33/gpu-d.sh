#!/usr/bin/env bash
# Session 33, call 4 (another H100, after refused starts): whether the slowdown of
# the process that measured its profile (call 3: ResNet-50 4 GiB 51.9 ms
# an iteration against 49.8 loaded, clocks at 1980 MHz throughout) is
# state the profiling left on the device: vdnn-train measuring, then
# with a fresh backend made after measuring (VD_PROFILE_FRESH, an
# experiment build), then loading, then a fresh backend on a reset device
# (VD_PROFILE_FRESH_RESET: cudaDeviceReset between the two); vdnn-bench
# ResNet-50 4 GiB and none measuring its profile, as is and fresh. Everything in $O/s33d.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s33/gpu-d.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s33d}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'tar czf "$O/s33d.tgz" -C "$W" .' EXIT
train() {   # tag profile-args...
    local t=$1; shift
    timeout 150 $B/vdnn-train nets/resnet50.yaml --batch 256 --math bf16 --budget 4G --iters 30 \
        --data synthetic "$@" > "$W/$t.log" 2>&1
    printf '%-6s exit %s %4ss: %s\n' $t $? $SECONDS "$(grep -oE '(measured|predicted) [0-9.]* s' "$W/$t.log" | head -2 | paste -sd' ')"
}
train meas --profile-out "$W/r50.json"
VD_PROFILE_FRESH=1 train fresh
train load --profile "$W/r50.json"
VD_PROFILE_FRESH=1 VD_PROFILE_FRESH_RESET=1 train reset
train meas2
bench() {   # tag: vdnn-bench ResNet-50 4 GiB and none, its profile measured at its start
    timeout 120 $B/vdnn-bench nets/resnet50.yaml --batch 256 --math bf16 --budgets 4G,peak \
        --policies auto --rounds 2 > "$W/$1.txt" 2>&1
    echo "== bench $1: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +auto' "$W/$1.txt" | cut -c1-150
}
bench b-meas
VD_PROFILE_FRESH=1 bench b-fresh
echo "== done at ${SECONDS} s"
