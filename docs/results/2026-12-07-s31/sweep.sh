#!/bin/bash
# usage: sweep.sh BUILD OUT  -> lines "net math prof budget ms secs"
B=$1; OUT=$2; cd /work/main
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
done < /tmp/sw/cases.sh
cat $jobs_file | xargs -P 2 -L 1 bash -c 'net=$0 math=$1 prof=$2 b=$3; pa=(); [[ $prof != analytic ]] && pa=(--profile $prof); s=$(date +%s.%N); ms=$('$B'/vdnn-plan nets/$net.yaml --batch 256 --math $math "${pa[@]}" --budget $b --policy auto --quiet 2>/dev/null | grep "predicted iteration" | awk "{print \$3}"); e=$(date +%s.%N); printf "%-10s %-5s %-50s %12s %9s %5.2f\n" $net $math $(basename $prof) $b "$ms" $(echo "$e - $s" | bc)' > $OUT.unsorted
sort -k1,1 -k2,2 -k3,3 -k4,4n $OUT.unsorted > $OUT; rm $OUT.unsorted $jobs_file
