#!/bin/bash
# measure.sh PLAN PARSEPEAK DIR: per spec, `PLAN SPEC --summary` peak RSS and time, and PARSEPEAK's counted peak
plan=$1; pp=$2; dir=$3
for f in $dir/*.yaml; do
  /usr/bin/time -f "%M %e" -o ${TMPDIR:-/tmp}/measure-time.out timeout 120 $plan $f --summary > ${TMPDIR:-/tmp}/measure-out.txt 2>&1
  rc=$?
  read kb s < <(tail -1 ${TMPDIR:-/tmp}/measure-time.out)
  sz=$(stat -c %s $f)
  cnt=$(timeout 120 $pp $f | grep -o "counted-peak=[0-9.]* MiB")
  printf "| %s | %d | %d | %.1f MiB (%.1fx) | %s | %s | %s |\n" $(basename $f .yaml) $sz $rc $(echo "$kb/1024" | bc -l) $(echo "$kb*1024/$sz" | bc -l) $s "${cnt#counted-peak=}" "$(grep -v '^ *[0-9#]\|^net \|^$' ${TMPDIR:-/tmp}/measure-out.txt | head -1 | sed "s|$dir/||" | cut -c1-110)"
done
