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

try:   # the comparison functions below run without torch (tested on saved logs)
    import torch
    import torch.nn as nn
    import torchvision
except ImportError:
    torch = nn = torchvision = None


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
    if torch is None:
        sys.exit("torch_layer_bench: needs PyTorch and torchvision")
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

    # the input shape of every call of every leaf module, in call order (a
    # module called several times, like ResNet's shared ReLU, is timed per call)
    shapes = {}
    def keep(n):
        def hook(mod, inp, out):   # returns None: the output stays as it is
            shapes.setdefault(n, []).append(tuple(inp[0].shape))
        return hook
    hooks = [m.register_forward_hook(keep(n)) for n, m in leaves(model)]
    with torch.no_grad():
        model(x)
    for h in hooks:
        h.remove()
    first = next(iter(shapes), None)   # the module that reads the data: no input gradient
    rows = []
    for n, m in leaves(model):
        calls = shapes.get(n, [])
        for i, shp in enumerate(calls):
            xi = torch.randn(shp, device=dev, requires_grad=(n != first))
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
            label = n if len(calls) == 1 else f"{n}#{i + 1}"
            rows.append((label, type(m).__name__, ft, bt))
            del xi, y, g
    vd = read_vdnn_profile(a.vdnn_profile) if a.vdnn_profile else {}
    print_tables(rows, vd, a.batch, a.math)


# ---- the comparison (no torch needed: tested on saved logs) ------------------

def read_vdnn_profile(path):
    """Layer -> (option label, fwd ms, bwd ms) of option 0, from the output of
    tests/cuda/cuda_profile_net (its first row per layer)."""
    vd = {}
    try:
        lines = open(path).read().splitlines()
    except OSError as ex:
        print(f"cannot read {path}: {ex}", file=sys.stderr)
        return vd
    for line in lines:
        if not line or line[0].isspace():
            continue   # further options of the layer above
        f = line.split()
        if len(f) < 4 or f[0] in ("layer", "total", "copies:", "driver"):
            continue
        try:
            vd.setdefault(f[0], (f[1], float(f[2]), float(f[3])))
        except ValueError:
            pass
    return vd


def torch_name(vname, torch_names):
    """The torch module a vdnn layer corresponds to: the same name, or the
    name without the digits ending its last part (ResNet's relu1/relu2 are
    calls of the block's one ReLU module)."""
    if vname in torch_names:
        return vname
    head, _, last = vname.rpartition(".")
    base = last.rstrip("0123456789")
    cand = f"{head}.{base}" if head else base
    return cand if base and cand in torch_names else None


def print_tables(rows, vd, batch, math):
    """rows: (label, module class, fwd ms, bwd ms) per torch call; vd: from
    read_vdnn_profile. Per layer where the names match, then per kind."""
    print(f"\n{'layer':<28}{'torch fwd':>10}{'torch bwd':>10}{'vdnn fwd':>10}{'vdnn bwd':>10}"
          f"  (ms, b{batch} {math}; vdnn option)")
    st = [0.0] * 4
    for label, _, ft, bt in rows:
        v = vd.get(label)
        st[0] += ft
        st[1] += bt
        if v:
            st[2] += v[1]
            st[3] += v[2]
            print(f"{label:<28}{ft:10.3f}{bt:10.3f}{v[1]:10.3f}{v[2]:10.3f}  {v[0]}")
        else:
            print(f"{label:<28}{ft:10.3f}{bt:10.3f}{'-':>10}{'-':>10}")
    print(f"{'sum of matched rows':<28}{st[0]:10.3f}{st[1]:10.3f}{st[2]:10.3f}{st[3]:10.3f}")
    if not vd:
        return
    # per kind: torch by module class (every call), vdnn by the class of the
    # module its layer corresponds to; vdnn layers with no module (add, loss,
    # flatten) by their own name
    cls = {}
    for label, c, _, _ in rows:
        cls[label.split("#")[0]] = c
    kinds = {}
    for label, c, ft, bt in rows:
        k = kinds.setdefault(c, [0, 0.0, 0.0, 0, 0.0, 0.0])
        k[0] += 1
        k[1] += ft
        k[2] += bt
    for vname, (_, vf, vb) in vd.items():
        t = torch_name(vname, cls)
        c = cls[t] if t else "(vdnn) " + vname.rpartition(".")[2].rstrip("0123456789")
        k = kinds.setdefault(c, [0, 0.0, 0.0, 0, 0.0, 0.0])
        k[3] += 1
        k[4] += vf
        k[5] += vb
    print(f"\n{'kind':<22}{'torch n':>8}{'fwd':>9}{'bwd':>9}{'vdnn n':>8}{'fwd':>9}{'bwd':>9}  (ms)")
    tot = [0.0] * 4
    for c in sorted(kinds, key=lambda c: -(kinds[c][1] + kinds[c][2] + kinds[c][4] + kinds[c][5])):
        k = kinds[c]
        tot[0] += k[1]; tot[1] += k[2]; tot[2] += k[4]; tot[3] += k[5]
        print(f"{c:<22}{k[0]:8d}{k[1]:9.2f}{k[2]:9.2f}{k[3]:8d}{k[4]:9.2f}{k[5]:9.2f}")
    print(f"{'total':<22}{'':8}{tot[0]:9.2f}{tot[1]:9.2f}{'':8}{tot[2]:9.2f}{tot[3]:9.2f}")


if __name__ == "__main__":
    main()
