#!/bin/bash
# plantime-ab.sh N BIN... — user CPU s of vdnn-plan --policy auto at the two
# slowest points of issue 32 item 3 (ResNet-50 fp32 measured s7 profile at
# 3491363328, ResNet-152 bf16 analytic at 10513009664), N runs of each
# binary alternating; prints the least and every run. From the repository root.
t() { /usr/bin/time -f %U -o /tmp/plantime-ab-t.$$ "$@" --quiet > /dev/null 2>&1; cat /tmp/plantime-ab-t.$$; }
N=$1; shift
for pt in r50 r152; do
  if [ $pt = r50 ]; then a=(nets/resnet50.yaml --batch 256 --math fp32 --profile tests/plan/data/resnet50-b256-h200-fp32-s7.json --budget 3491363328);
  else a=(nets/resnet152.yaml --batch 256 --math bf16 --budget 10513009664); fi
  declare -A best; declare -A all
  for b in "$@"; do best[$b]=99; all[$b]=""; done
  for i in $(seq $N); do for b in "$@"; do x=$(t $b "${a[@]}"); all[$b]="${all[$b]} $x"; best[$b]=$(echo "$x ${best[$b]}" | awk '{print ($1<$2)?$1:$2}'); done; done
  for b in "$@"; do echo "$pt $b least ${best[$b]} all:${all[$b]}"; done
done
rm -f /tmp/plantime-ab-t.$$
