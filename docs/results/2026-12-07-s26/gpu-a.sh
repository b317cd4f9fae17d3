#!/usr/bin/env bash
# Session 26, first call: where the ResNets' offload iterations go (issue
# 32 part 4: none is within 0.5% of its prediction, the offload points run
# 4-8.5% over). ResNet-152 bf16 b256 none / 10 GiB / 6 GiB and ResNet-50
# 4 GiB / none with one measured profile per net (--profile-out, then
# --profile), --step-times-out for every step of the last iteration, the
# SM clock and power beside (nvidia-smi every 200 ms); 10 GiB again
# planned with copy rates 5% under the profile's, and with the rates
# beside the memory-bound kernel (before they were lowered to those beside
# the passes, when slower). Then, time left,
# fp32 VGG-16 vdnn-bench 16G,12G,peak (issue 34), its profile kept. Prints
# as it runs.
# usage (device machine, after tar xJf .carry/build-h100.txz): gpu-a.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/s26a}; mkdir -p "$O"
D=$(dirname "$0"); DEADLINE=${DEADLINE:-400}
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
nvidia-smi --query-gpu=name,power.limit --format=csv,noheader
nvidia-smi --query-gpu=timestamp,clocks.sm,power.draw,clocks_throttle_reasons.active --format=csv,noheader -lms 200 > "$O/clock.csv" 2>&1 &
CLK=$!
run() {   # name net budget iters args...
    local n=$1 net=$2 b=$3 it=$4; shift 4
    [ $(( DEADLINE - SECONDS )) -lt 40 ] && { echo "-- $n: skipped"; return; }
    local pa="--policy none"; [ "$b" != none ] && pa="--budget $b"
    echo "$(date +%T) start $n" >> "$O/marks.txt"
    timeout 120 $B/vdnn-train nets/$net.yaml --batch 256 --math bf16 --iters $it $pa "$@" \
        --step-times-out "$O/$n-steps.tsv" > "$O/$n.log" 2>&1
    local rc=$?
    echo "$(date +%T) end $n" >> "$O/marks.txt"
    echo "-- $n: exit $rc ($SECONDS s)"
    grep -E "^iteration time|steps beside|^  all|^  (D2H|H2D):|plan: policy|split layers|profile: a pass|profile: copies" "$O/$n.log" | cut -c1-170
}
run r152-none resnet152 none 30 --conv-debug 1 --profile-out "$O/r152-profile.json"
run r152-10G resnet152 10G 30 --profile "$O/r152-profile.json"
run r152-6G resnet152 6G 30 --profile "$O/r152-profile.json"
# the same profile with every copy rate 5% lower: does a plan with room in its copies run nearer its prediction?
/opt/torch/.venv/bin/python - "$O/r152-profile.json" "$O/r152-profile-slowcopy.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for k in ("d2h_bw", "h2d_bw", "both_bw", "d2h_bw_busy", "h2d_bw_busy", "both_bw_busy"):
    if k in p["device"]: p["device"][k] *= 0.95
json.dump(p, open(sys.argv[2], "w"))
PY
run r152-10G-slowcopy resnet152 10G 30 --profile "$O/r152-profile-slowcopy.json"
# the copy rates as the profile had them before they were lowered to the rates beside the passes
/opt/torch/.venv/bin/python - "$O/r152-none.log" "$O/r152-profile.json" "$O/r152-profile-kernel.json" <<'PY'
import json, re, sys
m = re.search(r"they ran at ([0-9.]+) / ([0-9.]+) GB/s \(([0-9.]+) / ([0-9.]+) beside", open(sys.argv[1]).read())
p = json.load(open(sys.argv[2]))
d = p["device"]
fd = float(m.group(3)) * 1e9 / d["d2h_bw_busy"]; fh = float(m.group(4)) * 1e9 / d["h2d_bw_busy"]
print("kernel-beside rates over the profile's: d2h %.4f h2d %.4f" % (fd, fh))
d["d2h_bw_busy"] *= fd; d["h2d_bw_busy"] *= fh; d["both_bw_busy"] *= 0.5 * (fd + fh)
json.dump(p, open(sys.argv[3], "w"))
PY
run r152-10G-kernel resnet152 10G 30 --profile "$O/r152-profile-kernel.json"
run r50-none resnet50 none 40 --conv-debug 1 --profile-out "$O/r50-profile.json"
run r50-4G resnet50 4G 40 --profile "$O/r50-profile.json"
kill $CLK
if [ $(( DEADLINE - SECONDS )) -gt 120 ]; then   # issue 34: fp32 VGG-16 offload against its none, its profile kept
    timeout $(( DEADLINE - SECONDS )) $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets 16G,12G,peak \
        --policies none,auto --warmup 3 --iters 8 --profile-out "$O/vgg16-fp32-profile.json" \
        --json "$O/vgg16-fp32-bench.json" > "$O/vgg16-fp32-bench.txt" 2>&1
    echo "-- vgg16 fp32 bench: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +(none|auto) +yes' "$O/vgg16-fp32-bench.txt" | cut -c1-150
fi
xz -T0 "$O"/*.tsv "$O"/*.json "$O"/clock.csv
echo "== done at ${SECONDS} s"
