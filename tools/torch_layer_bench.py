#!/usr/bin/env python3
"""torch_layer_bench.py — PyTorch reference timings for vdnn's CUDA backend.

GPU commands (device machine, repository root, the CUDA build unpacked in build-h100;
vdnn-bench is at the build's top, build-h100/vdnn-bench; under 3 min of GPU time for
both nets; OUT an output folder):

  . docs/results/2026-12-05-s15/env.sh     # LD_LIBRARY_PATH: cuDNN of the torch venv
  for n in vgg16 resnet50; do
    build-h100/vdnn-bench nets/$n.yaml --batch 256 --math bf16 --budgets peak \\
        --policies none --warmup 1 --iters 3 --profile-out $OUT/$n-bf16-prof.json \\
        --json $OUT/$n-bench.json > $OUT/$n-bench.txt 2>&1
    /opt/torch/.venv/bin/python tools/torch_layer_bench.py --model $n --batch 256 \\
        --math bf16 --iters 5 --vdnn-profile $OUT/$n-bf16-prof.json \\
        --json $OUT/$n-layers.json > $OUT/$n-layers.txt 2>&1
  done

  # offline (no torch, no GPU): re-print from the saved JSON, or check the parser
  python3 tools/torch_layer_bench.py --from-json $OUT/vgg16-layers.json
  python3 tools/torch_layer_bench.py --self-test

Times torchvision VGG-16 (or another torchvision model) on the GPU:
  * one training iteration (forward, cross-entropy, backward, SGD step with
    momentum and weight decay), cudnn.benchmark on, eager mode (--iters 0:
    none);
  * fp32 / tf32 (without --split): per leaf module (torchvision names, e.g.
    features.4), forward and backward alone, on random inputs of the shapes
    the model sees;
  * bf16 (and fp32 / tf32 with --split): per convolution and linear module,
    the forward, the backward-data (grad wrt the input: dgrad), the
    backward-filter (grad wrt the weight: wgrad) and the bias gradient
    apart, and the backward as autograd runs it (one call with autograd's
    output mask), each alone on random inputs of the shapes the model sees.

--math bf16 is tools/torch_compare.py's bf16-cl mode: the model and the
batch channels_last, torch.autocast(bfloat16) around the forward and the
loss (fp32 weights, SGD in fp32) for the iteration. Per layer the kernels
autocast runs are timed without autocast's casts: the input, the weight and
the bias in bf16 (the weight channels_last), which is what autocast hands
the convolution after its cast copies (those copies, one per weight per
forward, are not in the per-layer numbers).

The split backward is torch.ops.aten.convolution_backward with output mask
[True, False, False] (dgrad), [False, True, False] (wgrad), [False, False,
True] (bias), and autograd's own mask for "bwd": autograd's
ConvolutionBackward0 calls exactly this op with the mask of the gradients
it needs, and for cuDNN it runs cudnn_convolution_backward_input / _weight
per mask entry, so the same cuDNN kernels (cudnn.benchmark's choice per
direction) run as in training. Linear layers: dgrad = mm(dy, W), wgrad =
mm(dy^T, x), bias = dy.sum(0): the GEMMs of addmm's backward (autograd
computes wgrad as x^T dy, the same product transposed).

With --vdnn-profile FILE: vdnn's times per layer beside PyTorch's, matched
by name (nets/*.yaml use torchvision's module names). FILE is a vdnn
profile JSON (vdnn-bench / vdnn-train / vdnn-plan --profile-out; .xz
accepted) or the text output of tests/cuda/cuda_profile_net. From a JSON
each layer's option is the one policy none plans with: the least fwd_s +
bwd_s (src/plan/policy.c, fastest_algo; the first on ties), usually option
0 ("fastest"). A profile times a layer's backward as one pass (dgrad and
wgrad together), so vdnn's side has fwd and bwd only, with the cuDNN
engine ids of its three passes. With vdnn's fusions (the default) a conv
followed by a ReLU runs bias + ReLU in its forward (the ReLU's own forward
is then a no-op: marked "relu fused") and the ReLU's backward reduces the
conv's bias gradient (not in the conv's bwd); PyTorch's conv fwd has the
bias add but no ReLU, its "bwd" has the bias gradient (column bias).

usage: torch_layer_bench.py [--model vgg16] [--batch 256] [--math fp32|tf32|bf16]
                            [--iters 10] [--reps 5] [--split] [--no-layers]
                            [--vdnn-profile FILE] [--json OUT]
       torch_layer_bench.py --from-json OUT [--vdnn-profile FILE]
       torch_layer_bench.py --self-test
"""
import argparse
import json
import lzma
import os
import statistics
import sys

try:   # the comparison functions below run without torch (tested on saved files)
    import torch
    import torch.nn as nn
    import torch.nn.functional as F
    import torchvision
except ImportError:
    torch = nn = F = torchvision = None

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def timed(fn, reps=5, warm=2):
    """Median ms of fn over reps calls after warm untimed ones, each call
    between two CUDA events and synchronized."""
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


def input_shapes(model, x, autocast):
    """The input shape of every call of every leaf module, in call order (a
    module called several times, like ResNet's shared ReLU, has one per call)."""
    shapes = {}

    def keep(n):
        def hook(mod, inp, out):   # returns None: the output stays as it is
            shapes.setdefault(n, []).append(tuple(inp[0].shape))
        return hook
    hooks = [m.register_forward_hook(keep(n)) for n, m in leaves(model)]
    with torch.no_grad(), torch.autocast("cuda", dtype=torch.bfloat16, enabled=autocast):
        model(x)
    for h in hooks:
        h.remove()
    return shapes


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--model", default="vgg16")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--math", default="fp32", choices=["fp32", "tf32", "bf16"])
    ap.add_argument("--iters", type=int, default=10,
                    help="timed training iterations (0: no iteration)")
    ap.add_argument("--reps", type=int, default=5, help="timed calls per layer and pass "
                    "(the median; after 2 untimed)")
    ap.add_argument("--split", action="store_true", help="fp32 / tf32: the per-direction "
                    "conv / linear table of bf16 instead of every leaf's fwd / bwd")
    ap.add_argument("--no-layers", action="store_true")
    ap.add_argument("--vdnn-profile", metavar="FILE")
    ap.add_argument("--json", metavar="OUT", help="write the split table's rows here")
    ap.add_argument("--from-json", metavar="OUT", help="re-print a --json file (no torch)")
    ap.add_argument("--self-test", action="store_true",
                    help="check the profile parser and the table on saved files; no torch")
    a = ap.parse_args(argv)
    if a.self_test:
        return self_test()
    if a.from_json:
        with open(a.from_json) as f:
            saved = json.load(f)
        vd = vdnn_layers(load_profile(a.vdnn_profile)) if a.vdnn_profile else saved.get("vdnn", {})
        print_split(saved["rows"], vd, saved["batch"], saved["math"])
        return 0
    if torch is None:
        sys.exit("torch_layer_bench: needs PyTorch and torchvision")
    bf16 = a.math == "bf16"
    split = bf16 or a.split
    tf32 = a.math == "tf32"
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    dev = torch.device("cuda")
    # bf16: torch_compare.py's bf16-cl (channels_last model and batch, autocast)
    fmt = torch.channels_last if bf16 else torch.contiguous_format
    model = getattr(torchvision.models, a.model)(num_classes=1000).to(dev, memory_format=fmt)
    if not bf16:
        for m in model.modules():
            if hasattr(m, "inplace"):
                m.inplace = False
    model.train()
    opt = torch.optim.SGD(model.parameters(), lr=1e-6, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(a.batch, 3, 224, 224, device=dev).contiguous(memory_format=fmt)
    t = torch.randint(0, 1000, (a.batch,), device=dev)
    lossf = nn.CrossEntropyLoss()
    print(f"torch {torch.__version__}, cuDNN {torch.backends.cudnn.version()}, "
          f"{torch.cuda.get_device_name()}", flush=True)

    def step():
        opt.zero_grad(set_to_none=bf16)
        with torch.autocast("cuda", dtype=torch.bfloat16, enabled=bf16):
            loss = lossf(model(x), t)
        loss.backward()
        opt.step()

    if a.iters > 0:
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
        print(f"torch {a.model} b{a.batch} {a.math}{'-cl autocast' if bf16 else ''}: "
              f"iteration {it:.4f} s/iter (eager, cudnn.benchmark)", flush=True)
    if a.no_layers:
        return 0
    opt.zero_grad(set_to_none=True)
    shapes = input_shapes(model, x, bf16)
    first = next(iter(shapes), None)   # the module that reads the data: no input gradient
    if split:
        del opt
        torch.cuda.empty_cache()
        dtype = torch.bfloat16 if bf16 else torch.float32
        rows = split_rows(model, shapes, first, dtype, fmt, dev, a.reps)
        vd = vdnn_layers(load_profile(a.vdnn_profile)) if a.vdnn_profile else {}
        if a.json:
            with open(a.json, "w") as f:
                json.dump({"model": a.model, "batch": a.batch, "math": a.math,
                           "torch": torch.__version__, "device": torch.cuda.get_device_name(),
                           "rows": rows, "vdnn": vd}, f, indent=1)
        print_split(rows, vd, a.batch, a.math)
        return 0
    rows = []
    for n, m in leaves(model):
        calls = shapes.get(n, [])
        for i, shp in enumerate(calls):
            xi = torch.randn(shp, device=dev, requires_grad=(n != first))
            with torch.no_grad():
                ft = timed(lambda: m(xi), a.reps)
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
            bt = statistics.median([bwd() for _ in range(a.reps + 1)][1:])
            label = n if len(calls) == 1 else f"{n}#{i + 1}"
            rows.append((label, type(m).__name__, ft, bt))
            del xi, y, g
    vd = read_vdnn_profile(a.vdnn_profile) if a.vdnn_profile else {}
    print_tables(rows, vd, a.batch, a.math)
    return 0


def split_rows(model, shapes, first, dtype, fmt, dev, reps):
    """Per conv / linear module: a row dict with ms of fwd, dgrad, wgrad,
    bias and bwd (autograd's mask in one call); dgrad None for the module
    that reads the data (training computes no gradient of the batch), bias
    None without a bias. relu_after: the next leaf module is a ReLU."""
    lv = leaves(model)
    rows = []
    for k, (n, m) in enumerate(lv):
        if not isinstance(m, (nn.Conv2d, nn.Linear)) or n not in shapes:
            continue
        shp = shapes[n][0]
        has_b = m.bias is not None
        need_dx = n != first
        w = m.weight.detach().to(dtype)
        b = m.bias.detach().to(dtype) if has_b else None
        row = {"name": n, "kind": "conv" if isinstance(m, nn.Conv2d) else "linear",
               "relu_after": k + 1 < len(lv) and isinstance(lv[k + 1][1], nn.ReLU)}
        if isinstance(m, nn.Conv2d):
            w = w.contiguous(memory_format=fmt)
            xi = torch.randn(shp, device=dev, dtype=dtype).contiguous(memory_format=fmt)
            conv = lambda: F.conv2d(xi, w, b, m.stride, m.padding, m.dilation, m.groups)
            with torch.no_grad():
                y = conv()
            g = torch.randn_like(y)   # keeps y's layout (channels_last in bf16)
            row["shape"] = (f"{shp[1]}x{shp[2]}x{shp[3]}>{m.out_channels} "
                            f"k{m.kernel_size[0]}s{m.stride[0]}")
            bsz = [m.out_channels] if has_b else None

            def cb(mask):
                # what autograd's ConvolutionBackward0 calls (see the top)
                return lambda: torch.ops.aten.convolution_backward(
                    g, xi, w, bsz, list(m.stride), list(m.padding), list(m.dilation), False,
                    [0, 0], m.groups, mask)
            row["fwd"] = timed(conv, reps)
            row["dgrad"] = timed(cb([True, False, False]), reps) if need_dx else None
            row["wgrad"] = timed(cb([False, True, False]), reps)
            row["bias"] = timed(cb([False, False, True]), reps) if has_b else None
            row["bwd"] = timed(cb([need_dx, True, has_b]), reps)
        else:
            xi = torch.randn(shp, device=dev, dtype=dtype)
            g = torch.randn(shp[0], m.out_features, device=dev, dtype=dtype)
            row["shape"] = f"{shp[1]}>{m.out_features} fc"
            row["fwd"] = timed(lambda: F.linear(xi, w, b), reps)
            row["dgrad"] = timed(lambda: torch.mm(g, w), reps) if need_dx else None
            row["wgrad"] = timed(lambda: torch.mm(g.t(), xi), reps)
            row["bias"] = timed(lambda: g.sum(0), reps) if has_b else None

            def lb():
                if need_dx:
                    torch.mm(g, w)
                torch.mm(g.t(), xi)
                if has_b:
                    g.sum(0)
            row["bwd"] = timed(lb, reps)
        rows.append(row)
        print(f"  {n:<24} {row['shape']:<22} fwd {row['fwd']:.3f} bwd {row['bwd']:.3f} ms",
              file=sys.stderr, flush=True)
        del xi, g
        torch.cuda.empty_cache()
    return rows


# ---- the vdnn side and the comparison (no torch needed: tested on saved files) --

def load_profile(path):
    """A vdnn profile JSON (man vdnn-plan(1), PROFILE FORMAT), plain or .xz."""
    opener = lzma.open if path.endswith(".xz") else open
    with opener(path, "rt") as f:
        prof = json.load(f)
    if prof.get("format") != "vdnn-profile":
        raise SystemExit(f"torch_layer_bench: {path}: not a vdnn profile (format "
                         f"{prof.get('format')!r})")
    return prof


def fastest_option(algos):
    """The option policy none plans with: the least fwd_s + bwd_s, the first
    on ties (src/plan/policy.c, fastest_algo)."""
    best = 0
    for k in range(1, len(algos)):
        if (algos[k]["fwd_s"] + algos[k]["bwd_s"]
                < algos[best]["fwd_s"] + algos[best]["bwd_s"]):
            best = k
    return best


def vdnn_layers(prof):
    """name -> {index, option, label, n_options, fwd, bwd (ms), engines
    [fwd, bwd data, bwd filter], next_fwd (ms of the next layer's forward
    with its option, None for the last)} of a loaded profile."""
    out = {}
    lays = prof["layers"]
    opts = [fastest_option(l["algos"]) for l in lays]
    for i, l in enumerate(lays):
        k = opts[i]
        o = l["algos"][k]
        nxt = lays[i + 1]["algos"][opts[i + 1]]["fwd_s"] * 1e3 if i + 1 < len(lays) else None
        out[l["name"]] = {"index": i, "option": k, "label": o["label"],
                          "n_options": len(l["algos"]), "fwd": o["fwd_s"] * 1e3,
                          "bwd": o["bwd_s"] * 1e3,
                          "engines": [o.get("fwd_algo", -1), o.get("bwd_data_algo", -1),
                                      o.get("bwd_filter_algo", -1)],
                          "next_fwd": nxt}
    return out


def read_vdnn_profile(path):
    """Layer -> (option label, fwd ms, bwd ms): from a profile JSON (the
    option policy none takes), else from the output of
    tests/cuda/cuda_profile_net (option 0: its first row per layer)."""
    vd = {}
    try:
        opener = lzma.open if path.endswith(".xz") else open
        with opener(path, "rt") as f:
            text = f.read()
    except OSError as ex:
        print(f"cannot read {path}: {ex}", file=sys.stderr)
        return vd
    if text.lstrip().startswith("{"):
        return {n: (v["label"], v["fwd"], v["bwd"])
                for n, v in vdnn_layers(load_profile(path)).items()}
    for line in text.splitlines():
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


def relu_fused(row, v):
    """vdnn runs this layer's ReLU in its forward: PyTorch's next module is a
    ReLU and vdnn's next layer's forward is a no-op, timed under 3 us (a
    no-op between two events measures about 1.2 us on an H100; the smallest
    real ReLU of these nets at b256, VGG-16's classifier.1 on 256 x 4096,
    5.6 us)."""
    return bool(row.get("relu_after") and v and v.get("next_fwd") is not None
                and v["next_fwd"] < 0.003)


def split_totals(rows, vd):
    """Per kind (conv, linear, all): [n rows, torch fwd, dgrad, wgrad, bias,
    bwd, n matched, torch fwd, bwd of the matched rows, vdnn fwd, bwd]."""
    tot = {}
    for r in rows:
        v = vd.get(r["name"])
        for key in (r["kind"], "all"):
            t = tot.setdefault(key, [0] + [0.0] * 5 + [0] + [0.0] * 4)
            t[0] += 1
            for j, c in enumerate(("fwd", "dgrad", "wgrad", "bias", "bwd")):
                t[1 + j] += r[c] or 0.0
            if v:
                t[6] += 1
                t[7] += r["fwd"]
                t[8] += r["bwd"]
                t[9] += v["fwd"]
                t[10] += v["bwd"]
    return tot


def ratio(a, b):
    return f"{a / b:6.2f}" if b else f"{'-':>6}"


def print_split(rows, vd, batch, math):
    """The per-layer table, the per-direction totals and the largest gaps."""
    def ms(v):
        return f"{v:8.3f}" if v is not None else f"{'-':>8}"
    print(f"\nms per layer, b{batch} {math}; torch: fwd, dgrad (grad wrt input), wgrad (grad "
          f"wrt weight), bias grad, bwd = autograd's one call (dgrad+wgrad+bias);\nvdnn: the "
          f"profile's fwd and bwd (dgrad+wgrad) of the option policy none takes (least "
          f"fwd+bwd), engines fwd/bwd-data/bwd-filter; x = vdnn / torch (> 1: vdnn slower)")
    print(f"{'layer':<22}{'shape':<22}{'t.fwd':>8}{'t.dgrad':>8}{'t.wgrad':>8}{'t.bias':>8}"
          f"{'t.bwd':>8}{'v.fwd':>8}{'v.bwd':>8}{'x fwd':>7}{'x bwd':>7}  option")
    for r in rows:
        v = vd.get(r["name"])
        line = (f"{r['name']:<22}{r['shape']:<22}{ms(r['fwd'])}{ms(r['dgrad'])}"
                f"{ms(r['wgrad'])}{ms(r['bias'])}{ms(r['bwd'])}")
        if v:
            note = f"{v['option']}:{v['label']}/{v['n_options']} " + "/".join(
                str(e) for e in v["engines"])
            if relu_fused(r, v):
                note += " relu fused"
            line += (f"{ms(v['fwd'])}{ms(v['bwd'])} {ratio(v['fwd'], r['fwd'])} "
                     f"{ratio(v['bwd'], r['bwd'])}  {note}")
        else:
            line += f"{'-':>8}{'-':>8}"
        print(line)
    tot = split_totals(rows, vd)
    print(f"\ntotals (ms){'':<11}{'n':>4}{'t.fwd':>8}{'t.dgrad':>8}{'t.wgrad':>8}{'t.bias':>8}"
          f"{'t.bwd':>8}  | matched{'t.fwd':>8}{'t.bwd':>8}{'v.fwd':>8}{'v.bwd':>8}"
          f"{'x fwd':>7}{'x bwd':>7}")
    for key in [k for k in ("conv", "linear", "all") if k in tot]:
        t = tot[key]
        print(f"{key:<22}{t[0]:4d}{t[1]:8.2f}{t[2]:8.2f}{t[3]:8.2f}{t[4]:8.2f}{t[5]:8.2f}"
              f"  | {t[6]:7d}{t[7]:8.2f}{t[8]:8.2f}{t[9]:8.2f}{t[10]:8.2f}"
              f" {ratio(t[9], t[7])} {ratio(t[10], t[8])}")
    gaps = sorted(((vd[r["name"]]["fwd"] - r["fwd"], vd[r["name"]]["bwd"] - r["bwd"], r["name"])
                   for r in rows if r["name"] in vd), key=lambda g: -(g[0] + g[1]))
    if gaps:
        print("\nlargest gaps, vdnn - torch ms (fwd, bwd, sum):")
        for gf, gb, n in gaps[:10]:
            print(f"  {n:<22}{gf:8.3f}{gb:8.3f}{gf + gb:8.3f}")
    missing = [r["name"] for r in rows if r["name"] not in vd]
    if vd and missing:
        print(f"\nno vdnn layer of that name: {', '.join(missing)}")
    return tot


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


# ---- self-test (no torch, no GPU) ----------------------------------------------------

R50_PROF = "docs/results/2026-12-06-s18/h100-base/resnet50-bf16-prof.json.xz"   # unfused
VGG_PROF = "docs/results/2026-12-06-s19/h100-a/st-vgg16-bf16-6G.profile.json"   # fused


def torchvision_names(model):
    """The conv and linear module names of torchvision's vgg16 / resnet50,
    written out (no torch here) to check that the nets' layer names match."""
    if model == "vgg16":
        return ([f"features.{i}" for i in (0, 2, 5, 7, 10, 12, 14, 17, 19, 21, 24, 26, 28)]
                + [f"classifier.{i}" for i in (0, 3, 6)])
    names = ["conv1"]
    for s, n in enumerate((3, 4, 6, 3), 1):
        for b in range(n):
            names += [f"layer{s}.{b}.conv{c}" for c in (1, 2, 3)]
            if b == 0:
                names.append(f"layer{s}.{b}.downsample.0")
    return names + ["fc"]


def self_test():
    import contextlib
    import io
    import tempfile

    def check(cond, what):
        if not cond:
            raise SystemExit(f"torch_layer_bench self-test: FAILED: {what}")

    # the option policy none takes: least fwd + bwd, the first on ties
    A = lambda f, b: {"fwd_s": f, "bwd_s": b}
    check(fastest_option([A(1, 1), A(0.5, 1.5)]) == 0, "tie: the first")
    check(fastest_option([A(1, 1), A(0.5, 1.4), A(0.5, 1.3)]) == 2, "least sum")
    check(fastest_option([A(1, 1)]) == 0, "one option")

    # a saved measured profile (.xz, ResNet-50 b256 bf16 on an H100, no fusion)
    prof = load_profile(os.path.join(REPO, R50_PROF))
    check(prof["net"] == "resnet50" and prof["batch"] == 256 and prof["math"] == "bf16",
          "resnet50 profile header")
    vd = vdnn_layers(prof)
    check(len(vd) == 175, f"175 layers, got {len(vd)}")
    c1 = vd["conv1"]
    # the file's numbers: fastest 1.8805 / 1.2221 ms, min-ws 3.1011 / 1.4314 ms
    check(c1["option"] == 0 and c1["label"] == "fastest" and c1["n_options"] == 2
          and abs(c1["fwd"] - 1.8805439472198487) < 1e-9
          and abs(c1["bwd"] - 1.2221120595932006) < 1e-9, f"conv1 {c1}")
    check(c1["engines"] == [45, 46, 49], f"conv1 engines {c1['engines']}")
    check(abs(c1["next_fwd"] - 0.4444800019264221) < 1e-9, "conv1's next is bn1")
    # min-ws is faster in sum there (0.09338 + 0.22768 < 0.09488 + 0.22742 ms)
    v = vd["layer3.0.conv2"]
    check(v["option"] == 1 and v["label"] == "min-ws"
          and abs(v["fwd"] - 0.09337600320577622) < 1e-12, f"layer3.0.conv2 {v}")
    check(vd["loss"]["next_fwd"] is None, "the last layer has no next")
    names = torchvision_names("resnet50")
    check(len(names) == 54 and all(n in vd for n in names),
          f"resnet50 names missing: {[n for n in names if n not in vd]}")
    rv = read_vdnn_profile(os.path.join(REPO, R50_PROF))
    check(rv["conv1"] == ("fastest", c1["fwd"], c1["bwd"]) and rv["layer3.0.conv2"][0] == "min-ws",
          "read_vdnn_profile on a JSON")

    # VGG-16 with vdnn's fusions: a conv's ReLU forward is a no-op
    vv = vdnn_layers(load_profile(os.path.join(REPO, VGG_PROF)))
    check(all(n in vv for n in torchvision_names("vgg16")), "vgg16 names")
    row = {"relu_after": True}
    check(relu_fused(row, vv["features.0"]) and relu_fused(row, vv["features.28"]),
          "vgg16 relu fused")
    check(not relu_fused({"relu_after": False}, vv["features.0"]), "no relu after")
    check(not relu_fused(row, c1), "resnet50 conv1 then bn1: not fused")
    check(not relu_fused(row, vv["classifier.0"]), "vgg16 classifier.1 runs (5.6 us)")

    # the table on made-up PyTorch rows beside the ResNet-50 profile
    rows = [{"name": "conv1", "kind": "conv", "shape": "3x224x224>64 k7s2", "relu_after": False,
             "fwd": 1.0, "dgrad": None, "wgrad": 0.5, "bias": None, "bwd": 0.6},
            {"name": "layer3.0.conv2", "kind": "conv", "shape": "256x28x28>256 k3s2",
             "relu_after": False, "fwd": 0.1, "dgrad": 0.1, "wgrad": 0.1, "bias": None,
             "bwd": 0.25},
            {"name": "fc", "kind": "linear", "shape": "2048>1000 fc", "relu_after": False,
             "fwd": 0.05, "dgrad": 0.04, "wgrad": 0.03, "bias": 0.01, "bwd": 0.09},
            {"name": "extra", "kind": "conv", "shape": "1x1x1>1 k1s1", "relu_after": False,
             "fwd": 2.0, "dgrad": 2.0, "wgrad": 2.0, "bias": None, "bwd": 4.0}]
    tot = split_totals(rows, vd)
    t = tot["conv"]
    check(t[0] == 3 and abs(t[1] - 3.1) < 1e-12 and abs(t[2] - 2.1) < 1e-12
          and abs(t[3] - 2.6) < 1e-12 and t[4] == 0.0 and abs(t[5] - 4.85) < 1e-12,
          f"conv totals {t}")
    check(t[6] == 2 and abs(t[7] - 1.1) < 1e-12 and abs(t[8] - 0.85) < 1e-12
          and abs(t[9] - (c1["fwd"] + v["fwd"])) < 1e-12
          and abs(t[10] - (c1["bwd"] + v["bwd"])) < 1e-12, f"conv matched {t}")
    check(tot["all"][0] == 4 and tot["all"][6] == 3 and abs(tot["all"][4] - 0.01) < 1e-12,
          f"all totals {tot['all']}")
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        print_split(rows, vd, 256, "bf16")
    out = buf.getvalue()
    check("0:fastest/2 45/46/49" in out and "1:min-ws/2" in out, "option column")
    check("no vdnn layer of that name: extra" in out, "unmatched row listed")
    gaps = out.split("largest gaps")[1].splitlines()
    check(gaps[1].split()[0] == "conv1", f"largest gap first: {gaps[1]}")

    # --json and --from-json (no torch)
    d = tempfile.mkdtemp(prefix="layer-bench-selftest-")
    try:
        p = os.path.join(d, "rows.json")
        with open(p, "w") as f:
            json.dump({"model": "resnet50", "batch": 256, "math": "bf16", "rows": rows,
                       "vdnn": vd}, f)
        buf = io.StringIO()
        with contextlib.redirect_stdout(buf):
            rc = main(["--from-json", p])
        check(rc == 0 and buf.getvalue() == out, "--from-json re-prints the same table")
    finally:
        for fn in os.listdir(d):
            os.unlink(os.path.join(d, fn))
        os.rmdir(d)
    print("torch_layer_bench self-test: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
