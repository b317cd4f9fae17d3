#!/usr/bin/env bash
# Session 37, call C: fp32 VGG-16 b256 at 5 and 4 GiB, auto's plan beside
# auto with features.0 .. features.16 split in 8 chunks (--chunks: the
# split the search does not build, ../2026-12-07-s37-vggbound/README.md),
# the second bench on the first's profile; 1 round each.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s37/gpu-c.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s37c}
. "$(dirname "$0")/../2026-12-05-s15/env.sh"
C=$(python3 -c "print(','.join(f'features.{i}=8' for i in range(17)))")
timeout 170 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets 5G,4G,peak \
    --policies auto --rounds 1 --profile-out "$O/profile.json" > "$O/auto.txt" 2>&1
echo "== auto: exit $? ($SECONDS s)"; grep -E '^[0-9.]+ GiB +auto' "$O/auto.txt" | cut -c1-150
timeout 100 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets 5G,4G \
    --policies auto --rounds 1 --profile "$O/profile.json" --chunks "$C" > "$O/split8.txt" 2>&1
echo "== 0-16 x 8: exit $? ($SECONDS s)"; grep -E '^[0-9.]+ GiB +auto' "$O/split8.txt" | cut -c1-150
xz -T0 "$O/profile.json"
