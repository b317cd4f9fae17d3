#!/bin/bash
# seed-times.sh BEFORE AFTER — planning time (user CPU s of the process, the
# least of 3 runs, the two binaries alternating) at the grid's slowest
# points and VGG-16 b1024 fp32 analytic (seed.md). From the repository root,
# the ResNet-152 profile decompressed to /tmp (seed.md).
t() { /usr/bin/time -f %U -o /tmp/seed-t.$$ "$@" --quiet > /dev/null 2>&1; cat /tmp/seed-t.$$; }
while read -r net math prof budget batch; do
    pa=(); [ "$prof" != analytic ] && pa=(--profile "$prof")
    a=(nets/$net.yaml --batch "$batch" --math "$math" "${pa[@]}" --budget "$budget")
    b0=99; b1=99
    for i in 1 2 3; do
        x=$(t "$1" "${a[@]}"); b0=$(echo "$x $b0" | awk '{print ($1 < $2) ? $1 : $2}')
        x=$(t "$2" "${a[@]}"); b1=$(echo "$x $b1" | awk '{print ($1 < $2) ? $1 : $2}')
    done
    echo "$net $math $(basename "$prof") $budget b$batch: $b0 $b1"
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
rm -f /tmp/seed-t.$$
