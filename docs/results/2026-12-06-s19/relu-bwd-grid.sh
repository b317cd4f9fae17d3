#!/bin/bash
# usage: grid.sh VDNN_PLAN — VGG-16 / ResNet-50 b256, analytic H200 profile (the default):
# policy none and auto at budgets; peak (live), hwm, predicted iteration
P=$1
run() { # net math policy budget
  local b=""; [ "$4" != "-" ] && b="--budget $4"
  $P nets/$1.yaml --batch 256 --math $2 --policy $3 $b --format json --quiet 2>/dev/null | python3 -c "
import json,sys
try: d=json.load(sys.stdin)
except Exception: print('$1 $2 $3 $4: no plan'); sys.exit()
print('%-9s %-4s %-4s %-4s peak %11d  hwm %11d  pred %.4f s  offl %d  rc %d' % ('$1','$2','$3','$4', d['peak_bytes'], d['hwm_bytes'], d['predicted_iter_s'], d['offload_bytes'], d['recompute_bytes']))"
}
for m in fp32 bf16; do
  run vgg16 $m none -; run resnet50 $m none -
done
for B in 16G 12G 8G; do run resnet50 fp32 auto $B; done
for B in 8G 6G 4G; do run resnet50 bf16 auto $B; done
for B in 12G 8G; do run vgg16 fp32 auto $B; done
for B in 6G 4G; do run vgg16 bf16 auto $B; done
