#!/usr/bin/env python3
"""torch_compare.py — vdnn beside PyTorch on the same GPU, in one run.

Runs on the GPU machine (PyTorch + torchvision there). Optionally runs
vdnn-bench first (--vdnn-bin: same net, batch, math, warm-up and timed
iterations; its JSON is kept with --vdnn-out), or reads a vdnn-bench JSON
(--vdnn FILE). Then trains the same torchvision model with PyTorch on
synthetic data (SGD momentum 0.9, weight decay 5e-4, cudnn.benchmark like
vdnn's tuned algorithms) in these modes:

  plain        autograd keeps every activation on the GPU
  save_on_cpu  torch.autograd.graph.save_on_cpu(pin_memory=True): every saved
               activation goes to pinned host memory (PyTorch's vDNN_all)
  checkpoint   torch.utils.checkpoint over the model's top-level blocks
               (--segments), recomputing activations in backward
  upload       plain, but the batch is copied from pinned host memory every
               iteration (x.to("cuda", non_blocking=True), as a training loop
               over DataLoader(pin_memory=True) does); vdnn uploads its batch
               every iteration too, the other modes keep one batch on the GPU

and prints PyTorch's numbers, then vdnn's points with their speed and memory
as ratios to each PyTorch mode (vdnn / PyTorch: speed > 1 = vdnn faster,
memory < 1 = vdnn smaller), and, per PyTorch mode, vdnn's fastest point that
uses no more device memory.

Memory: "device used" is the process's device memory from the driver
(total - free; CUDA context and library handles included) on both sides;
for PyTorch also the caching allocator's peaks (allocated, reserved).

  # one run: vdnn-bench, then PyTorch, then the side-by-side table
  python3 tools/torch_compare.py --net vgg16 --batch 256 --math fp32 \\
      --vdnn-bin build/vdnn-bench \\
      --vdnn-args "--budgets 8G,10G,12G,16G,peak --policies none,all,conv,dyn" \\
      --vdnn-out bench.json --json compare.json

  # from a vdnn-bench JSON written earlier
  python3 tools/torch_compare.py --vdnn bench.json

  # re-print from saved results (no GPU needed)
  python3 tools/torch_compare.py --vdnn bench.json --torch-json compare.json
"""
import argparse
import json
import os
import shlex
import subprocess
import sys
import tempfile
import time

GiB = float(1 << 30)
MODES = ("plain", "save_on_cpu", "checkpoint", "upload")
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- vdnn side ------------------------------------------------------------------

def run_vdnn_bench(args):
    """Run vdnn-bench with the same net/batch/math; return its JSON."""
    spec = args.vdnn_net or os.path.join(REPO, "nets", args.net + ".yaml")
    if not os.path.exists(spec):
        raise SystemExit(f"torch_compare: no vdnn spec {spec} (give --vdnn-net NET.yaml)")
    out = args.vdnn_out
    tmp = None
    if not out:
        fd, tmp = tempfile.mkstemp(prefix="vdnn-bench-", suffix=".json")
        os.close(fd)
        out = tmp
    cmd = [args.vdnn_bin, spec, "--batch", str(args.batch), "--math", args.math,
           "--warmup", str(args.warmup), "--iters", str(args.iters), "--json", out]
    cmd += shlex.split(args.vdnn_args or "")
    print("torch_compare: running " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr,
          flush=True)
    t0 = time.time()
    rc = subprocess.call(cmd)   # progress on stderr, its table on stdout
    if rc != 0:
        raise SystemExit(f"torch_compare: vdnn-bench failed with exit status {rc}")
    print(f"torch_compare: vdnn-bench took {time.time() - t0:.0f} s", file=sys.stderr)
    with open(out) as f:
        vd = json.load(f)
    if tmp:
        os.unlink(tmp)
    return vd


def vdnn_points(vd):
    """The feasible points with a measured time."""
    pts = vd.get("points", vd) if isinstance(vd, dict) else vd
    return [p for p in pts if p.get("feasible", True) and p.get("iter_s")]


def vdnn_mem(p):
    """A point's device memory: the driver's process usage, else the pool's high-water mark."""
    if p.get("device_used") is not None:
        return p["device_used"], "device"
    if p.get("pool_hwm") is not None:
        return p["pool_hwm"], "pool"
    return p["budget_bytes"], "budget"


# ---- PyTorch side ----------------------------------------------------------------

def build(torchvision, net, classes):
    if net == "googlenet":
        return torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True,
                                            num_classes=classes)
    if not hasattr(torchvision.models, net):
        raise SystemExit(f"torch_compare: torchvision has no model '{net}' (give --net)")
    return getattr(torchvision.models, net)(weights=None, num_classes=classes)


def segments_of(torch, model):
    """A flat nn.Sequential of the model's top-level blocks, for checkpointing."""
    if hasattr(model, "features") and hasattr(model, "classifier"):  # vgg, alexnet
        return torch.nn.Sequential(*model.features, model.avgpool, torch.nn.Flatten(1),
                                   *model.classifier)
    if hasattr(model, "layer1"):  # resnet
        return torch.nn.Sequential(model.conv1, model.bn1, model.relu, model.maxpool,
                                   *model.layer1, *model.layer2, *model.layer3, *model.layer4,
                                   model.avgpool, torch.nn.Flatten(1), model.fc)
    return None


def run_torch(args, mode, shape, classes):
    import torch
    import torchvision
    from torch.utils.checkpoint import checkpoint_sequential

    torch.manual_seed(0)
    dev = torch.device("cuda")
    tf32 = args.math == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = not args.deterministic
    torch.backends.cudnn.deterministic = args.deterministic
    row = {"framework": "pytorch", "mode": mode, "net": args.net, "batch": args.batch,
           "math": args.math, "torch": torch.__version__}
    model = opt = x = y = xh = yh = None
    try:
        model = build(torchvision, args.net, classes).to(dev)
        seq = segments_of(torch, model)
        if mode == "checkpoint" and seq is None:
            row["error"] = f"no sequential split of {args.net} for checkpointing"
            return row
        if mode == "checkpoint":
            # A segment's output must not be changed in place by the next
            # segment (its first in-place ReLU would bump the saved tensor's
            # version and the recomputation refuses it): out-of-place ReLUs.
            for m in model.modules():
                if isinstance(m, torch.nn.ReLU):
                    m.inplace = False
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
        x = torch.randn(args.batch, *shape, device=dev)
        y = torch.randint(0, classes, (args.batch,), device=dev)
        xh = x.cpu().pin_memory() if mode == "upload" else None
        yh = y.cpu().pin_memory() if mode == "upload" else None
        lossf = torch.nn.CrossEntropyLoss()

        def step():
            opt.zero_grad(set_to_none=True)
            if mode == "plain":
                out = model(x)
            elif mode == "upload":
                out = model(xh.to(dev, non_blocking=True))
            elif mode == "save_on_cpu":
                with torch.autograd.graph.save_on_cpu(pin_memory=True):
                    out = model(x)
            elif mode == "checkpoint":
                out = checkpoint_sequential(seq, args.segments, x, use_reentrant=False)
            else:
                raise SystemExit(f"torch_compare: unknown mode {mode}")
            loss = lossf(out, yh.to(dev, non_blocking=True) if mode == "upload" else y)
            loss.backward()
            opt.step()
            return loss

        for _ in range(args.warmup):
            step()
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        used_max = 0
        t0 = time.perf_counter()
        for _ in range(args.iters):
            step()
        torch.cuda.synchronize()
        dt = (time.perf_counter() - t0) / args.iters
        free, total = torch.cuda.mem_get_info()
        used_max = max(used_max, total - free)
        row.update({"iter_s": dt, "images_s": args.batch / dt,
                    "peak_allocated": torch.cuda.max_memory_allocated(),
                    "peak_reserved": torch.cuda.max_memory_reserved(),
                    "device_used": used_max, "device_total": total})
    except torch.cuda.OutOfMemoryError as ex:
        row["error"] = "out of memory: " + str(ex).split("\n")[0][:160]
    finally:
        del model, opt, x, y, xh, yh
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    return row


# ---- report ------------------------------------------------------------------------

def gib(b):
    return "-" if b is None else f"{b / GiB:.2f}G"


def report(args, vd, rows):
    print()
    print(f"PyTorch {args.net}, batch {args.batch}, {args.math}"
          + (f" (torch {rows[0].get('torch')})" if rows and rows[0].get("torch") else ""))
    print(f"  {'mode':12s} {'s/iter':>8s} {'img/s':>9s} {'allocated':>10s} {'reserved':>10s} "
          f"{'device used':>12s}")
    for r in rows:
        if r.get("error"):
            print(f"  {r['mode']:12s} {r['error']}")
            continue
        print(f"  {r['mode']:12s} {r['iter_s']:8.4f} {r['images_s']:9.1f} "
              f"{gib(r.get('peak_allocated')):>10s} {gib(r.get('peak_reserved')):>10s} "
              f"{gib(r.get('device_used')):>12s}")
    ok = [r for r in rows if not r.get("error")]
    ratios = []
    if vd is None:
        return ratios
    pts = vdnn_points(vd)
    print()
    print(f"vdnn {vd.get('net', '?')}, batch {vd.get('batch', '?')}, {vd.get('math', '?')}, "
          f"backend {vd.get('backend', '?')}, profile {vd.get('profile', '?')}: "
          f"ratios vdnn / PyTorch (speed > 1: vdnn faster; memory < 1: vdnn smaller)")
    hdr = f"  {'budget':>8s} {'policy':>7s} {'s/iter':>8s} {'img/s':>9s} {'memory':>8s} {'pred err':>8s}"
    for r in ok:
        hdr += f" | {(r['mode'] + ' speed'):>17s} {'mem':>5s}"
    print(hdr)
    for p in pts:
        mem, kind = vdnn_mem(p)
        err = p.get("error_pct")
        line = (f"  {p['budget_bytes'] / GiB:7.2f}G {p['policy']:>7s} {p['iter_s']:8.4f} "
                f"{p['images_s']:9.1f} {gib(mem):>8s} "
                f"{(f'{err:+.1f}%' if err is not None else '-'):>8s}")
        rat = {"budget_bytes": p["budget_bytes"], "policy": p["policy"],
               "memory_bytes": mem, "memory_kind": kind}
        for r in ok:
            sp = p["images_s"] / r["images_s"]
            mr = mem / r["device_used"] if r.get("device_used") else None
            line += f" | {sp:17.2f} {(f'{mr:5.2f}' if mr is not None else '-'):>5s}"
            rat["speed_vs_" + r["mode"]] = sp
            rat["memory_vs_" + r["mode"]] = mr
        print(line)
        ratios.append(rat)
    infeasible = [p for p in vd.get("points", []) if not p.get("feasible", True)]
    if infeasible:
        print("  does not fit: " + ", ".join(f"{p['budget_bytes'] / GiB:.2f}G {p['policy']}"
                                             for p in infeasible))
    # per PyTorch mode: vdnn's fastest point within the same device memory
    print()
    for r in ok:
        within = [p for p in pts if vdnn_mem(p)[0] <= r["device_used"]]
        if not within:
            print(f"  vs {r['mode']:12s}: no vdnn point uses <= {gib(r['device_used'])}")
            continue
        best = max(within, key=lambda p: p["images_s"])
        print(f"  vs {r['mode']:12s}: within its {gib(r['device_used'])}, vdnn's fastest is "
              f"{best['policy']} at budget {best['budget_bytes'] / GiB:.2f}G: "
              f"{best['images_s']:.1f} vs {r['images_s']:.1f} img/s "
              f"({best['images_s'] / r['images_s']:.2f}x)")
    if pts and vdnn_mem(pts[0])[1] != "device":
        print("  (vdnn memory is the pool's high-water mark: the bench JSON has no driver numbers)")
    return ratios


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--net", help="torchvision model = vdnn nets/NET.yaml (default: the vdnn "
                    "JSON's net, else vgg16)")
    ap.add_argument("--batch", type=int, help="default: the vdnn JSON's, else 256")
    ap.add_argument("--math", choices=["fp32", "tf32"], help="default: the vdnn JSON's, else fp32")
    ap.add_argument("--deterministic", action="store_true",
                    help="cudnn.deterministic, no benchmark (default: as the vdnn JSON)")
    ap.add_argument("--modes", default=",".join(MODES))
    ap.add_argument("--iters", type=int, default=5, help="timed iterations (both sides)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed iterations (both sides)")
    ap.add_argument("--segments", type=int, default=4, help="checkpoint segments")
    src = ap.add_mutually_exclusive_group()
    src.add_argument("--vdnn", metavar="FILE", help="vdnn-bench --json output to compare against")
    src.add_argument("--vdnn-bin", metavar="PATH", help="run this vdnn-bench first")
    ap.add_argument("--vdnn-net", metavar="NET.yaml", help="spec for --vdnn-bin "
                    "(default: nets/NET.yaml of this repository)")
    ap.add_argument("--vdnn-args", default="", metavar="ARGS",
                    help="more vdnn-bench arguments, one string (e.g. \"--budgets 8G,12G,peak "
                    "--policies none,all,conv,dyn\")")
    ap.add_argument("--vdnn-out", metavar="FILE", help="keep vdnn-bench's JSON here")
    ap.add_argument("--torch-json", metavar="FILE",
                    help="take PyTorch's rows from this file (a --json output) instead of running")
    ap.add_argument("--json", metavar="FILE", help="write {pytorch, vdnn, ratios} here")
    args = ap.parse_args()

    vd = None
    if args.vdnn:
        with open(args.vdnn) as f:
            vd = json.load(f)
    if isinstance(vd, dict):
        args.net = args.net or vd.get("net")
        args.batch = args.batch or vd.get("batch")
        args.math = args.math or vd.get("math")
        args.deterministic = args.deterministic or bool(vd.get("deterministic"))
    args.net = args.net or "vgg16"
    args.batch = args.batch or 256
    args.math = args.math or "fp32"
    if args.vdnn_bin:   # first, before this process touches the GPU
        vd = run_vdnn_bench(args)
    inp = (vd or {}).get("input") if isinstance(vd, dict) else None
    shape = (inp["channels"], inp["height"], inp["width"]) if inp else (3, 224, 224)
    classes = inp["classes"] if inp else 1000

    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            raise SystemExit(f"torch_compare: unknown mode '{m}' (expected {', '.join(MODES)})")
    if args.torch_json:
        with open(args.torch_json) as f:
            saved = json.load(f)
        rows = saved["pytorch"] if isinstance(saved, dict) else saved
        rows = [r for r in rows if r.get("mode") in modes]
    else:
        rows = []
        for m in modes:
            r = run_torch(args, m, shape, classes)
            rows.append(r)
            if r.get("error"):
                print(f"pytorch {args.net} b{args.batch} {args.math} {m:12s} {r['error']}",
                      flush=True)
            else:
                print(f"pytorch {args.net} b{args.batch} {args.math} {m:12s} "
                      f"{r['iter_s']:.4f} s/iter {r['images_s']:8.1f} img/s "
                      f"device {r['device_used'] / GiB:.2f} GiB", flush=True)
    ratios = report(args, vd, rows)
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"pytorch": rows, "vdnn": vd, "ratios": ratios}, f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
