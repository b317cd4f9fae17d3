#!/bin/bash
# windows-runs.sh — the window chains of windows.sh at GoogLeNet's floors
# from auto's plan with the runs (bound-gap.md). Output: windows-runs.txt.
W=build-cpu/tests/plan/window_search
run() { echo "== $*"; /usr/bin/time -f "  %U s user" $W "$@" 2>&1; }
run nets/googlenet.yaml 256 fp32 analytic 2520252160 6 chain leave 10 30 60 90 120
run nets/googlenet.yaml 256 bf16 analytic 1287126784 6 chain leave 10 30 60 90 120
