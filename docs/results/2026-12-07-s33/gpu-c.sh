#!/usr/bin/env bash
# Session 33, call 3 (the machine of calls 1-2): call 1's ResNet-50 4 GiB
# steps ran 3-5% slower, every kind of op, in the process that measured
# its profile than with that profile loaded. Whether the device's clocks
# or power say why: vdnn-train bf16 b256 4 GiB measuring (then loading)
# its profile, 40 iterations, each one's time (--metrics step_s, --log-every 1),
# beside nvidia-smi's SM clock, power, temperature and throttle reasons
# every 100 ms. Everything in $O/s33c.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s33/gpu-c.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s33c}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B
trap 'tar czf "$O/s33c.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm,power.limit --format=csv,noheader
train() {   # tag profile-args...
    local t=$1; shift
    nvidia-smi --query-gpu=timestamp,clocks.sm,clocks.mem,power.draw,temperature.gpu,clocks_event_reasons.active \
        --format=csv,noheader -lms 100 > "$W/$t-smi.csv" 2>&1 &
    local smi=$!
    timeout 150 $B/vdnn-train nets/resnet50.yaml --batch 256 --math bf16 --budget 4G --iters 40 \
        --data synthetic --log-every 1 --metrics "$W/$t-metrics.jsonl" "$@" > "$W/$t.log" 2>&1
    local rc=$?
    kill $smi
    printf '%-6s exit %s %4ss: %s\n' $t $rc $SECONDS "$(grep -o 'measured [0-9.]* s' "$W/$t.log" | head -1)"
    python3 - "$W/$t-metrics.jsonl" "$W/$t-smi.csv" <<'PY'
import json, sys
steps = [json.loads(l).get("step_s") for l in open(sys.argv[1]) if "step_s" in l]
print("  ms by iteration:", " ".join("%.1f" % (1e3 * s) for s in steps if s))
rows = [l.strip().split(", ") for l in open(sys.argv[2]) if l.count(",") >= 5]
clk = [int(r[1].split()[0]) for r in rows if r[1].split()[0].isdigit()]
pw = [float(r[3].split()[0]) for r in rows if r[3].split()[0].replace(".", "").isdigit()]
tp = [int(r[4]) for r in rows if r[4].isdigit()]
reasons = sorted({r[5] for r in rows})
if clk: print("  SM MHz min/median/max %d/%d/%d; power W max %.0f; temp C %d..%d; reasons %s"
              % (min(clk), sorted(clk)[len(clk)//2], max(clk), max(pw or [0]), min(tp or [0]),
                 max(tp or [0]), " ".join(reasons)))
PY
}
train meas --profile-out "$W/r50.json"
train load --profile "$W/r50.json"
echo "== done at ${SECONDS} s"
