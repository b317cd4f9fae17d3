#!/usr/bin/env python3
"""torch_compare.py — PyTorch side of the vdnn side-by-side benchmark.

Runs on the GPU machine (PyTorch + torchvision there). Trains the same net as
vdnn (torchvision model, synthetic data, SGD momentum 0.9, wd 5e-4) in three
modes: plain, torch.autograd.graph.save_on_cpu(pin_memory=True), and
torch.utils.checkpoint over the model's blocks; fp32 or TF32. Prints one line
per mode and, given vdnn-bench JSON (--vdnn FILE), vdnn's numbers beside
PyTorch's as ratios.

  python3 tools/torch_compare.py --net vgg16 --batch 256 --math fp32 \
      --modes plain,save_on_cpu,checkpoint --vdnn bench.json --json out.json
"""
import argparse
import json
import sys
import time

import torch
import torchvision
from torch.utils.checkpoint import checkpoint_sequential


def build(net):
    m = getattr(torchvision.models, net)(weights=None) if net != "googlenet" else \
        torchvision.models.googlenet(weights=None, aux_logits=False, init_weights=True)
    return m


def segments_of(model):
    """A flat nn.Sequential of the model's top-level blocks, for checkpointing."""
    if hasattr(model, "features") and hasattr(model, "classifier"):  # vgg, alexnet
        return torch.nn.Sequential(*model.features, model.avgpool, torch.nn.Flatten(1),
                                   *model.classifier)
    if hasattr(model, "layer1"):  # resnet
        return torch.nn.Sequential(model.conv1, model.bn1, model.relu, model.maxpool,
                                   *model.layer1, *model.layer2, *model.layer3, *model.layer4,
                                   model.avgpool, torch.nn.Flatten(1), model.fc)
    return None


def run(args, mode):
    torch.manual_seed(0)
    dev = torch.device("cuda")
    torch.backends.cuda.matmul.allow_tf32 = args.math == "tf32"
    torch.backends.cudnn.allow_tf32 = args.math == "tf32"
    torch.backends.cudnn.benchmark = True
    model = build(args.net).to(dev)
    seq = segments_of(model)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
    x = torch.randn(args.batch, 3, 224, 224, device=dev)
    y = torch.randint(0, 1000, (args.batch,), device=dev)
    lossf = torch.nn.CrossEntropyLoss()

    def step():
        opt.zero_grad(set_to_none=True)
        if mode == "plain":
            out = model(x)
        elif mode == "save_on_cpu":
            with torch.autograd.graph.save_on_cpu(pin_memory=True):
                out = model(x)
        elif mode == "checkpoint":
            if seq is None:
                raise SystemExit(f"checkpoint mode: no sequential split for {args.net}")
            out = checkpoint_sequential(seq, args.segments, x, use_reentrant=False)
        else:
            raise SystemExit(f"unknown mode {mode}")
        loss = lossf(out, y)
        loss.backward()
        opt.step()
        return loss

    for _ in range(args.warmup):
        step()
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    t0 = time.perf_counter()
    for _ in range(args.iters):
        step()
    torch.cuda.synchronize()
    dt = (time.perf_counter() - t0) / args.iters
    peak = torch.cuda.max_memory_allocated() / 2**30
    del model, opt, x, y
    torch.cuda.empty_cache()
    return {"framework": "pytorch", "mode": mode, "net": args.net, "batch": args.batch,
            "math": args.math, "iter_s": dt, "images_s": args.batch / dt, "peak_gib": peak}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--net", default="vgg16")
    ap.add_argument("--batch", type=int, default=256)
    ap.add_argument("--math", choices=["fp32", "tf32"], default="fp32")
    ap.add_argument("--modes", default="plain,save_on_cpu,checkpoint")
    ap.add_argument("--iters", type=int, default=5)
    ap.add_argument("--warmup", type=int, default=2)
    ap.add_argument("--segments", type=int, default=4)
    ap.add_argument("--vdnn", help="vdnn-bench --json output to compare against")
    ap.add_argument("--json", help="write results here")
    args = ap.parse_args()
    rows = []
    for mode in args.modes.split(","):
        r = run(args, mode)
        rows.append(r)
        print(f"pytorch {args.net} b{args.batch} {args.math} {mode:12s} "
              f"{r['iter_s']:.3f} s/iter {r['images_s']:8.1f} img/s peak {r['peak_gib']:.2f} GiB",
              flush=True)
    if args.vdnn:
        with open(args.vdnn) as f:
            vd = json.load(f)
        points = vd.get("points", vd)
        print(f"\n{'vdnn budget':>12s} {'policy':>7s} {'s/iter':>8s} {'img/s':>8s} "
              " ".join(f"{'vs ' + r['mode']:>15s}" for r in rows))
        for p in points:
            if not p.get("feasible", True) or not p.get("iter_s"):
                continue
            line = f"{p['budget_bytes'] / 2**30:10.1f}G {p['policy']:>7s} {p['iter_s']:8.3f} " \
                   f"{p['images_s']:8.1f} "
            line += " ".join(f"{r['iter_s'] / p['iter_s']:14.2f}x" for r in rows)
            print(line)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(rows, f, indent=1)


if __name__ == "__main__":
    sys.exit(main())
