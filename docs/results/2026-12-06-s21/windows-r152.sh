#!/bin/bash
# windows-r152.sh — bound-gap.md's window searches on ResNet-152 (as
# windows.sh: tests/plan/window_search, run from the repository root after
# the release CPU build; the measured profile decompressed to
# /tmp/r152-bf16-profile.json).
W=build-cpu/tests/plan/window_search
run() { echo "== $*"; /usr/bin/time -f "  %U s user" $W "$@" 2>&1; }
run nets/resnet152.yaml 256 fp32 analytic 12154684672 7 chain leave 118 36
run nets/resnet152.yaml 256 bf16 analytic 10513009664 7 chain leave 118 36
run nets/resnet152.yaml 256 bf16 analytic 6320460032 7 chain leave 118 36
run nets/resnet152.yaml 256 fp32 analytic 3768866304 5 leave
run nets/resnet152.yaml 256 bf16 analytic 2127910400 5 leave
run nets/resnet152.yaml 256 bf16 /tmp/r152-bf16-profile.json 2128007936 5 leave
