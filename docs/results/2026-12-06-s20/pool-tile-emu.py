# Replays k_pool_tile8 (src/backend/cuda/cuda_k_pool.cu) thread by thread in
# Python: its index math, grid stride and block sums, against a plain max-pool
# (+ ReLU mask, + per-channel sums) backward. No GPU needed: python3 pool-tile-emu.py
# prints (dx equal, sums equal) per case.
import random, math
def emu(n,c,h,w,k,relu,bias,beta,grid,seed):
    R=random.Random(seed)
    oh,ow=h//k,w//k
    NX=n*h*w*c
    X=[0.0 if R.random()<0.2 else R.uniform(-1,1) for _ in range(NX)]
    DY=[R.uniform(-1,1) for _ in range(n*oh*ow*c)]
    DX0=[R.uniform(-1,1) for _ in range(NX)]
    DX=list(DX0)
    G=c//8; total=n*oh*ow*G; T=256
    part=[[0.0]*grid for _ in range(c)]
    for b in range(grid):
        sums=[[0.0]*8 for _ in range(T)]
        for t in range(T):
            q=b*T+t
            while q<total:
                pix=q//G; c0=(q-pix*G)*8; tt=pix//ow; oww=pix-tt*ow; img=tt//oh; ohh=tt-img*oh
                ib=img*h*w*c+c0; h0=ohh*k; w0=oww*k
                m=[-math.inf]*8; a=[0]*8
                for j in range(k*k):
                    off=ib+((h0+j//k)*w+w0+j%k)*c
                    for kk in range(8):
                        v=X[off+kk]
                        if v>m[kk]: m[kk]=v; a[kk]=j
                d=DY[q*8:q*8+8]
                for j in range(k*k):
                    off=ib+((h0+j//k)*w+w0+j%k)*c
                    acc=DX[off:off+8] if beta else [0.0]*8
                    acc=list(acc)
                    for kk in range(8):
                        if a[kk]==j: acc[kk]+=d[kk]
                        if relu and X[off+kk]<=0: acc[kk]=0.0
                        if bias: sums[t][kk]+=acc[kk]
                    DX[off:off+8]=acc
                q+=grid*T
        if bias:
            for t in range(G):
                for kk in range(8):
                    part[t*8+kk][b]=sum(sums[j][kk] for j in range(t,T,G))
    ref=list(DX0) if beta else [0.0]*NX
    idx=lambda i,r,s,ch:((i*h+r)*w+s)*c+ch
    for i in range(n):
      for p in range(oh):
        for q2 in range(ow):
          for ch in range(c):
            best=None;bj=0
            for j in range(k*k):
                v=X[idx(i,p*k+j//k,q2*k+j%k,ch)]
                if best is None or v>best: best=v;bj=j
            ref[idx(i,p*k+bj//k,q2*k+bj%k,ch)]+=DY[((i*oh+p)*ow+q2)*c+ch]
    if relu: ref=[0.0 if X[i]<=0 else ref[i] for i in range(NX)]
    ok=DX==ref
    bok=True
    if bias:
        for ch in range(c):
            s=sum(ref[i] for i in range(ch,NX,c))
            bok&=abs(sum(part[ch])-s)<1e-9
    return ok,bok
for args in [(2,16,4,6,2,True,True,False,3,1),(1,64,4,4,2,True,True,False,2,2),(2,24,6,6,3,True,False,True,5,3),(1,16,6,6,3,False,False,False,1,4),(3,8,4,4,2,True,True,False,1,5)]:
    print(args, emu(*args))
