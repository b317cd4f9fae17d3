"""Session 36: pinned copy rates against the host region they cycle through
and what runs beside them. vdnn's profile times copies of 256 MiB to and
from one 256 MiB pinned buffer (cuda_profile.cu, COPY_BYTES); a plan's
copies go to a host store of several GiB, each tensor at its own address.
Prints GB/s per (direction, host region, beside), each the median of 3.
Run: python3 copy_rates.py (PyTorch with CUDA)."""
import statistics
import torch

MiB = 1 << 20
CHUNK = 196 * MiB          # a VGG-16 fp32 b256 chunk map's size (features.14 x4)
dev = torch.device("cuda")
copy_s, comp_s = torch.cuda.Stream(), torch.cuda.Stream()
dbuf = torch.empty(CHUNK, dtype=torch.uint8, device=dev)
big = torch.empty(512 * MiB, dtype=torch.float32, device=dev)       # 2 GiB: streams from DRAM
a = torch.randn(8192, 8192, device=dev)                               # fp32 GEMM beside
torch.backends.cuda.matmul.allow_tf32 = False


def beside(kind, n):
    with torch.cuda.stream(comp_s):
        for _ in range(n):
            if kind == "mem":
                big.mul_(1.0000001)
            elif kind == "gemm":
                torch.mm(a, a)


def rate(host, d2h, kind):
    n = host.numel() // CHUNK
    s, e = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    beside(kind, 400 if kind == "mem" else 20)       # longer than the copies
    with torch.cuda.stream(copy_s):
        s.record()
        for i in range(n):
            h = host[i * CHUNK:(i + 1) * CHUNK]
            if d2h:
                h.copy_(dbuf, non_blocking=True)
            else:
                dbuf.copy_(h, non_blocking=True)
        e.record()
    torch.cuda.synchronize()
    return n * CHUNK / (s.elapsed_time(e) * 1e-3) / 1e9


print(torch.cuda.get_device_name(), torch.__version__)
print(f"{'host region':>12} {'dir':>4} {'alone':>7} {'mem':>7} {'gemm':>7}  GB/s")
for gib in (0.25, 1, 4, 8):
    host = torch.empty(int(gib * 1024) * MiB // CHUNK * CHUNK + CHUNK, dtype=torch.uint8,
                       pin_memory=True)
    for d2h in (True, False):
        row = [statistics.median(rate(host, d2h, k) for _ in range(3))
               for k in ("alone", "mem", "gemm")]
        print(f"{gib:>9} GiB {'D2H' if d2h else 'H2D':>4} " + " ".join(f"{r:7.1f}" for r in row))
    del host
