#!/usr/bin/env bash
# Issue 32 item 4 for split plans, one call: the measured profile now times
# each splittable layer on chunks of 2 and 8 (vd_profile_chunk_time), so the
# plans predict a chunk's own speed. VGG-16 b256: bf16 none measures the
# profile (--profile-out), the tight budgets load it; fp32 runs each measure
# their own (a loaded fp32 profile can name other split options than the
# process's tuning kept).
# usage (device machine, after tar xJf .carry/BUILD.txz): [QUICK=1] gpu-chunkprof.sh BUILD OUTDIR
# (QUICK: bf16 only)
set -u
B=${1:-build-h100}; O=${2:-/tmp/chunkprof}; mkdir -p "$O"
. "$(dirname "$0")/../2026-12-05-s15/env.sh"
CK_RUN_CASE=test_chunked_invariance $B/tests/cuda/cuda_test_cuda_train > "$O/train.log" 2>&1
echo "test_chunked_invariance (profiles time chunks too): exit $? ($(tail -1 "$O/train.log"))"
row vgg16 bf16 256 none 20 --profile-out "$O/vgg16-bf16.json"
for b in 4G 2G; do row vgg16 bf16 256 $b 20 --profile "$O/vgg16-bf16.json"; done
[ -z "${QUICK:-}" ] && for b in none 8G; do row vgg16 fp32 256 $b 10; done
python3 - "$O/vgg16-bf16.json" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
for l in p["layers"][:6]:
    a = l["algos"][0]
    print(l["name"], "fwd %.3f ms bwd %.3f ms" % (a["fwd_s"] * 1e3, a["bwd_s"] * 1e3),
          " ".join("k%d fwd %.3f bwd %.3f" % (c["k"], c["fwd_s"] * 1e3, c["bwd_s"] * 1e3)
                   for c in l.get("chunks", [])))
PY
