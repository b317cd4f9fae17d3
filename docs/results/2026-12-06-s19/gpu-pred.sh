#!/usr/bin/env bash
# Session 19, helper "pred": checks predict-offload-model.md on the device.
# (1) gpu-a.sh's four --step-times points, profiled by the new code (copy
#     rates alone and beside a memory-bound kernel), each profile's rates
#     and the log's copy lines printed; (2) the same four points without
#     --step-times (captured iterations, the default), with those profiles.
# usage (device machine, repository root, after the build): gpu-pred.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s19pred}; mkdir -p "$O"
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
POINTS=("resnet50 bf16 4G" "resnet152 bf16 8G" "vgg16 bf16 6G" "vgg16 fp32 8G")
rates() {   # profile.json: its copy rates, GB/s
    python3 - "$1" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))['device']
g = lambda k: d.get(k, 0) / 1e9
print('  profile GB/s: D2H %.1f alone %.1f busy | H2D %.1f alone %.1f busy | both %.1f alone %.1f busy'
      % (g('d2h_bw'), g('d2h_bw_busy'), g('h2d_bw'), g('h2d_bw_busy'), g('both_bw'), g('both_bw_busy')))
PY
}
echo "== step times, new profiles (at ${SECONDS} s)"
for x in "${POINTS[@]}"; do
    set -- $x
    p="$O/st-$1-$2-$3"
    row "$1" "$2" 256 "$3" 20 --step-times --profile-out "$p.profile.json" --plan-json "$p.plan.json"
    mv "$O/$1-$2-256-$3.log" "$p.log"
    rates "$p.profile.json"
    grep -E '^  (D2H|H2D):' "$p.log"
done
echo "== captured iterations, the same profiles (at ${SECONDS} s)"
for x in "${POINTS[@]}"; do
    set -- $x
    row "$1" "$2" 256 "$3" 20 --profile "$O/st-$1-$2-$3.profile.json"
done
echo "== done at ${SECONDS} s"
