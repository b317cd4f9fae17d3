#!/bin/bash
# usage: sweepb.sh BUILD CASES OUT (CASES: lines "net math profile|analytic [budgets]", e.g. ../2026-12-07-s34/cases-stuck.sh) -> lines "net math prof budget ms bound ratio secs"
B=$1; C=$2; OUT=$3; cd /work/h3
jobs_file=$(mktemp)
while read -r net math prof rest; do
  [[ -z "$net" || "$net" == \#* ]] && continue
  pa=(); [[ "$prof" != analytic ]] && pa=(--profile $prof)
  if [[ -n "$rest" ]]; then budgets="$rest"; else
    js=$($B/vdnn-plan nets/$net.yaml --batch 256 --math $math "${pa[@]}" --min-budget --format json 2>/dev/null)
    lo=$(echo "$js" | python3 -c 'import json,sys; print(json.load(sys.stdin)["min_budgets"]["auto"])')
    hi=$(echo "$js" | python3 -c 'import json,sys; print(json.load(sys.stdin)["min_budgets"]["none"])')
    budgets=$(python3 -c "print(' '.join(str($lo+($hi-$lo)*i//7) for i in range(1,7)))")
  fi
  for b in $budgets; do echo "$net $math $prof $b" >> $jobs_file; done
done < $C
cat $jobs_file | xargs -P 2 -L 1 bash -c 'net=$0 math=$1 prof=$2 b=$3; pa=(); [[ $prof != analytic ]] && pa=(--profile $prof); s=$(date +%s.%N); out=$('$B'/vdnn-plan nets/$net.yaml --batch 256 --math $math "${pa[@]}" --budget $b --policy auto --quiet 2>/dev/null); e=$(date +%s.%N); ms=$(echo "$out" | grep "predicted iteration" | awk "{print \$3}"); bd=$(echo "$out" | grep "lower bound" | awk "{print \$3}"); printf "%-10s %-5s %-40s %12s %9s %9s %6.3f %5.2f\n" $net $math $(basename $prof) $b "$ms" "$bd" $(echo "${ms:-0} / ${bd:-1}" | bc -l) $(echo "$e - $s" | bc)' > $OUT.unsorted
sort -k1,1 -k2,2 -k3,3 -k4,4n $OUT.unsorted > $OUT; rm $OUT.unsorted $jobs_file
