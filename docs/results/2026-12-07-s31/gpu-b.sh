#!/usr/bin/env bash
# Session 31, call 2: fp32 VGG-16 8 GiB ran +11.2% over its prediction in
# call 1 (0.4497 s against 0.4045), its plan priced with the split options'
# own chunk times. vdnn-train with call 1's profile and its step times, and
# the same with the option chunk times removed from the profile (the
# pricing of session 30) for comparison. Everything in $O/s31b.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s31/gpu-b.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s31b}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'xz -T0 "$W"/*.tsv 2>/dev/null; tar czf "$O/s31b.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm --format=csv,noheader
xz -dc "$D/s31a/vgg16-fp32-profile.json.xz" > "$W/p.json"
python3 - "$W/p.json" "$W/p0.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for l in p['layers']:
    for a in l['algos']: a.pop('chunks', None)
json.dump(p, open(sys.argv[2], 'w'))
PY
for v in p p0; do
    timeout 200 $B/vdnn-train nets/vgg16.yaml --batch 256 --math fp32 --budget 8G --iters 12 \
        --profile "$W/$v.json" --data synthetic \
        --step-times-out "$W/vgg16-fp32-8G-$v-steps.tsv" > "$W/vgg16-fp32-8G-$v.log" 2>&1
    echo "== vgg16-fp32-8G $v: exit $? ($SECONDS s)"
    grep -E "^iteration time|steps beside|^  all|^  (D2H|H2D):|error" "$W/vgg16-fp32-8G-$v.log" | cut -c1-170
done
rm -f "$W/p.json" "$W/p0.json"
echo "== done at ${SECONDS} s"
