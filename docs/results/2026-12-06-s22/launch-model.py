# launch-model.py — the step files' error as predicted, and with one launch_s added per real step (M1) or per step (M2), from the repository's docs/results/2026-12-06-s22
import lzma, json, sys
runs=[('h100-a/alexnet-bf16-30G-steps.tsv.xz','h100-a/alexnet-bf16-profile.json.xz'),
('h100-a/googlenet-bf16-30G-steps.tsv.xz','h100-a/googlenet-bf16-profile.json.xz'),
('h100-a/resnet50-bf16-12G-steps.tsv.xz','h100-a/resnet50-bf16-profile.json.xz'),
('h100-a/resnet50-bf16-4G-steps.tsv.xz','h100-a/resnet50-bf16-profile.json.xz'),
('h100-a/vgg16-bf16-4G-steps.tsv.xz','h100-a/vgg16-bf16-profile.json.xz'),
('h100-a/vgg16-tf32-40G-steps.tsv.xz','h100-a/vgg16-tf32-profile.json.xz'),
('h100-c/googlenet-nofuse-steps.tsv.xz','h100-c/googlenet-nofuse-profile.json.xz'),
('h100-c/resnet50-nofuse-steps.tsv.xz','h100-c/resnet50-nofuse-profile.json.xz')]
for t,pf in runs:
    rows=[l.rstrip('\n').split('\t') for l in lzma.open(t,'rt')][1:]
    L=json.load(lzma.open(pf,'rt'))['device']['launch_s']*1e3
    m=sum(float(r[2]) for r in rows); p=sum(float(r[3]) for r in rows)
    nreal=sum(1 for r in rows if float(r[3])>0.003); n=len(rows)
    nc=sum(1 for r in rows if r[6]=='no copy')
    print(f"{t.split('/')[-1][:-7]:28} launch {L*1e3:.2f}us  M0 {100*(m/p-1):+.2f}%  M1 {100*(m/(p+nreal*L)-1):+.2f}%  M2 {100*(m/(p+n*L)-1):+.2f}%  (steps {n}, real {nreal})")
