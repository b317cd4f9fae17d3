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
channels_last (torch_compare.py's bf16-cl mode). With --compile: the model
and the optimizer's step through torch.compile (inductor; torch_compare.py's
compile- modes), compiled in the warm-up; inductor's fused kernels
(triton_*) are put in the category their name leads with (a fused batch
norm + ReLU is "batch norm").

With --vdnn-plan FILE (the JSON of `vdnn-plan NET --batch B --math M
--policy none --profile P --format json`, P a profile vdnn-bench or
vdnn-train measured on this GPU: --profile-out): vdnn's compute per
category beside PyTorch's, from the plan's steps (each layer's forward and
backward time in the profile, the optimizer's step; a plan that updates in
the backward pass counts each layer's update in its backward), so that
where vdnn spends more than PyTorch shows per layer kind.

usage: torch_kernels.py [--net resnet50] [--batch 256] [--math fp32|tf32|bf16]
                        [--compile] [--vdnn-plan FILE] [--iters 3] [--top 25]
"""
import json
import argparse
import re
import sys
import time

# first match wins; kernel names are lowercased
CATEGORIES = [
    ("batch norm", r"batch_?norm|bn_fw|bn_bw|welford|batchnorm"),
    ("pooling", r"pool"),
    ("loss / softmax", r"softmax|nll_loss|cross_entropy|log_softmax"),
    ("optimizer", r"multi_tensor|foreach|sgd|triton_for_"),
    ("conv / gemm", r"conv|gemm|xmma|winograd|fft|dgrad|wgrad|implicit|cutlass|cudnn|sm90_|sm80_"),
    ("reduction", r"reduce|triton_red_|triton_per_"),
    ("elementwise", r"elementwise|vectorized|unrolled|threshold|relu|add"),
    ("copy / fill", r"memcpy|memset|copy|fill"),
]


def category(name):
    n = name.lower()
    for cat, rx in CATEGORIES:
        if re.search(rx, n):
            return cat
    return "other"


# vdnn's layer kinds (vdnn-plan's JSON: layers[].op) in the categories above
VDNN_CATEGORY = {
    "conv": "conv / gemm", "fc": "conv / gemm", "batchnorm": "batch norm", "pool": "pooling",
    "softmax_cross_entropy": "loss / softmax", "relu": "elementwise", "add": "elementwise",
    "dropout": "elementwise", "gelu": "elementwise", "lrn": "elementwise",
    "concat": "copy / fill", "flatten": "copy / fill",
}


def vdnn_categories(path):
    """ms per category of one iteration of the plan in vdnn-plan's JSON at path."""
    with open(path) as f:
        plan = json.load(f)
    op = {l["name"]: l.get("op") for l in plan["layers"]}
    if None in op.values():
        sys.exit(f"torch_kernels: {path}: no layer kinds (layers[].op): a vdnn-plan older "
                 "than the one that writes them")
    out = {}
    for st in plan["steps"]:
        cat = "optimizer" if st["kind"] == "sgd" else VDNN_CATEGORY.get(op[st["layer"]], "other")
        out[cat] = out.get(cat, 0.0) + (st["compute_s"] + st.get("recompute_s", 0.0)) * 1000.0
    return plan, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--net", default="resnet50")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--math", default="fp32", choices=["fp32", "tf32", "bf16"])
    ap.add_argument("--iters", type=int, default=3)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--compile", action="store_true", help="torch.compile the model and step")
    ap.add_argument("--vdnn-plan", help="vdnn-plan JSON (policy none, measured profile)")
    a = ap.parse_args()
    vd_plan, vd_cat = vdnn_categories(a.vdnn_plan) if a.vdnn_plan else (None, None)
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
    net = torch.compile(model) if a.compile else model
    opt_step = torch.compile(opt.step) if a.compile else opt.step

    def step():
        opt.zero_grad(set_to_none=True)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = lossf(net(x), y)
        loss.backward()
        opt_step()

    t0 = time.perf_counter()
    step()
    torch.cuda.synchronize()
    first = time.perf_counter() - t0
    for _ in range(2):
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
    mode = "compile" if a.compile else "eager"
    print(f"torch {mode} {a.net} b{a.batch} {a.math} (torch {torch.__version__}): iteration "
          f"{it * 1000:.2f} ms (no profiler), GPU kernel time {total:.2f} ms/iteration"
          + (f"; first iteration (compilation) {first:.1f} s" if a.compile else ""))
    if vd_plan is not None:
        vt = sum(vd_cat.values())
        print(f"vdnn {vd_plan.get('net')} b{vd_plan.get('batch')} policy {vd_plan.get('policy')}: "
              f"compute {vt:.2f} ms/iteration in the profile, predicted "
              f"{vd_plan['predicted_iter_s'] * 1000:.2f} ms ({a.vdnn_plan})")
    hdr = f"\n{'category':18s} {'ms/iter':>9s} {'share':>7s}"
    if vd_cat is not None:
        hdr += f" {'vdnn ms':>9s} {'vdnn/torch':>10s}"
    print(hdr)
    cats = set(per_cat) | set(vd_cat or {})
    for c in sorted(cats, key=lambda c: -per_cat.get(c, 0.0)):
        ms = per_cat.get(c, 0.0) / n / 1000.0
        line = f"{c:18s} {ms:9.2f} {100.0 * ms / total:6.1f}%"
        if vd_cat is not None:
            v = vd_cat.get(c, 0.0)
            line += f" {v:9.2f} " + (f"{v / ms:10.2f}" if ms > 0 else f"{'-':>10s}")
        print(line)
    print(f"\ntop {a.top} kernels (ms/iter, calls/iter, category)")
    for name, (us, cnt, c) in sorted(per_kernel.items(), key=lambda kv: -kv[1][0])[:a.top]:
        print(f"{us / n / 1000.0:8.2f} {cnt / n:6.1f}  {c:14s} {name[:110]}")


if __name__ == "__main__":
    main()
