# launch-profile.py IN.json.xz OUT.json — a saved profile with launch_s added to every op time of half a launch or more (what cuda_profile.cu time_op now does), for vdnn-plan --profile
import lzma, json, sys
src, dst = sys.argv[1], sys.argv[2]
d=json.load(lzma.open(src,'rt'))
L=d['device']['launch_s']
def fix(o):
    for k in ('fwd_s','bwd_s','bwd_alone_s','rc_s'):
        if k in o and o[k] is not None and o[k] >= L/2: o[k] += L
for l in d['layers']:
    for a in l.get('algos',[]): fix(a)
    for c in l.get('chunks',[]): fix(c)
json.dump(d, open(dst,'w'))
