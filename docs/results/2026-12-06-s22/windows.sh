#!/bin/bash
# windows.sh — chains of window searches (tests/plan/window_search, its
# header) at floors over 5% above the bound (bound-gap.md): is auto's plan
# near a local optimum there? Run from the repository root after the CPU
# build (release); output: windows.txt.
W=build-cpu/tests/plan/window_search
D=tests/plan/data
run() { echo "== $*"; /usr/bin/time -f "  %U s user" $W "$@" 2>&1; }
run nets/resnet152.yaml 256 fp32 analytic 3768866304 5 chain 12 40 80 150 250 350 450
run nets/resnet50.yaml 256 fp32 $D/resnet50-b256-h200-fp32-s7.json 3491363328 5 chain leave 12 40 80 120 160
run nets/googlenet.yaml 256 fp32 analytic 2520252160 6 chain leave 10 30 60 90 120
run nets/vgg16.yaml 256 bf16 $D/vgg16-b256-h100-bf16.json 1933795328 6 chain leave 6 12 20 28 36
