#!/usr/bin/env bash
# Session 35, call C: a split layer's chunks try the option's setup engine
# first (cuda_convgraph_run.cu run_alt; the heuristics' first engine at
# fp32 VGG-16 features.17's half batch ran 4.9x slower per sample), and get
# the workspace their timing used (vd_profile_chunk_ws). (1) The
# GPU tests of chunked convolutions (test_chunked, test_chunk_setup_engine, test_conv_split,
# test_conv_gemm, test_chunked_invariance). (2) fp32 VGG-16 b256's profile,
# session 34's build (old/) and this one, --conv-debug 1 (the runtime
# plans), and each layer's chunk timings per sample against the whole
# batch's. (3) fp32 VGG-16 vdnn-bench with this build, 16 / 12 / 8 / 6 / 5
# / 4 GiB beside none, its profile measured at its start, 2 rounds; bf16
# VGG-16 6 / 4 GiB and ResNet-50 4 GiB (issue 32 part 5). Everything in
# $O/s35c.tgz.
# There: tar xJf .carry/build-h100.txz && bash docs/results/2026-12-07-s35/gpu-c.sh build-h100 $OUT
set -u
B=${1:-build-h100}; O=${2:-/tmp/s35c}; W=$(mktemp -d)
D=$(dirname "$0")
. "$D/../2026-12-05-s15/env.sh"
export VD_BUILDDIR=$PWD/$B CK_FORK=no
trap 'xz -T0 "$W"/*.json "$W"/*.log 2>/dev/null; tar czf "$O/s35c.tgz" -C "$W" .' EXIT
nvidia-smi --query-gpu=name,clocks.max.sm,memory.total --format=csv,noheader
t() {   # binary tags
    CK_INCLUDE_TAGS="$2" timeout 200 $B/tests/cuda/$1 > "$W/$1.log" 2>&1
    echo "== $1 ($2): exit $? ($SECONDS s)"
    grep -E '^[0-9]+%:|:[EF]:' "$W/$1.log" | head -5
}
t cuda_test_cuda_ops "test_chunked test_chunk_setup_engine test_conv_split test_conv_gemm"
t cuda_test_cuda_train test_chunked_invariance
mkdir -p old && tar xJf .carry/build-s34.txz -C old
for v in old new; do
    bin=$B/vdnn-plan; [ $v = old ] && bin=old/build-h100/vdnn-plan
    timeout 150 $bin nets/vgg16.yaml --batch 256 --math fp32 --backend cuda --budget 5G \
        --conv-debug 1 --profile-out "$W/vgg16-fp32-$v-profile.json" > "$W/plan5g-$v.log" 2>&1
    echo "== profile $v: exit $? ($SECONDS s); $(grep -E 'predicted iteration' "$W/plan5g-$v.log")"
done
python3 - "$W" <<'PY'
import json, sys
w = sys.argv[1]
def ratios(v):
    d = json.load(open(f"{w}/vgg16-fp32-{v}-profile.json"))
    out = {}
    for L in d["layers"]:
        a = L["algos"][0]
        ch = L.get("chunks") or a.get("chunks")
        if ch and a["fwd_s"] > 5e-4 and L["name"].startswith("features"):
            out[L["name"]] = [(c["k"], c["fwd_s"] * c["k"] / a["fwd_s"],
                               c["bwd_s"] * c["k"] / max(a["bwd_s"], 1e-9)) for c in ch]
    return out
def chunk_ws(v):
    d = json.load(open(f"{w}/vgg16-fp32-{v}-profile.json"))
    for L in d["layers"]:
        a = L["algos"][0]
        ch = L.get("chunks") or []
        if any("fwd_workspace" in c for c in ch):
            print(f"  {L['name']:12s} ws MiB whole f{a.get('fwd_workspace', 0) / 2**20:.0f} "
                  f"b{a.get('bwd_workspace', 0) / 2**20:.0f}: " + " ".join(
                  f"k{c['k']} f{c['fwd_workspace'] / 2**20:.0f} b{c['bwd_workspace'] / 2**20:.0f}"
                  for c in ch))
o, n = ratios("old"), ratios("new")
print("chunk workspace (new profile):")
chunk_ws("new")
print("chunk time per sample / whole batch's, old -> new (fwd, bwd) at k = 2, 4, 8")
for k in n:
    if k in o:
        print(f"{k:12s} " + "  ".join(f"k{a[0]} f{a[1]:.2f}->{b[1]:.2f} b{a[2]:.2f}->{b[2]:.2f}"
                                      for a, b in zip(o[k], n[k])))
PY
bench() {   # tag net math budgets timeout
    timeout $5 $B/vdnn-bench nets/$2.yaml --batch 256 --math $3 --budgets $4 \
        --policies auto --rounds 2 --profile-out "$W/$1-profile.json" \
        --json "$W/$1.json" > "$W/$1.txt" 2>&1
    echo "== $1: exit $? ($SECONDS s)"
    grep -E '^[0-9.]+ GiB +auto' "$W/$1.txt" | cut -c1-150
}
bench vgg16-fp32 vgg16 fp32 16G,12G,8G,6G,5G,4G,peak 260
bench vgg16 vgg16 bf16 6G,4G,peak 90
bench r50 resnet50 bf16 4G,peak 70
echo "== done at ${SECONDS} s"
