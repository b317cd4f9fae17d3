#!/bin/sh
# loader_run.sh BEFORE AFTER ROUNDS DIR... — the loader.md runs: both trees'
# vdnn-loader-bench in turn on the JPEG folders, with and without
# --augment, 1 and 2 loader threads; then the per-sample CPU time
# (loader_persample, built against each tree's libvdnn.a). Folders:
#   vdnn-loader-bench --make-folder /tmp/s20-j500s --count 128
#   vdnn-loader-bench --make-folder /tmp/s20-j1024s --count 128 --size 1024x768
# (128 images: the four untimed batches of 32 are the first epoch, the timed
# ones later epochs; with --count 512 every timed sample is a file's first)
B=$1 A=$2 R=${3:-6}
shift 3
NET=nets/resnet50.yaml
for round in $(seq "$R"); do
  for dir in "$@"; do
    for flags in "" --augment; do
      for tree in "$B" "$A"; do
        "$tree"/build-cpu/vdnn-loader-bench $NET --data folder:$dir --batch 32 --threads 1,2 \
            --batches 8 $flags | awk -v t="$tree" -v d="$dir" -v f="${flags:-centre}" -v r="$round" \
            '$1 ~ /^[0-9]+$/ { print "bench", r, t, d, f, $1, $2, $5 }'
      done
    done
  done
done
for round in $(seq 2); do
  for dir in "$@"; do
    for flags in "" --augment; do
      for tree in "$B" "$A"; do
        echo "persample $round $tree $dir ${flags:-centre} $("$tree"/persample $NET folder:$dir --passes 8 $flags)"
      done
    done
  done
done
