# Sourced by gpu-split.sh, gpu-split2.sh and session 16's GPU scripts
# (device machine, repository root): B the build, O the output folder (set before), the libraries, and
# row: one vdnn-train run, its compute-only iteration, prediction, the
# driver-measured process peak and the split (or the error), on one line.
libs=.carry/lib
for d in /opt/torch/.venv/lib/python3.*/site-packages/nvidia/cudnn/lib /usr/local/cuda/lib64; do
    [ -d "$d" ] && libs="$libs:$d"; done
export LD_LIBRARY_PATH=$libs VD_SRCDIR=$PWD
row() {   # net math batch budget iters args...
    local n=$1 m=$2 bs=$3 b=$4 it=$5; shift 5
    local log="$O/$n-$m-$bs-$b.log" pa="--policy none"
    [ "$b" != none ] && pa="--budget $b"
    timeout 300 $B/vdnn-train nets/$n.yaml --batch $bs --math $m --iters $it $pa "$@" > "$log" 2>&1
    printf '%-6s %-5s b%-5s %-5s %s | %s | %s | %s\n' $n $m $bs $b \
        "$(grep -o 'measured [0-9.]* s' "$log" | head -1)" \
        "$(grep -o 'predicted [0-9.]* s' "$log" | head -1)" \
        "$(grep -o 'process peak [0-9.]* [GM]iB' "$log" | head -1)" \
        "$(grep -o 'split layers: [0-9]* layers\? in [0-9]* batch chunks' "$log" | head -1)$(grep -o 'error.*' "$log" | head -c 160)"
}
