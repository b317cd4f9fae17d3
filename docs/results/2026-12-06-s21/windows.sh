#!/bin/bash
# windows.sh QUEUE — the window searches of bound-gap.md (tests/plan/window_search,
# its header): auto's plan at each grid point over 5% above the bound against
# the exhaustive best of windows of its dispositions. Run from the repository
# root after the CPU build (release); the ResNet-152 measured profile
# decompressed to /tmp/r152-bf16-profile.json (bound-gap.md). QUEUE 1: VGG-16,
# ResNet-50, GoogLeNet (windows-1.txt); 2: ResNet-152 (windows-2.txt; the
# rest of ResNet-152 in windows-r152.sh).
W=build-cpu/tests/plan/window_search
D=tests/plan/data
run() { echo "== $*"; /usr/bin/time -f "  %U s user" $W "$@" 2>&1; }
if [ "$1" = 1 ]; then
  run nets/vgg16.yaml 256 bf16 analytic 3371894272 8 chain leave 16
  run nets/vgg16.yaml 256 fp32 $D/vgg16-b256-h200-fp32-api.json 8448573952 8 chain leave 16
  run nets/vgg16.yaml 256 fp32 analytic 2627428352 6 leave
  run nets/vgg16.yaml 256 bf16 analytic 1882415104 6 leave
  run nets/vgg16.yaml 256 fp32 $D/vgg16-b256-h200-fp32-api.json 2627430656 6 leave
  run nets/vgg16.yaml 256 bf16 $D/vgg16-b256-h100-bf16.json 1933795328 6 leave
  run nets/resnet50.yaml 256 bf16 analytic 1750494464 6 leave
  run nets/resnet50.yaml 256 fp32 $D/resnet50-b256-h200-fp32-s7.json 3491363328 6 leave
  run nets/googlenet.yaml 256 fp32 analytic 2520252160 6 leave
  run nets/googlenet.yaml 256 bf16 analytic 1287126784 6 leave
else   # windows-2.txt: each window from auto's plan (windows-r152.sh chains them)
  run nets/resnet152.yaml 256 fp32 analytic 12154684672 7 leave 36 118
  run nets/resnet152.yaml 256 bf16 analytic 10513009664 7 leave 36 118
fi
