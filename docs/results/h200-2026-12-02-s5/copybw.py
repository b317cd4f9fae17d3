import torch
torch.backends.cuda.matmul.allow_tf32 = False
dev = 'cuda'
N = 3 << 30
x = torch.empty(N, dtype=torch.uint8, device=dev)
y = torch.empty(N, dtype=torch.uint8, device=dev)
h = torch.empty(N, dtype=torch.uint8, pin_memory=True)
h2 = torch.empty(N, dtype=torch.uint8, pin_memory=True)
cs, ds, us = torch.cuda.Stream(), torch.cuda.Stream(), torch.cuda.Stream()
a = torch.randn(8192, 8192, device=dev); b = torch.randn(8192, 8192, device=dev)
big = torch.empty(1 << 30, dtype=torch.float32, device=dev)

def copy_time(direction, load, nbytes=N, chunk=None):
    torch.cuda.synchronize()
    if load == 'matmul':
        with torch.cuda.stream(cs):
            for _ in range(40): torch.mm(a, b)
    elif load == 'hbm':
        with torch.cuda.stream(cs):
            for _ in range(200): big.mul_(1.0000001)
    st = ds if direction == 'd2h' else us
    e0, e1 = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    with torch.cuda.stream(st):
        e0.record(st)
        step = chunk or nbytes
        for o in range(0, nbytes, step):
            n = min(step, nbytes - o)
            if direction == 'd2h': h[o:o + n].copy_(x[o:o + n], non_blocking=True)
            else: y[o:o + n].copy_(h2[o:o + n], non_blocking=True)
        e1.record(st)
    torch.cuda.synchronize()
    return nbytes / (e0.elapsed_time(e1) * 1e-3) / 1e9

def both(load):
    torch.cuda.synchronize()
    if load == 'hbm':
        with torch.cuda.stream(cs):
            for _ in range(200): big.mul_(1.0000001)
    e = [torch.cuda.Event(enable_timing=True) for _ in range(4)]
    with torch.cuda.stream(ds):
        e[0].record(ds); h.copy_(x, non_blocking=True); e[1].record(ds)
    with torch.cuda.stream(us):
        e[2].record(us); y.copy_(h2, non_blocking=True); e[3].record(us)
    torch.cuda.synchronize()
    return N / (e[0].elapsed_time(e[1]) * 1e-3) / 1e9, N / (e[2].elapsed_time(e[3]) * 1e-3) / 1e9

for d in ('d2h', 'h2d'):
    copy_time(d, None)
    for load in (None, 'matmul', 'hbm'):
        r = [copy_time(d, load) for _ in range(3)]
        print(f'{d} 3GiB load={load}: ' + ' '.join(f'{v:.1f}' for v in r) + ' GB/s')
    r = [copy_time(d, None, chunk=256 << 20) for _ in range(2)]
    print(f'{d} 256MiB chunks: ' + ' '.join(f'{v:.1f}' for v in r) + ' GB/s')
    r = [copy_time(d, None, nbytes=256 << 20) for _ in range(3)]
    print(f'{d} single 256MiB: ' + ' '.join(f'{v:.1f}' for v in r) + ' GB/s')
for load in (None, 'hbm'):
    print('both load=%s: d2h %.1f h2d %.1f GB/s' % ((load,) + both(load)))
