#!/bin/bash
# plantime-ident.sh BIN OUTDIR — vdnn-plan --format json (and exit status) at the
# planning-time points (seed-times.sh of session 20) and at the 72 points of
# session 18's grid (its budgets.json), one file per point under OUTDIR: run
# it for two binaries and compare the directories (cmp). From the repository
# root, the ResNet-152 profile decompressed to /tmp (plantime.md).
B=$1; O=$2; mkdir -p $O
run() { name=$1; shift; $B "$@" --quiet --format json > $O/$name.json 2>$O/$name.err; echo "$name rc=$?" >> $O/rc.txt; }
: > $O/rc.txt
while read -r net math prof budget batch; do
  pa=(); [ "$prof" != analytic ] && pa=(--profile "$prof")
  run "seed-$net-$math-$(basename $prof .json)-$budget-b$batch" nets/$net.yaml --batch $batch --math $math "${pa[@]}" --budget $budget
done <<'PTS'
resnet152 bf16 analytic 10513009664 256
resnet152 bf16 analytic 18898108928 256
resnet152 bf16 /tmp/r152-bf16-profile.json 6320538112 256
resnet152 bf16 /tmp/r152-bf16-profile.json 10513068288 256
resnet152 bf16 /tmp/r152-bf16-profile.json 14705598464 256
resnet152 fp32 analytic 12154684672 256
resnet152 fp32 analytic 20540502784 256
resnet152 fp32 analytic 28926320896 256
resnet152 fp32 analytic 37312139008 256
resnet50 fp32 tests/plan/data/resnet50-b256-h200-fp32-s7.json 3491363328 256
vgg16 fp32 analytic 7G 1024
vgg16 fp32 analytic 24G 1024
vgg16 fp32 analytic 44G 1024
PTS
python3 - <<'PY' | while read -r name rest; do run "$name" $rest; done
import json
b = json.load(open("docs/results/2026-12-06-s18/budgets.json"))
for k, v in b.items():
    net, math, prof = k.split(":")
    for x in v:
        pa = "" if prof == "analytic" else f"--profile {prof}"
        print(f"grid-{net}-{math}-{prof.split('/')[-1].replace('.json','')}-{x} nets/{net}.yaml --batch 256 --math {math} {pa} --budget {x}")
PY
