#!/usr/bin/env bash
# Session 36, call G: the GPU tests of session 35's chunk changes (the
# chunk's setup engine, the chunk workspace recorded where the layer is a
# graph-API conv: 3bf5895, never run), then fp32 VGG-16 b256 vdnn-bench
# 16 / 12 / 8 / 5 / 4 GiB beside none with its profile measured at its
# start, 1 round (the split margin's 12 GiB plan, issue 34's 16 / 12 GiB),
# then vdnn-train at 4 GiB with that profile and --step-times-out: where a
# split plan's time goes. First: pinned copy rates against the host
# region's size and what runs beside them (copy_rates.py). Everything in $O/s36g.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s36/gpu-g.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s36g}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B CK_FORK=no
trap 'xz -T0 "$W"/*.json "$W"/*.log "$W"/*.tsv 2>/dev/null; tar czf "$O/s36g.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
t() {   # binary tags
    CK_INCLUDE_TAGS="$2" timeout 150 $B/tests/cuda/$1 > "$W/$1.log" 2>&1
    echo "== $1 ($2): exit $? ($SECONDS s)"
    grep -E '^[0-9]+%:|:[EF]:|checked' "$W/$1.log" | head -5
}
timeout 120 /opt/torch/.venv/bin/python "$D/copy_rates.py" > "$W/copy-rates.txt" 2>&1
echo "== copy rates: exit $? ($SECONDS s)"; cat "$W/copy-rates.txt"
t cuda_test_cuda_ops "test_chunk_setup_engine test_chunked test_profile"
t cuda_test_cuda_train test_chunked_invariance
timeout 300 $B/vdnn-bench nets/vgg16.yaml --batch 256 --math fp32 --budgets 16G,12G,8G,5G,4G,peak \
    --policies auto --rounds 1 --profile-out "$W/vgg16-fp32-profile.json" \
    --json "$W/vgg16-fp32.json" > "$W/vgg16-fp32.txt" 2>&1
echo "== vgg16 fp32: exit $? ($SECONDS s)"
grep -E '^[0-9.]+ GiB +auto' "$W/vgg16-fp32.txt" | cut -c1-150
timeout 120 $B/vdnn-train nets/vgg16.yaml --batch 256 --math fp32 --budget 4G --iters 10 \
    --profile "$W/vgg16-fp32-profile.json" --step-times-out "$W/vgg16-fp32-4G-steps.tsv" \
    > "$W/vgg16-fp32-4G.log" 2>&1
echo "== vgg16 fp32 4G train: exit $? ($SECONDS s)"
grep -E "measured|steps beside|split layers|GB/s" "$W/vgg16-fp32-4G.log" | tail -12 | cut -c1-160
python3 - "$W/vgg16-fp32-profile.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
print("chunk time per sample / whole (fwd, bwd); chunk workspace MiB (fwd, bwd)")
for L in d["layers"]:
    a = L["algos"][0]
    ch = L.get("chunks") or []
    if not ch or a["fwd_s"] < 5e-4 or not L["name"].startswith("features"):
        continue
    print(f"{L['name']:12s} | " + "  ".join(
        f"k{c['k']} {c['fwd_s'] * c['k'] / a['fwd_s']:.2f} {c['bwd_s'] * c['k'] / max(a['bwd_s'], 1e-9):.2f}"
        f" ({c.get('fwd_workspace', -2**20) / 2**20:.0f}, {c.get('bwd_workspace', -2**20) / 2**20:.0f})"
        for c in ch))
PY
echo "== done at ${SECONDS} s"
