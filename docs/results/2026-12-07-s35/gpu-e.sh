#!/usr/bin/env bash
# Session 35, call E (gpu-c.sh cut to what the device time left allows): a
# split layer's chunks on their option's setup engine, within the
# workspace their timing used. The GPU tests of chunked convolutions, then
# fp32 VGG-16 b256 vdnn-bench 12 / 8 / 5 / 4 GiB beside none, its profile
# measured at its start (with this build: chunk times and workspaces),
# 1 round; the profile's chunk times per sample against the whole batch's
# and its chunk workspaces. Everything in $O/s35e.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s35/gpu-e.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s35e}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B CK_FORK=no
trap 'xz -T0 "$W"/*.json "$W"/*.log 2>/dev/null; tar czf "$O/s35e.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
t() {   # binary tags
    CK_INCLUDE_TAGS="$2" timeout 150 $B/tests/cuda/$1 > "$W/$1.log" 2>&1
    echo "== $1 ($2): exit $? ($SECONDS s)"
    grep -E '^[0-9]+%:|:[EF]:|checked' "$W/$1.log" | head -5
}
t cuda_test_cuda_ops "test_chunk_setup_engine test_chunked"
t cuda_test_cuda_train test_chunked_invariance
timeout 240 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets 12G,8G,5G,4G,peak \
    --policies auto --rounds 1 --profile-out "$W/vgg16-fp32-profile.json" \
    --json "$W/vgg16-fp32.json" > "$W/vgg16-fp32.txt" 2>&1
echo "== vgg16 fp32: exit $? ($SECONDS s)"
grep -E '^[0-9.]+ GiB +auto' "$W/vgg16-fp32.txt" | cut -c1-150
python3 - "$W/vgg16-fp32-profile.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("chunk time per sample / whole (fwd, bwd); chunk workspace MiB (fwd, bwd) of whole")
for L in d["layers"]:
    a = L["algos"][0]
    ch = L.get("chunks") or []
    if not ch or a["fwd_s"] < 5e-4 or not L["name"].startswith("features"):
        continue
    fw, bw = a.get("fwd_workspace", a["workspace"]), a.get("bwd_workspace", a["workspace"])
    print(f"{L['name']:12s} f{fw / 2**20:6.0f} b{bw / 2**20:6.0f} | " + "  ".join(
        f"k{c['k']} {c['fwd_s'] * c['k'] / a['fwd_s']:.2f} {c['bwd_s'] * c['k'] / max(a['bwd_s'], 1e-9):.2f}"
        f" ({c.get('fwd_workspace', -2**20) / 2**20:.0f}, {c.get('bwd_workspace', -2**20) / 2**20:.0f})"
        for c in ch))
PY
echo "== done at ${SECONDS} s"
