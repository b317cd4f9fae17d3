#!/usr/bin/env bash
# Predictions at offload budgets with and without the compute-beside-copies
# terms: per net one measured profile (b256 bf16, which now records
# compute_slow_d2h / _h2d), then vdnn-train at each budget twice, with that
# profile and with a copy whose two terms are zeroed (the simulator as it
# was), 30 iterations each; the measured compute-only iteration beside each
# prediction. Also the CUDA test binaries (the chunked ops among them).
# usage (device machine, after tar xJf .carry/BUILD.txz): gpu-pred.sh BUILD OUTDIR
set -u
B=${1:-build-h100}; O=${2:-/tmp/pred}; mkdir -p "$O"
libs=.carry/lib
for d in /opt/torch/.venv/lib/python3.*/site-packages/nvidia/cudnn/lib /usr/local/cuda/lib64; do
    [ -d "$d" ] && libs="$libs:$d"; done
export LD_LIBRARY_PATH=$libs VD_SRCDIR=$PWD VD_BUILDDIR=$PWD/$B CK_FORK=no
for t in cuda_test_cuda_ops cuda_test_cuda_train; do
    s=$(date +%s); $B/tests/cuda/$t > "$O/$t.log" 2>&1; rc=$?
    echo "$t rc=$rc $(( $(date +%s) - s )) s $(grep -o '[0-9]*%: Checks.*' "$O/$t.log" | tail -1)"
done
PY=$(ls /opt/torch/.venv/bin/python 2>/dev/null || echo python3)
for cfg in "vgg16 6G 8G" "resnet50 4G 8G"; do
    set -- $cfg; n=$1; shift
    $B/vdnn-plan nets/$n.yaml --backend cuda --batch 256 --math bf16 --policy none \
        --profile-out "$O/$n.json" > /dev/null 2>&1
    $PY - "$O/$n.json" "$O/$n-zero.json" <<'PYEOF'
import json, sys
p = json.load(open(sys.argv[1]))
d = p["device"]
print("  %s: compute_slow_d2h %.4f, compute_slow_h2d %.4f, d2h %.1f GB/s, h2d %.1f GB/s" % (
    sys.argv[1].split("/")[-1], d.get("compute_slow_d2h", 0), d.get("compute_slow_h2d", 0),
    d["d2h_bw"] / 1e9, d["h2d_bw"] / 1e9))
d["compute_slow_d2h"] = d["compute_slow_h2d"] = 0
json.dump(p, open(sys.argv[2], "w"))
PYEOF
    for bud in "$@"; do
        for v in "" -zero; do
            log="$O/$n-$bud$v.log"
            $B/vdnn-train nets/$n.yaml --batch 256 --math bf16 --iters 30 --budget $bud \
                --profile "$O/$n$v.json" > "$log" 2>&1
            m=$(grep -o 'measured [0-9.]* s' "$log" | head -1 | awk '{print $2}')
            pr=$(grep -o 'predicted [0-9.]* s (' "$log" | head -1 | awk '{print $2}')
            printf '%-10s %-4s %-6s measured %s predicted %s %s\n' $n $bud "${v:-new}" "$m" "$pr" \
                "$(grep -o '([^()]*%)' "$log" | tail -1)"
        done
    done
done
