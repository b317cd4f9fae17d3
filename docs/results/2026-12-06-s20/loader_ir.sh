#!/bin/sh
# loader_ir.sh DIR TREE... — instructions per folder sample on JPEG folder
# DIR (valgrind's callgrind count, independent of the machine's load): the
# count of loader_persample --passes 3 minus --passes 1, over 2 x 32
# samples (not the first sample of a file: the first pass decodes each).
NET=nets/resnet50.yaml
dir=$1
shift
ir() { valgrind --tool=callgrind --callgrind-out-file=/dev/null "$@" 2>&1 |
       awk '/Collected :/ { print $4 }'; }
for flags in "" --augment; do
    for tree in "$@"; do
      a=$(ir "$tree"/persample $NET folder:$dir --n 32 --passes 1 $flags)
      b=$(ir "$tree"/persample $NET folder:$dir --n 32 --passes 3 $flags)
      echo "ir $tree $dir ${flags:-centre} $(( (b - a) / 64 ))"
    done
done
