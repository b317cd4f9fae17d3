# steps-fit.py TSV.xz... — per --step-times-out file: the error of the whole, and a least-squares fit of each real step's excess (measured - predicted) = a + b x predicted over the steps beside no copy (real: predicted over 3 us)
import lzma, sys
for f in sys.argv[1:]:
    rows=[l.rstrip('\n').split('\t') for l in lzma.open(f,'rt')][1:]
    m=[float(r[2]) for r in rows]; p=[float(r[3]) for r in rows]; bes=[r[6] for r in rows]
    R=[i for i in range(len(m)) if p[i]>0.003 and bes[i]=='no copy']
    N=[i for i in range(len(m)) if p[i]<=0.003]
    ex=[m[i]-p[i] for i in range(len(m))]
    n=len(R); sx=sum(p[i] for i in R); sy=sum(ex[i] for i in R)
    sxx=sum(p[i]**2 for i in R); sxy=sum(p[i]*ex[i] for i in R)
    b=(n*sxy-sx*sy)/(n*sxx-sx*sx); a=(sy-b*sx)/n
    print(f"{f.split('/')[-1]:34} steps {len(m)} real(no copy) {n} total {100*(sum(m)/sum(p)-1):+.2f}%  "
          f"excess/real {1e3*sy/n:.1f} us, noop {1e3*sum(ex[i] for i in N)/max(1,len(N)):.1f} us ({len(N)}); fit a={1e3*a:.1f} us b={100*b:+.2f}%")
