#!/usr/bin/env python3
"""torch_layer_bench.py — PyTorch reference timings for vdnn's CUDA backend.

Times torchvision VGG-16 (or another torchvision model) on the GPU:
  * one training iteration (forward, cross-entropy, backward, SGD step with
    momentum and weight decay), cudnn.benchmark on, eager mode;
  * per module (torchvision names, e.g. features.4): forward and backward
    alone, on random inputs of the shapes the model sees.
With --vdnn-profile LOG (the output of tests/cuda/cuda_profile_net), prints
vdnn's option-0 times next to PyTorch's per layer.

usage: torch_layer_bench.py [--model vgg16] [--batch 256] [--math fp32|tf32]
                            [--iters 10] [--no-layers] [--vdnn-profile LOG]
"""
import argparse
import statistics
import sys

import torch
import torch.nn as nn
import torchvision


def timed(fn, reps=5, warm=2):
    ts = []
    for r in range(warm + reps):
        a = torch.cuda.Event(enable_timing=True)
        b = torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        if r >= warm:
            ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def leaves(model):
    out = []
    for name, m in model.named_modules():
        if len(list(m.children())) == 0:
            out.append((name, m))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--model", default="vgg16")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--math", default="fp32", choices=["fp32", "tf32"])
    ap.add_argument("--iters", type=int, default=10)
    ap.add_argument("--no-layers", action="store_true")
    ap.add_argument("--vdnn-profile")
    a = ap.parse_args()
    tf32 = a.math == "tf32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    model = getattr(torchvision.models, a.model)(num_classes=1000).to(dev)
    for m in model.modules():
        if hasattr(m, "inplace"):
            m.inplace = False
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(a.batch, 3, 224, 224, device=dev)
    t = torch.randint(0, 1000, (a.batch,), device=dev)
    lossf = nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=False)
        loss = lossf(model(x), t)
        loss.backward()
        opt.step()

    for _ in range(3):
        step()
    torch.cuda.synchronize()
    ev = [torch.cuda.Event(enable_timing=True) for _ in range(2)]
    ev[0].record()
    for _ in range(a.iters):
        step()
    ev[1].record()
    ev[1].synchronize()
    it = ev[0].elapsed_time(ev[1]) / a.iters / 1e3
    print(f"torch {a.model} b{a.batch} {a.math}: iteration {it:.4f} s/iter "
          f"(eager, cudnn.benchmark)")
    if a.no_layers:
        return

    # shapes each leaf module sees
    shapes = {}
    def keep(n):
        def hook(mod, inp, out):   # returns None: the output stays as it is
            shapes.setdefault(n, tuple(inp[0].shape))
        return hook
    hooks = [m.register_forward_hook(keep(n)) for n, m in leaves(model)]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    rows = []
    for n, m in leaves(model):
        if n not in shapes:
            continue
        xi = torch.randn(shapes[n], device=dev, requires_grad=(n != "features.0"))
        with torch.no_grad():
            ft = timed(lambda: m(xi))
        y = m(xi)
        g = torch.randn_like(y)

        def bwd():
            yy = m(xi)
            torch.cuda.synchronize()
            s0 = torch.cuda.Event(enable_timing=True)
            s1 = torch.cuda.Event(enable_timing=True)
            s0.record()
            yy.backward(g)
            s1.record()
            s1.synchronize()
            return s0.elapsed_time(s1)
        bt = statistics.median([bwd() for _ in range(6)][1:])
        rows.append((n, ft, bt))
        del xi, y, g
    vd = {}
    if a.vdnn_profile:
        try:
            for line in open(a.vdnn_profile):
                f = line.split()
                if len(f) >= 4 and (f[0].startswith("features.") or f[0].startswith("classifier.")
                                    or f[0] in ("avgpool", "flatten", "loss")):
                    try:
                        vd.setdefault(f[0], (f[1], float(f[2]), float(f[3])))
                    except ValueError:
                        pass
        except OSError as ex:
            print(f"cannot read {a.vdnn_profile}: {ex}", file=sys.stderr)
    print(f"\n{'layer':<16}{'torch fwd':>10}{'torch bwd':>10}{'vdnn fwd':>10}{'vdnn bwd':>10}"
          f"  (ms, b{a.batch} {a.math}; vdnn option)")
    st = [0.0] * 4
    for n, ft, bt in rows:
        v = vd.get(n)
        st[0] += ft
        st[1] += bt
        if v:
            st[2] += v[1]
            st[3] += v[2]
            print(f"{n:<16}{ft:10.3f}{bt:10.3f}{v[1]:10.3f}{v[2]:10.3f}  {v[0]}")
        else:
            print(f"{n:<16}{ft:10.3f}{bt:10.3f}{'-':>10}{'-':>10}")
    print(f"{'sum':<16}{st[0]:10.3f}{st[1]:10.3f}{st[2]:10.3f}{st[3]:10.3f}")


if __name__ == "__main__":
    main()
