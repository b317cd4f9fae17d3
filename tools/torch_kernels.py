#!/usr/bin/env python3
"""torch_kernels.py — where PyTorch's training iteration spends GPU time.

Runs on the GPU machine (PyTorch + torchvision there). Trains a torchvision
model on synthetic data (eager, cudnn.benchmark, SGD momentum 0.9 and weight
decay 5e-4, like tools/torch_compare.py's plain mode) and records --iters
iterations with torch.profiler (CUDA activity). Prints the iteration time
measured without the profiler, the GPU kernel time per iteration by
category (convolution and matrix products, batch norm, pooling, elementwise,
...), and the kernels that take the most time. Per-module timings
(tools/torch_layer_bench.py) time each module alone, with its launch gaps;
this shows what the whole iteration's kernels add up to, to hold beside
vdnn's per-layer profile (tests/cuda/cuda_profile_net).

With --math bf16: torch.autocast(bfloat16) and the model and input in
channels_last (torch_compare.py's bf16-cl mode).

usage: torch_kernels.py [--net resnet50] [--batch 256] [--math fp32|tf32|bf16]
                        [--iters 3] [--top 25]
"""
import argparse
import re
import sys
import time

# first match wins; kernel names are lowercased
CATEGORIES = [
    ("batch norm", r"batch_?norm|bn_fw|bn_bw|welford|batchnorm"),
    ("pooling", r"pool"),
    ("loss / softmax", r"softmax|nll_loss|cross_entropy|log_softmax"),
    ("optimizer", r"multi_tensor|foreach|sgd"),
    ("conv / gemm", r"conv|gemm|xmma|winograd|fft|dgrad|wgrad|implicit|cutlass|cudnn|sm90_|sm80_"),
    ("reduction", r"reduce"),
    ("elementwise", r"elementwise|vectorized|unrolled|threshold|relu|add"),
    ("copy / fill", r"memcpy|memset|copy|fill"),
]


def category(name):
    n = name.lower()
    for cat, rx in CATEGORIES:
        if re.search(rx, n):
            return cat
    return "other"


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--net", default="resnet50")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--math", default="fp32", choices=["fp32", "tf32", "bf16"])
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--top", type=int, default=25)
    a = ap.parse_args()
    try:
        import torch
        import torchvision
        from torch.profiler import profile, ProfilerActivity
    except ImportError:
        sys.exit("torch_kernels: needs PyTorch and torchvision")
    tf32 = a.math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    torch.manual_seed(0)
    dev = torch.device("cuda")
    model = getattr(torchvision.models, a.net)(weights=None, num_classes=1000).to(dev)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(a.batch, 3, 224, 224, device=dev)
    bf16 = a.math == "bf16"
    if bf16:
        model = model.to(memory_format=torch.channels_last)
        x = x.to(memory_format=torch.channels_last)
    y = torch.randint(0, 1000, (a.batch,), device=dev)
    lossf = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = lossf(model(x), y)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(a.iters):
        step()
    torch.cuda.synchronize()
    it = (time.perf_counter() - t0) / a.iters
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(a.iters):
            step()
        torch.cuda.synchronize()
    per_cat, per_kernel = {}, {}
    for ev in prof.events():
        if ev.device_type != torch.autograd.DeviceType.CUDA:
            continue
        us = ev.device_time if hasattr(ev, "device_time") else ev.cuda_time
        c = category(ev.name)
        per_cat[c] = per_cat.get(c, 0.0) + us
        k = per_kernel.setdefault(ev.name, [0.0, 0, c])
        k[0] += us
        k[1] += 1
    n = a.iters
    total = sum(per_cat.values()) / n / 1000.0
    print(f"torch {a.net} b{a.batch} {a.math} (torch {torch.__version__}): iteration {it * 1000:.2f} ms "
          f"(no profiler), GPU kernel time {total:.2f} ms/iteration")
    print(f"\n{'category':18s} {'ms/iter':>9s} {'share':>7s}")
    for c, us in sorted(per_cat.items(), key=lambda kv: -kv[1]):
        print(f"{c:18s} {us / n / 1000.0:9.2f} {100.0 * us / n / 1000.0 / total:6.1f}%")
    print(f"\ntop {a.top} kernels (ms/iter, calls/iter, category)")
    for name, (us, cnt, c) in sorted(per_kernel.items(), key=lambda kv: -kv[1][0])[:a.top]:
        print(f"{us / n / 1000.0:8.2f} {cnt / n:6.1f}  {c:14s} {name[:110]}")


if __name__ == "__main__":
    main()
