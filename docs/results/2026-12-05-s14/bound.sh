#!/usr/bin/env bash
# bound.sh — the rows of bound.md: for VGG-16, ResNet-50 and GoogLeNet b256 (or BOUND_NETS)
# on the analytic H200 profile (fp32 and bf16), five budgets evenly from auto's
# smallest to none's (vdnn-plan --min-budget), auto's plan: the compute-only
# lower bound, the bound with the copies, auto's prediction and the gap
# (prediction / bound - 1). usage: bound.sh BUILD_DIR (run from the top).
set -eu
B=${1:?usage: bound.sh BUILD_DIR}
echo "| net | math | budget (bytes) | GiB | compute-only bound ms | bound ms | auto ms | gap % |"
echo "|---|---|---:|---:|---:|---:|---:|---:|"
for net in ${BOUND_NETS:-vgg16 resnet50 googlenet}; do
    for math in fp32 bf16; do
        mins=$("$B/vdnn-plan" "nets/$net.yaml" --batch 256 --math "$math" --min-budget --quiet |
               awk '$1 == "none" || $1 == "auto" { gsub(/[(]/, "", $4); print $1, $4 }')
        lo=$(awk '$1 == "auto" { print $2 }' <<<"$mins")
        hi=$(awk '$1 == "none" { print $2 }' <<<"$mins")
        for k in 0 1 2 3 4; do
            b=$(( (lo + (hi - lo) * k / 4 + 255) / 256 * 256 ))
            out=$("$B/vdnn-plan" "nets/$net.yaml" --batch 256 --math "$math" --budget "$b" --quiet)
            pred=$(sed -n 's/^  predicted iteration  \([0-9.]*\) ms.*/\1/p' <<<"$out")
            bound=$(sed -n 's/^  lower bound  *\([0-9.]*\) ms (compute \([0-9.]*\) ms.*/\1 \2/p' <<<"$out")
            awk -v n="$net" -v m="$math" -v b="$b" -v p="$pred" -v bd="$bound" 'BEGIN {
                split(bd, x, " ");
                printf "| %s | %s | %.0f | %.2f | %.1f | %.1f | %.1f | %.1f |\n",
                       n, m, b, b / 2^30, x[2], x[1], p, 100 * (p / x[1] - 1) }'
        done
    done
done
