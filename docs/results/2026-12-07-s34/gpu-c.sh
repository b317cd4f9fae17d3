#!/usr/bin/env bash
# Session 34, call 3 (the machine of calls 1-2): with k_pool_tile_nchw,
# vdnn fp32 and tf32 beside PyTorch eager in the same precision
# (tools/torch_compare.py runs vdnn-bench first): VGG-16 b256 at 12 GiB
# and none's need (fp32; issue 34's 12 GiB ratio), ResNet-50 b256 at
# none's need. Everything in $O/s34c.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s34/gpu-c.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s34c}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'xz -T0 "$W"/*.json; tar czf "$O/s34c.tgz" -C "$W" .' EXIT
cmp() {   # net budgets timeout
    timeout $3 /opt/torch/.venv/bin/python tools/torch_compare.py --net $1 --batch 256 \
        --vdnn-bin $B/vdnn-bench --vdnn-math fp32,tf32 --modes fp32,tf32 --iters 8 --warmup 3 \
        --vdnn-out "$W/$1-{math}.json" --vdnn-args "--budgets $2 --policies auto --rounds 2" \
        > "$W/$1.txt" 2>&1
    echo "== $1: exit $? ($SECONDS s)"
    grep -vE "^(I|W|V)[0-9]{4} " "$W/$1.txt" | grep -E "^ +[0-9.]+G +auto|plain|eager|speed" | tail -12 | cut -c1-160
}
cmp vgg16 12G,peak 330
cmp resnet50 peak 200
echo "== done at ${SECONDS} s"
