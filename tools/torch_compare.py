#!/usr/bin/env python3
"""torch_compare.py — vdnn beside PyTorch on the same GPU, in one run.

Runs on the GPU machine (PyTorch + torchvision there). Optionally runs
vdnn-bench first (--vdnn-bin: same net, batch, math, warm-up and timed
iterations, once per --vdnn-math; its JSON is kept with --vdnn-out), or
reads vdnn-bench JSONs (--vdnn FILE, repeatable). Then trains the same
torchvision model with PyTorch on synthetic data (SGD momentum 0.9, weight
decay 5e-4, cudnn.benchmark like vdnn's tuned algorithms) in each mode of
--modes. A mode is [compile-]PRECISION[-cl][-STRATEGY]:

  compile-     torch.compile (inductor, its default mode) of the model, and of
               the optimizer's step (PyTorch's "compiled optimizer": one fused
               kernel over the parameters); the compilation runs in the warm-up
               iterations (at least 2 are run), outside the timing, and its
               seconds are in the JSON (compile_s: the first iteration's time)

  PRECISION    fp32 | tf32 (allow_tf32 for convolutions and matmuls) |
               bf16 (torch.autocast("cuda", dtype=torch.bfloat16) around the
               forward pass and the loss; fp32 weights, SGD in fp32) |
               fp16 (the same with dtype=torch.float16, plus dynamic loss
               scaling by torch.amp.GradScaler at its defaults: the scaled
               loss's backward, scaler.step(opt), scaler.update(); vdnn's
               --math fp16 follows GradScaler's rule)
  -cl          channels_last: the model and the batch in NHWC
  STRATEGY     (none)  plain: autograd keeps every activation on the GPU
               -soc    torch.autograd.graph.save_on_cpu(pin_memory=True):
                       every saved activation goes to pinned host memory
                       (PyTorch's vDNN_all)
               -ckpt   torch.utils.checkpoint.checkpoint_sequential over the
                       model's blocks (--segments, default 4; --ckpt-units),
                       recomputing activations in backward
               -upload plain, but the batch is copied from pinned host memory
                       every iteration (x.to("cuda", non_blocking=True), as a
                       loop over DataLoader(pin_memory=True) does); vdnn
                       uploads its batch every iteration too, the other modes
                       keep one batch on the GPU

e.g. fp32, tf32, bf16, bf16-cl, bf16-cl-ckpt, bf16-cl-soc, fp16-cl, tf32-upload,
compile-bf16-cl, compile-fp32.
The older names plain, save_on_cpu, checkpoint and upload are the strategy
at --math's precision without channels_last (the default --modes is those
four). --math (fp32 | tf32 | bf16 | fp16) is vdnn's math and the precision of the
old names; when not given it is the vdnn JSON's, else the one precision
that all explicit modes share, else fp32.

Checkpointing (-ckpt) splits a flat list of units into --segments segments
the way checkpoint_sequential does (equal numbers of units; the last segment
is not checkpointed). VGG and AlexNet: every module of features and
classifier, avgpool and flatten (40 units for VGG-16: 4 segments of 10).
ResNet with --ckpt-units blocks (the default): the stem (conv1, bn1, relu,
maxpool), each bottleneck, the head (avgpool, flatten, fc): 18 units for
ResNet-50, so 4 segments are stem+layer1 | layer2 | layer3.0-3 | the rest.
--ckpt-units modules splits every top-level module instead (23 units for
ResNet-50, the split of the runs before the bf16 modes).

Timing: every iteration is CUDA-synchronized and timed on its own; s/iter
is the median of the --iters timed iterations after --warmup untimed ones
(the mean and the fastest are in the JSON/CSV). vdnn-bench reports the mean
of its timed iterations (each synchronized too).

Memory: "device used" is the process's device memory from the driver
(torch.cuda.mem_get_info: total - free; CUDA context and library handles
included), the largest of the samples after the warm-up and after every
timed iteration; for PyTorch also the caching allocator's peaks over the
timed iterations (max_memory_allocated, max_memory_reserved). vdnn-bench
samples the same driver number.

The report prints PyTorch's numbers, then for each vdnn run its points with
their speed and memory as ratios to each PyTorch mode of the same precision
(vdnn / PyTorch: speed > 1 = vdnn faster, memory < 1 = vdnn smaller), per
PyTorch mode vdnn's fastest point that uses no more device memory, and the
headline ratios (images/s vdnn / PyTorch):
  no offload   vdnn's policy none at its smallest budget (none's peak) vs
               the plain and -upload modes of the same precision
  checkpoint   vdnn's other points at budgets below that (e.g. auto at 8G)
               vs the -ckpt modes
  save_on_cpu  the same vdnn points vs the -soc modes

  # bf16: vdnn-bench --math bf16 (no offload, 8 GiB), then PyTorch's bf16 modes
  python3 tools/torch_compare.py --net vgg16 --batch 256 --math bf16 \\
      --modes bf16,bf16-cl,bf16-cl-ckpt,bf16-cl-soc \\
      --vdnn-bin build/vdnn-bench --vdnn-args "--budgets 8G,peak --policies none,auto" \\
      --vdnn-out bench-bf16.json --json compare.json --csv compare.csv

  # fp16 (e.g. a GPU without bf16 tensor cores): the same with GradScaler
  python3 tools/torch_compare.py --net vgg16 --batch 256 --math fp16 \\
      --modes fp16,fp16-cl,fp16-cl-ckpt,fp16-cl-soc \\
      --vdnn-bin build/vdnn-bench --vdnn-args "--budgets 8G,peak --policies none,auto" \\
      --vdnn-out bench-fp16.json --json compare.json --csv compare.csv

  # one run: vdnn-bench, then PyTorch, then the side-by-side table
  python3 tools/torch_compare.py --net vgg16 --batch 256 --math fp32 \\
      --vdnn-bin build/vdnn-bench \\
      --vdnn-args "--budgets 8G,10G,12G,16G,peak --policies none,all,conv,dyn" \\
      --vdnn-out bench.json --json compare.json

  # from a vdnn-bench JSON written earlier
  python3 tools/torch_compare.py --vdnn bench.json

  # re-print from saved results (no GPU needed; the vdnn runs saved in
  # compare.json are used when no --vdnn is given)
  python3 tools/torch_compare.py --vdnn bench.json --torch-json compare.json

  # check the parsing and the report on made-up numbers (no torch needed)
  python3 tools/torch_compare.py --self-test
"""
import argparse
import csv
import json
import os
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import traceback

GiB = float(1 << 30)
MODES = ("plain", "save_on_cpu", "checkpoint", "upload")   # the old names: --math's precision
MATHS = ("fp32", "tf32", "bf16", "fp16")
AUTOCAST = {"bf16": "bfloat16", "fp16": "float16"}   # the autocast dtype of a precision
STRATEGIES = {"ckpt": "checkpoint", "checkpoint": "checkpoint", "soc": "save_on_cpu",
              "save_on_cpu": "save_on_cpu", "upload": "upload"}
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


# ---- modes -----------------------------------------------------------------------

def parse_mode(name, math):
    """A mode name -> {mode, precision, channels_last, strategy}; None if not one."""
    if name in MODES:
        return {"mode": name, "precision": math, "channels_last": False, "strategy": name,
                "compile": False}
    parts = name.split("-")
    compiled = parts[0] == "compile"
    if compiled:
        parts = parts[1:]
    if not parts or parts[0] not in MATHS:
        return None
    info = {"mode": name, "precision": parts[0], "channels_last": False, "strategy": "plain",
            "compile": compiled}
    rest = parts[1:]
    if rest and rest[0] == "cl":
        info["channels_last"] = True
        rest = rest[1:]
    if len(rest) == 1 and rest[0] in STRATEGIES:
        info["strategy"] = STRATEGIES[rest[0]]
    elif rest:
        return None
    if compiled and info["strategy"] not in ("plain", "upload"):
        return None   # inductor beside checkpointing / save_on_cpu hooks: not compared
    return info


def parse_modes(text, math):
    out = []
    for m in (m.strip() for m in text.split(",")):
        if not m:
            continue
        info = parse_mode(m, math)
        if info is None:
            raise SystemExit(f"torch_compare: unknown mode '{m}' (expected "
                             f"[compile-]PRECISION[-cl][-STRATEGY]; compile- only plain or -upload"
                             f" with PRECISION {'|'.join(MATHS)}, STRATEGY ckpt|soc|upload, "
                             f"or one of {', '.join(MODES)})")
        if any(o["mode"] == m for o in out):
            raise SystemExit(f"torch_compare: mode '{m}' given twice")
        out.append(info)
    if not out:
        raise SystemExit("torch_compare: --modes is empty")
    return out


def explicit_precisions(text):
    """The precisions that the modes of --modes name themselves (not the old names)."""
    precs = set()
    for m in text.split(","):
        m = m.strip()
        info = parse_mode(m, "fp32") if m and m not in MODES else None
        if info is not None:
            precs.add(info["precision"])
    return precs


def row_info(r):
    """A PyTorch row's precision, layout and strategy (also for rows of older JSONs)."""
    if r.get("strategy"):
        return r.get("precision") or r.get("math"), bool(r.get("channels_last")), r["strategy"]
    info = parse_mode(r.get("mode", ""), r.get("math") or "fp32")
    if info is None:
        return r.get("math"), False, r.get("mode")
    return info["precision"], info["channels_last"], info["strategy"]


def ckpt_bounds(n, segments):
    """checkpoint_sequential's split of n units: [(first, last, checkpointed)]."""
    segments = max(1, min(segments, n))
    size = n // segments
    out = []
    end = -1
    for start in range(0, size * (segments - 1), size):
        end = start + size - 1
        out.append((start, end, True))
    out.append((end + 1, n - 1, False))
    return out


# ---- vdnn side ------------------------------------------------------------------

def vdnn_out_path(args, math, n_maths):
    """Where vdnn-bench writes its JSON for this math (None: a temporary file)."""
    out = args.vdnn_out
    if not out:
        return None
    if "{math}" in out:
        return out.replace("{math}", math)
    if n_maths > 1:
        root, ext = os.path.splitext(out)
        return f"{root}-{math}{ext or '.json'}"
    return out


def run_vdnn_bench(args, math, n_maths):
    """Run vdnn-bench with the same net/batch and this math; its JSON, or None if it failed."""
    spec = args.vdnn_net or os.path.join(REPO, "nets", args.net + ".yaml")
    if not os.path.exists(spec):
        raise SystemExit(f"torch_compare: no vdnn spec {spec} (give --vdnn-net NET.yaml)")
    out = vdnn_out_path(args, math, n_maths)
    tmp = None
    if not out:
        fd, tmp = tempfile.mkstemp(prefix="vdnn-bench-", suffix=".json")
        os.close(fd)
        out = tmp
    cmd = [args.vdnn_bin, spec, "--batch", str(args.batch), "--math", math,
           "--warmup", str(args.warmup), "--iters", str(args.iters), "--json", out]
    # "{math}" in the extra arguments is this run's math (e.g. --profile-out prof-{math}.json)
    extra = [a.replace("{math}", math) for a in shlex.split(args.vdnn_args or "")]
    if args.deterministic and "--deterministic" not in extra:
        cmd.append("--deterministic")
    cmd += extra
    print("torch_compare: running " + " ".join(shlex.quote(c) for c in cmd), file=sys.stderr,
          flush=True)
    t0 = time.time()
    rc = subprocess.call(cmd)   # progress on stderr, its table on stdout
    sys.stdout.flush()
    if rc != 0:
        # the PyTorch side still runs (a device call is precious); main's exit status says it
        print(f"torch_compare: vdnn-bench --math {math} failed with exit status {rc}; "
              f"going on without it", file=sys.stderr, flush=True)
        if tmp:
            os.unlink(tmp)
        return None
    print(f"torch_compare: vdnn-bench --math {math} took {time.time() - t0:.0f} s",
          file=sys.stderr)
    with open(out) as f:
        vd = json.load(f)
    if tmp:
        os.unlink(tmp)
    if vd.get("math") != math:
        print(f"torch_compare: vdnn-bench was run with --math {math} but its JSON says math "
              f"{vd.get('math')!r}; taking {math}", file=sys.stderr)
    vd["math_requested"] = math
    return vd


def vd_math(vd, default):
    return vd.get("math_requested") or vd.get("math") or default


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


def units_of(torch, model, how):
    """[(name, module)]: the flat list of units that checkpointing splits; None if none."""
    nn = torch.nn
    if hasattr(model, "features") and hasattr(model, "classifier"):  # vgg, alexnet
        return ([(f"features.{i}", m) for i, m in enumerate(model.features)]
                + [("avgpool", model.avgpool), ("flatten", nn.Flatten(1))]
                + [(f"classifier.{i}", m) for i, m in enumerate(model.classifier)])
    if hasattr(model, "layer1"):  # resnet
        blocks = [(f"{ln}.{i}", b) for ln in ("layer1", "layer2", "layer3", "layer4")
                  for i, b in enumerate(getattr(model, ln))]
        if how == "modules":
            return ([("conv1", model.conv1), ("bn1", model.bn1), ("relu", model.relu),
                     ("maxpool", model.maxpool)] + blocks
                    + [("avgpool", model.avgpool), ("flatten", nn.Flatten(1)), ("fc", model.fc)])
        return ([("stem", nn.Sequential(model.conv1, model.bn1, model.relu, model.maxpool))]
                + blocks
                + [("head", nn.Sequential(model.avgpool, nn.Flatten(1), model.fc))])
    return None


def describe_segments(names, segments):
    return [f"{names[a]}..{names[b]}" + ("" if ck else " (not checkpointed)")
            for a, b, ck in ckpt_bounds(len(names), segments)]


def run_torch(args, info, shape, classes):
    import torch
    import torchvision
    from torch.utils.checkpoint import checkpoint_sequential

    mode, prec, cl, strat = (info["mode"], info["precision"], info["channels_last"],
                             info["strategy"])
    compiled = info.get("compile", False)
    cuda = args.device == "cuda"
    torch.manual_seed(0)
    dev = torch.device(args.device)
    tf32 = prec == "tf32"
    torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = not args.deterministic
    torch.backends.cudnn.deterministic = args.deterministic
    fmt = torch.channels_last if cl else torch.contiguous_format
    row = {"framework": "pytorch", "mode": mode, "net": args.net, "batch": args.batch,
           "math": prec, "precision": prec, "channels_last": cl, "strategy": strat,
           "autocast": AUTOCAST.get(prec), "compile": compiled, "torch": torch.__version__,
           "device": torch.cuda.get_device_name() if cuda else args.device}
    sync = torch.cuda.synchronize if cuda else (lambda: None)

    def used():
        if not cuda:
            return None
        free, total = torch.cuda.mem_get_info()
        return total - free

    model = opt = x = y = xh = yh = seq = scaler = net = opt_step = None
    try:
        if cuda:
            sync()
            torch.cuda.empty_cache()
            row["device_used_before"] = used()
        model = build(torchvision, args.net, classes).to(dev, memory_format=fmt)
        if strat == "checkpoint":
            units = units_of(torch, model, args.ckpt_units)
            if units is None:
                row["error"] = f"no sequential split of {args.net} for checkpointing"
                return row
            # A segment's output must not be changed in place by the next
            # segment (its first in-place ReLU would bump the saved tensor's
            # version and the recomputation refuses it): out-of-place ReLUs.
            for m in model.modules():
                if isinstance(m, torch.nn.ReLU):
                    m.inplace = False
            seq = torch.nn.Sequential(*(m for _, m in units))
            row["segments"] = describe_segments([n for n, _ in units], args.segments)
            row["ckpt_units"] = args.ckpt_units
        opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9, weight_decay=5e-4)
        if prec == "fp16":   # GradScaler's defaults: init 2^16, growth 2 / 2000, backoff 0.5
            scaler = torch.amp.GradScaler(args.device)
        net = torch.compile(model) if compiled else model
        # the compiled optimizer (PyTorch's recipe); GradScaler's step wraps the eager one
        opt_step = torch.compile(opt.step) if compiled and scaler is None else opt.step
        x = torch.randn(args.batch, *shape, device=dev).contiguous(memory_format=fmt)
        y = torch.randint(0, classes, (args.batch,), device=dev)
        if strat == "upload":
            # what a DataLoader(pin_memory=True) hands over: NCHW in pinned memory
            xh = x.cpu().contiguous()
            yh = y.cpu()
            if cuda:
                xh, yh = xh.pin_memory(), yh.pin_memory()
        lossf = torch.nn.CrossEntropyLoss()

        def forward():
            if strat == "plain":
                return net(x)
            if strat == "upload":
                return net(xh.to(dev, non_blocking=True).contiguous(memory_format=fmt))
            if strat == "save_on_cpu":
                with torch.autograd.graph.save_on_cpu(pin_memory=cuda):
                    return model(x)
            if strat == "checkpoint":
                return checkpoint_sequential(seq, min(args.segments, len(seq)), x,
                                             use_reentrant=False)
            raise SystemExit(f"torch_compare: unknown strategy {strat}")

        def step():
            opt.zero_grad(set_to_none=True)
            if prec in AUTOCAST:
                with torch.autocast(args.device, dtype=getattr(torch, AUTOCAST[prec])):
                    out = forward()
                    loss = lossf(out, yh.to(dev, non_blocking=True) if strat == "upload" else y)
            else:
                out = forward()
                loss = lossf(out, yh.to(dev, non_blocking=True) if strat == "upload" else y)
            if scaler is not None:   # skips the step (and backs off) on inf / NaN gradients
                scaler.scale(loss).backward()
                scaler.step(opt)
                scaler.update()
            else:
                loss.backward()
                opt_step()
            return loss

        for k in range(max(args.warmup, 2) if compiled else args.warmup):
            t0 = time.perf_counter()
            step()
            if compiled and k == 0:   # the compilation (and the first iteration)
                sync()
                row["compile_s"] = time.perf_counter() - t0
        sync()
        samples = [used()]
        if cuda:
            torch.cuda.reset_peak_memory_stats()
        times = []
        for _ in range(args.iters):
            t0 = time.perf_counter()
            loss = step()
            sync()
            times.append(time.perf_counter() - t0)
            samples.append(used())
        dt = statistics.median(times)
        row.update({"iter_s": dt, "iter_mean_s": statistics.mean(times), "iter_min_s": min(times),
                    "iter_times_s": times, "images_s": args.batch / dt,
                    "loss": float(loss.detach())})
        if scaler is not None:
            row["loss_scale"] = scaler.get_scale()   # after the timed iterations (a sync)
        if cuda:
            row.update({"peak_allocated": torch.cuda.max_memory_allocated(),
                        "peak_reserved": torch.cuda.max_memory_reserved(),
                        "device_used": max(samples),
                        "device_total": torch.cuda.mem_get_info()[1]})
    except SystemExit:
        raise
    except Exception as ex:  # one mode failing must not lose the others' numbers
        oom = getattr(torch.cuda, "OutOfMemoryError", None)
        if oom is not None and isinstance(ex, oom):
            row["error"] = "out of memory: " + str(ex).split("\n")[0][:160]
        else:
            traceback.print_exc()
            row["error"] = f"{type(ex).__name__}: " + str(ex).split("\n")[0][:160]
    finally:
        del model, opt, x, y, xh, yh, seq, scaler, net, opt_step
        if compiled:
            torch._dynamo.reset()   # the next mode compiles afresh
        if cuda:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
    return row


# ---- report ------------------------------------------------------------------------

def gib(b):
    return "-" if b is None else f"{b / GiB:.2f}G"


def ratio(a, b):
    return a / b if a is not None and b else None


def fmt_x(v, width=5):
    return f"{'-':>{width}s}" if v is None else f"{v:{width}.2f}"


def pick_rows(ok, math):
    """The PyTorch rows to hold a vdnn run of this math against: same precision, else all."""
    same = [r for r in ok if row_info(r)[0] == math]
    return same or ok, bool(same)


def report_pytorch(args, rows):
    print()
    print(f"PyTorch {args.net}, batch {args.batch}"
          + (f" (torch {rows[0].get('torch')})" if rows and rows[0].get("torch") else "")
          + ": s/iter is the median of the timed iterations")
    w = max([12] + [len(r["mode"]) for r in rows])
    print(f"  {'mode':{w}s} {'s/iter':>8s} {'img/s':>9s} {'allocated':>10s} {'reserved':>10s} "
          f"{'device used':>12s}")
    for r in rows:
        if r.get("error"):
            print(f"  {r['mode']:{w}s} {r['error']}")
            continue
        print(f"  {r['mode']:{w}s} {r['iter_s']:8.4f} {r['images_s']:9.1f} "
              f"{gib(r.get('peak_allocated')):>10s} {gib(r.get('peak_reserved')):>10s} "
              f"{gib(r.get('device_used')):>12s}")
    for r in rows:
        if r.get("segments") and not r.get("error"):
            print(f"  {r['mode']}: segments " + " | ".join(r["segments"]))
    for r in rows:
        if r.get("compile_s") is not None and not r.get("error"):
            print(f"  {r['mode']}: torch.compile's first iteration (the compilation) "
                  f"{r['compile_s']:.1f} s")
    for r in rows:
        if r.get("loss_scale") is not None and not r.get("error"):
            print(f"  {r['mode']}: GradScaler's scale {r['loss_scale']:g} after the timed iterations")


def report_vdnn(args, vd, ok):
    """One vdnn run against the PyTorch rows of its precision; its ratio records."""
    math = vd_math(vd, args.math)
    pts = vdnn_points(vd)
    against, same = pick_rows(ok, math)
    ratios = []
    print()
    print(f"vdnn {vd.get('net', '?')}, batch {vd.get('batch', '?')}, {math}, "
          f"backend {vd.get('backend', '?')}, profile {vd.get('profile', '?')}: "
          f"ratios vdnn / PyTorch (speed > 1: vdnn faster; memory < 1: vdnn smaller)"
          + ("" if same or not against else f" [no PyTorch {math} mode: against all]"))
    hdr = f"  {'budget':>8s} {'policy':>7s} {'s/iter':>8s} {'img/s':>9s} {'memory':>8s} {'pred err':>8s}"
    for r in against:
        hdr += f" | {(r['mode'] + ' speed'):>17s} {'mem':>5s}"
    print(hdr)
    for p in pts:
        mem, kind = vdnn_mem(p)
        err = p.get("error_pct")
        line = (f"  {p['budget_bytes'] / GiB:7.2f}G {p['policy']:>7s} {p['iter_s']:8.4f} "
                f"{p['images_s']:9.1f} {gib(mem):>8s} "
                f"{(f'{err:+.1f}%' if err is not None else '-'):>8s}")
        rat = {"math": math, "budget_bytes": p["budget_bytes"], "policy": p["policy"],
               "memory_bytes": mem, "memory_kind": kind}
        for r in against:
            sp = p["images_s"] / r["images_s"]
            mr = ratio(mem, r.get("device_used"))
            line += f" | {sp:17.2f} {fmt_x(mr)}"
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
    for r in against:
        if r.get("device_used") is None:
            continue
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


HEADLINE = (("no offload", ("plain", "upload")), ("checkpoint", ("checkpoint",)),
            ("save_on_cpu", ("save_on_cpu",)))


def headline(args, vd_runs, ok):
    """The comparisons the bf16 table asks for, for every vdnn run (see the docstring)."""
    out = []
    for vd in vd_runs:
        math = vd_math(vd, args.math)
        pts = vdnn_points(vd)
        none = [p for p in pts if p.get("policy") == "none"]
        # no offload: none at its smallest budget (its peak; a larger pool only costs memory)
        nopt = min(none, key=lambda p: p["budget_bytes"]) if none else None
        off = [p for p in pts if p.get("policy") != "none"]
        if nopt is not None and any(p["budget_bytes"] < nopt["budget_bytes"] for p in off):
            off = [p for p in off if p["budget_bytes"] < nopt["budget_bytes"]]
        if not off and nopt is not None:
            off = [nopt]
        for cat, strats in HEADLINE:
            vps = ([nopt] if nopt is not None else []) if cat == "no offload" else off
            for r in ok:
                prec, cl, strat = row_info(r)
                if prec != math or strat not in strats:
                    continue
                for p in vps:
                    mem = vdnn_mem(p)[0]
                    out.append({"category": cat, "math": math, "budget_bytes": p["budget_bytes"],
                                "policy": p["policy"], "vdnn_iter_s": p["iter_s"],
                                "vdnn_images_s": p["images_s"], "vdnn_memory_bytes": mem,
                                "pytorch_mode": r["mode"], "pytorch_iter_s": r["iter_s"],
                                "pytorch_images_s": r["images_s"],
                                "pytorch_device_used": r.get("device_used"),
                                "speed": p["images_s"] / r["images_s"],
                                "memory": ratio(mem, r.get("device_used"))})
    return out


def report_headline(args, heads):
    if not heads:
        return
    print()
    print(f"{args.net} b{args.batch}: images/s vdnn / PyTorch (> 1: vdnn faster); memory: "
          f"device used vdnn / PyTorch")
    w = max(len(h["pytorch_mode"]) for h in heads)
    for h in heads:
        print(f"  {h['category']:11s} vdnn {h['math']} {h['policy']:>4s} at "
              f"{h['budget_bytes'] / GiB:6.2f}G {h['vdnn_iter_s']:8.4f} s "
              f"{gib(h['vdnn_memory_bytes']):>7s} | {h['pytorch_mode']:{w}s} "
              f"{h['pytorch_iter_s']:8.4f} s {gib(h['pytorch_device_used']):>7s} | "
              f"{h['speed']:5.2f}x speed, memory {fmt_x(h['memory'], 4)}")


CSV_COLS = ("kind", "net", "batch", "precision", "mode", "channels_last", "strategy",
            "budget_bytes", "policy", "iter_s", "iter_mean_s", "iter_min_s", "images_s",
            "peak_allocated", "peak_reserved", "device_used", "vs", "speed_ratio",
            "memory_ratio", "note")


def write_csv(path, args, rows, vd_runs, heads):
    """One table: PyTorch modes (kind pytorch), vdnn points (vdnn), headline ratios (ratio).
    For vdnn, iter_s is vdnn-bench's mean and iter_mean_s is empty."""
    recs = []
    for r in rows:
        prec, cl, strat = row_info(r)
        recs.append({"kind": "pytorch", "net": r.get("net"), "batch": r.get("batch"),
                     "precision": prec, "mode": r.get("mode"), "channels_last": int(cl),
                     "strategy": strat, "iter_s": r.get("iter_s"),
                     "iter_mean_s": r.get("iter_mean_s"), "iter_min_s": r.get("iter_min_s"),
                     "images_s": r.get("images_s"), "peak_allocated": r.get("peak_allocated"),
                     "peak_reserved": r.get("peak_reserved"),
                     "device_used": r.get("device_used"), "note": r.get("error")})
    for vd in vd_runs:
        for p in vd.get("points", []):
            recs.append({"kind": "vdnn", "net": vd.get("net"), "batch": vd.get("batch"),
                         "precision": vd_math(vd, args.math), "budget_bytes": p.get("budget_bytes"),
                         "policy": p.get("policy"), "iter_s": p.get("iter_s"),
                         "iter_min_s": p.get("iter_min_s"), "images_s": p.get("images_s"),
                         "device_used": p.get("device_used"),
                         "note": p.get("note") or (None if p.get("feasible", True)
                                                   else "does not fit")})
    for h in heads:
        recs.append({"kind": "ratio", "net": args.net, "batch": args.batch,
                     "precision": h["math"], "mode": h["category"],
                     "budget_bytes": h["budget_bytes"], "policy": h["policy"],
                     "iter_s": h["vdnn_iter_s"], "images_s": h["vdnn_images_s"],
                     "device_used": h["vdnn_memory_bytes"], "vs": h["pytorch_mode"],
                     "speed_ratio": h["speed"], "memory_ratio": h["memory"]})
    with open(path, "w", newline="") as f:
        wr = csv.DictWriter(f, fieldnames=CSV_COLS, extrasaction="ignore")
        wr.writeheader()
        for rec in recs:
            wr.writerow({k: ("" if rec.get(k) is None else rec.get(k)) for k in CSV_COLS})


def report(args, vd_runs, rows):
    report_pytorch(args, rows)
    ok = [r for r in rows if not r.get("error") and r.get("images_s")]
    ratios = []
    for vd in vd_runs:
        ratios += report_vdnn(args, vd, ok)
    heads = headline(args, vd_runs, ok)
    report_headline(args, heads)
    return ratios, heads


# ---- main ---------------------------------------------------------------------------

def parser():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter,
                                 epilog=__doc__.split("\n", 2)[2])
    ap.add_argument("--net", help="torchvision model = vdnn nets/NET.yaml (default: the vdnn "
                    "JSON's net, else vgg16)")
    ap.add_argument("--batch", type=int, help="default: the vdnn JSON's, else 256")
    ap.add_argument("--math", choices=MATHS, help="vdnn's math and the precision of the old "
                    "mode names (default: the vdnn JSON's, else the explicit modes' one "
                    "precision, else fp32)")
    ap.add_argument("--deterministic", action="store_true",
                    help="cudnn.deterministic, no benchmark (default: as the vdnn JSON)")
    ap.add_argument("--modes", default=",".join(MODES),
                    help="comma-separated PRECISION[-cl][-ckpt|-soc|-upload] or the old names "
                    "(default %(default)s)")
    ap.add_argument("--iters", type=int, default=5, help="timed iterations (both sides)")
    ap.add_argument("--warmup", type=int, default=2, help="untimed iterations (both sides)")
    ap.add_argument("--segments", type=int, default=4, help="checkpoint segments")
    ap.add_argument("--ckpt-units", choices=("blocks", "modules"), default="blocks",
                    help="what checkpointing splits for ResNet: the stem, bottlenecks and head "
                    "(blocks) or every top-level module (modules)")
    ap.add_argument("--image-size", type=int, help="input height and width (default: the vdnn "
                    "JSON's, else 224)")
    ap.add_argument("--device", choices=("cuda", "cpu"), default="cuda",
                    help="cpu: a smoke test of the PyTorch side (no memory numbers)")
    ap.add_argument("--vdnn", metavar="FILE", action="append",
                    help="vdnn-bench --json output to compare against (repeatable)")
    ap.add_argument("--vdnn-bin", metavar="PATH", help="run this vdnn-bench first")
    ap.add_argument("--vdnn-math", metavar="LIST", help="with --vdnn-bin: run vdnn-bench once "
                    "per math in this comma-separated list (default: --math)")
    ap.add_argument("--vdnn-net", metavar="NET.yaml", help="spec for --vdnn-bin "
                    "(default: nets/NET.yaml of this repository)")
    ap.add_argument("--vdnn-args", default="", metavar="ARGS",
                    help="more vdnn-bench arguments, one string (e.g. \"--budgets 8G,12G,peak "
                    "--policies none,all,conv,dyn\"); {math} in it is replaced by the run's math")
    ap.add_argument("--vdnn-out", metavar="FILE", help="keep vdnn-bench's JSON here (with "
                    "several --vdnn-math: FILE with -MATH before the extension, or {math} "
                    "in FILE replaced)")
    ap.add_argument("--torch-json", metavar="FILE",
                    help="take PyTorch's rows from this file (a --json output) instead of "
                    "running; also its vdnn runs when no --vdnn is given")
    ap.add_argument("--json", metavar="FILE",
                    help="write {pytorch, vdnn, ratios, headline} here")
    ap.add_argument("--csv", metavar="FILE", help="write the PyTorch rows, the vdnn points and "
                    "the headline ratios as one CSV table here")
    ap.add_argument("--self-test", action="store_true",
                    help="check the mode parsing and the report on made-up numbers; no torch")
    return ap


def main(argv=None):
    ap = parser()
    args = ap.parse_args(argv)
    if args.self_test:
        return self_test()
    if args.vdnn and args.vdnn_bin:
        ap.error("--vdnn and --vdnn-bin exclude each other")
    if args.vdnn_math and not args.vdnn_bin:
        ap.error("--vdnn-math needs --vdnn-bin")
    if args.iters < 1 or args.warmup < 0 or args.segments < 1:
        ap.error("--iters and --segments must be at least 1, --warmup at least 0")

    vd_runs = []
    for path in args.vdnn or []:
        with open(path) as f:
            vd_runs.append(json.load(f))
    saved = None
    if args.torch_json:
        with open(args.torch_json) as f:
            saved = json.load(f)
        if not vd_runs and not args.vdnn_bin and isinstance(saved, dict) and saved.get("vdnn"):
            v = saved["vdnn"]
            vd_runs = v if isinstance(v, list) else [v]
    vd0 = vd_runs[0] if vd_runs and isinstance(vd_runs[0], dict) else None
    if vd0:
        args.net = args.net or vd0.get("net")
        args.batch = args.batch or vd0.get("batch")
        args.math = args.math or vd0.get("math_requested") or vd0.get("math")
        args.deterministic = args.deterministic or bool(vd0.get("deterministic"))
    if args.math not in MATHS:
        precs = explicit_precisions(args.modes)
        args.math = precs.pop() if len(precs) == 1 else "fp32"
    args.net = args.net or "vgg16"
    args.batch = args.batch or 256
    modes = parse_modes(args.modes, args.math)   # before vdnn-bench: a typo costs no GPU time

    vdnn_failed = False
    if args.vdnn_bin:   # first, before this process touches the GPU
        maths = [m for m in (args.vdnn_math or args.math).split(",") if m]
        for m in maths:
            if m not in MATHS:
                ap.error(f"--vdnn-math: unknown math '{m}' (expected {', '.join(MATHS)})")
        for m in maths:
            vd = run_vdnn_bench(args, m, len(maths))
            if vd is None:
                vdnn_failed = True
            else:
                vd_runs.append(vd)
                vd0 = vd0 or vd
    inp = vd0.get("input") if vd0 else None
    shape = (inp["channels"], inp["height"], inp["width"]) if inp else (3, 224, 224)
    if args.image_size:
        shape = (shape[0], args.image_size, args.image_size)
    classes = inp["classes"] if inp else 1000

    if saved is not None:
        rows = saved["pytorch"] if isinstance(saved, dict) else saved
        names = [m["mode"] for m in modes]
        rows = [r for r in rows if r.get("mode") in names]
    else:
        rows = []
        for info in modes:
            r = run_torch(args, info, shape, classes)
            rows.append(r)
            m = info["mode"]
            if r.get("error"):
                print(f"pytorch {args.net} b{args.batch} {r['precision']} {m:12s} {r['error']}",
                      flush=True)
            else:
                print(f"pytorch {args.net} b{args.batch} {r['precision']} {m:12s} "
                      f"{r['iter_s']:.4f} s/iter {r['images_s']:8.1f} img/s "
                      + (f"device {r['device_used'] / GiB:.2f} GiB" if r.get("device_used")
                         else "device -"), flush=True)
    ratios, heads = report(args, vd_runs, rows)
    if args.json:
        vdnn = vd_runs[0] if len(vd_runs) == 1 else (vd_runs or None)
        with open(args.json, "w") as f:
            json.dump({"pytorch": rows, "vdnn": vdnn, "ratios": ratios, "headline": heads},
                      f, indent=1)
    if args.csv:
        write_csv(args.csv, args, rows, vd_runs, heads)
    return 3 if vdnn_failed else 0


# ---- self-test (no torch, no GPU) ----------------------------------------------------

def self_test():
    def check(cond, what):
        if not cond:
            raise SystemExit(f"torch_compare self-test: FAILED: {what}")

    m = parse_mode("bf16-cl-ckpt", "fp32")
    check(m == {"mode": "bf16-cl-ckpt", "precision": "bf16", "channels_last": True,
                "strategy": "checkpoint", "compile": False}, f"bf16-cl-ckpt -> {m}")
    check(parse_mode("checkpoint", "tf32")["precision"] == "tf32", "old names take --math")
    check(parse_mode("bf16-soc", "fp32")["strategy"] == "save_on_cpu", "bf16-soc")
    check(parse_mode("fp32", "bf16") == {"mode": "fp32", "precision": "fp32",
                                         "channels_last": False, "strategy": "plain",
                                         "compile": False}, "fp32")
    m = parse_mode("compile-bf16-cl", "fp32")
    check(m == {"mode": "compile-bf16-cl", "precision": "bf16", "channels_last": True,
                "strategy": "plain", "compile": True}, f"compile-bf16-cl -> {m}")
    check(parse_mode("compile-tf32-upload", "fp32")["strategy"] == "upload", "compile-tf32-upload")
    check(parse_mode("tf32-cl-upload", "fp32")["strategy"] == "upload", "tf32-cl-upload")
    check(parse_mode("fp16-cl-soc", "fp32") == {"mode": "fp16-cl-soc", "precision": "fp16",
                                               "channels_last": True, "strategy": "save_on_cpu",
                                               "compile": False},
          "fp16-cl-soc")
    for bad in ("fp8", "bf16-ckpt-cl", "bf16-cl-x", "bf16--ckpt", "cl", "compile",
                "compile-bf16-cl-ckpt", "bf16-compile", "compile-compile-fp32"):
        check(parse_mode(bad, "fp32") is None, f"'{bad}' refused")
    check(explicit_precisions("bf16,bf16-cl,plain") == {"bf16"}, "explicit precisions")
    check(explicit_precisions("compile-bf16-cl,tf32") == {"bf16", "tf32"}, "compile's precision")
    check(ckpt_bounds(18, 4) == [(0, 3, True), (4, 7, True), (8, 11, True), (12, 17, False)],
          f"resnet-50 blocks: {ckpt_bounds(18, 4)}")
    check(ckpt_bounds(40, 4)[-1] == (30, 39, False), "vgg16 40 units")
    check(ckpt_bounds(3, 8) == [(0, 0, True), (1, 1, True), (2, 2, False)], "segments > units")
    r50 = (["stem"] + [f"layer1.{i}" for i in range(3)] + [f"layer2.{i}" for i in range(4)]
           + [f"layer3.{i}" for i in range(6)] + [f"layer4.{i}" for i in range(3)] + ["head"])
    check(describe_segments(r50, 4) == ["stem..layer1.2", "layer2.0..layer2.3",
                                        "layer3.0..layer3.3", "layer3.4..head (not checkpointed)"],
          f"describe {describe_segments(r50, 4)}")

    # the report and the files on made-up numbers
    G = 1 << 30
    vd = {"net": "vgg16", "batch": 256, "math": "bf16", "backend": "cuda", "profile": "measured",
          "input": {"channels": 3, "height": 224, "width": 224, "classes": 1000},
          "points": [{"budget_bytes": 8 * G, "policy": "none", "feasible": False},
                     {"budget_bytes": 8 * G, "policy": "auto", "feasible": True, "iter_s": 0.2,
                      "images_s": 1280.0, "device_used": 8.6 * G, "error_pct": 1.0},
                     {"budget_bytes": 14 * G, "policy": "none", "feasible": True,
                      "iter_s": 0.16, "images_s": 1600.0, "device_used": 14.6 * G},
                     {"budget_bytes": 14 * G, "policy": "auto", "feasible": True,
                      "iter_s": 0.16, "images_s": 1600.0, "device_used": 14.6 * G}]}

    def row(mode, s, dev):
        info = parse_mode(mode, "bf16")
        return dict(info, framework="pytorch", net="vgg16", batch=256, math=info["precision"],
                    iter_s=s, iter_mean_s=s, iter_min_s=s, images_s=256 / s,
                    peak_allocated=dev - G, peak_reserved=dev - G // 2, device_used=dev)
    rows = [row("bf16", 0.18, 20 * G), row("bf16-cl", 0.16, 20 * G),
            row("bf16-cl-ckpt", 0.25, 12 * G), row("bf16-cl-soc", 0.8, 12 * G),
            row("fp32", 0.35, 40 * G), dict(row("compile-bf16-cl", 0.14, 18 * G), compile_s=61.0),
            {"framework": "pytorch", "mode": "bf16-ckpt", "net": "vgg16",
                                        "batch": 256, "precision": "bf16", "math": "bf16",
                                        "strategy": "checkpoint", "error": "out of memory: x"}]
    d = tempfile.mkdtemp(prefix="torch-compare-selftest-")
    try:
        bench = os.path.join(d, "bench.json")
        with open(bench, "w") as f:
            json.dump(vd, f)
        tj = os.path.join(d, "torch.json")
        with open(tj, "w") as f:
            json.dump({"pytorch": rows}, f)
        out_j, out_c = os.path.join(d, "c.json"), os.path.join(d, "c.csv")
        rc = main(["--vdnn", bench, "--torch-json", tj, "--modes",
                   "bf16,bf16-cl,bf16-cl-ckpt,bf16-cl-soc,fp32,compile-bf16-cl,bf16-ckpt",
                   "--json", out_j, "--csv", out_c])
        check(rc == 0, f"main returned {rc}")
        with open(out_j) as f:
            res = json.load(f)
        heads = {(h["category"], h["policy"], h["pytorch_mode"]): h for h in res["headline"]}
        check(len(res["headline"]) == 5, f"5 headline ratios, got {sorted(heads)}")
        check(abs(heads[("no offload", "none", "compile-bf16-cl")]["speed"] - 0.14 / 0.16) < 1e-9,
              "no offload vs compile-bf16-cl")
        h = heads[("no offload", "none", "bf16-cl")]
        check(abs(h["speed"] - 1.0) < 1e-9 and abs(h["memory"] - 14.6 / 20) < 1e-9,
              f"no offload vs bf16-cl: {h}")
        check(abs(heads[("checkpoint", "auto", "bf16-cl-ckpt")]["speed"] - 0.25 / 0.2) < 1e-9,
              "auto 8G vs ckpt")
        check(abs(heads[("save_on_cpu", "auto", "bf16-cl-soc")]["speed"] - 4.0) < 1e-9,
              "auto 8G vs soc")
        check(("no offload", "none", "fp32") not in heads, "fp32 is not held against bf16")
        check(all("speed_vs_fp32" not in r for r in res["ratios"]), "matrix: same precision")
        with open(out_c) as f:
            recs = list(csv.DictReader(f))
        kinds = [r["kind"] for r in recs]
        check(kinds.count("pytorch") == 7 and kinds.count("vdnn") == 4
              and kinds.count("ratio") == 5, f"csv kinds {kinds}")
        # re-print from the saved comparison alone (its vdnn run inside)
        check(main(["--torch-json", out_j, "--modes", "bf16-cl"]) == 0, "re-print")
    finally:
        for fn in os.listdir(d):
            os.unlink(os.path.join(d, fn))
        os.rmdir(d)
    print("torch_compare self-test: OK")
    return 0


if __name__ == "__main__":
    sys.exit(main())
