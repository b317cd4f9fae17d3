#!/bin/bash
# bound-seed.sh NET MATH PROFILE|analytic BUDGET — auto's plan against auto
# seeded with the bound's cover (bound.md): the maps the copies' bound makes
# absent at its leave step by recomputing them, cheapest per byte first
# until the bytes that must leave are covered, fixed to RECOMPUTE, the rest
# searched. Needs build-cpu built WITH bound-debug.patch applied (it prints
# the cover of step $VD_BOUND_DEBUG on stderr) and /tmp/bound-seed
# (bound-seed.c's header). Run from the repository root; batch 256.

net=$1 math=$2 prof=$3 b=$4
pa=(); [ "$prof" != analytic ] && pa=(--profile $prof)
out=$(build-cpu/vdnn-plan nets/$net.yaml --batch 256 --math $math "${pa[@]}" --budget $b --quiet 2>/dev/null | grep -E "predicted iteration|lower bound")
step=$(echo "$out" | sed -n 's/.*at step \([0-9]*\).*/\1/p')
pred=$(echo "$out" | sed -n 's/.*predicted iteration *\([0-9.]*\) ms.*/\1/p')
bound=$(echo "$out" | sed -n 's/.*lower bound *\([0-9.]*\) ms.*/\1/p')
VD_BOUND_DEBUG=$step build-cpu/vdnn-plan nets/$net.yaml --batch 256 --math $math "${pa[@]}" --budget $b --quiet 2>${TMPDIR:-/tmp}/dbg.$$ >/dev/null
python3 - ${TMPDIR:-/tmp}/dbg.$$ ${TMPDIR:-/tmp}/seed.$$ <<'PY'
import re,sys
need=None; rows=[]
for line in open(sys.argv[1]):
    m=re.match(r's \d+ need ([\d.]+) GiB',line)
    if m and need is None: need=float(m.group(1))
    m=re.match(r'\s+T(\d+)\s+(\d+) prod.*?([\d.]+) MiB cum\s+([\d.]+) GiB.* (\w)$',line)
    if m: rows.append((int(m.group(1)),float(m.group(3)),float(m.group(4)),m.group(5)))
with open(sys.argv[2],'w') as o:
    for t,mb,cum,ch in rows:
        if cum-mb/1024 >= need: break
        if ch=='R': o.write(f"{t} R\n")
PY
seeded=$(timeout 600 /tmp/bound-seed nets/$net.yaml $b $prof ${TMPDIR:-/tmp}/seed.$$ A $math 2>/dev/null | sed -n 's/^fixed: rc \([0-9]*\) feasible \([01]\) \([0-9.]*\) ms.*/\1 \2 \3/p')
echo "$net $math $(basename $prof) $b step $step bound $bound auto $pred seeded(rc feas ms) $seeded fixed $(wc -l < ${TMPDIR:-/tmp}/seed.$$)"
rm -f ${TMPDIR:-/tmp}/dbg.$$ ${TMPDIR:-/tmp}/seed.$$
