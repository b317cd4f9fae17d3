#!/usr/bin/env python3
"""optim_reference.py -- PyTorch's optimizers in float64 on fixed inputs: the
reference that tests/train/test_optim.c (the CPU backend) and
tests/cuda/test_cuda_ops.c (the CUDA backend) feed through vdnn's update.

    tools/optim_reference.py tests/train/data/adamw_reference.json
        torch.optim.AdamW and torch.optim.SGD(nesterov=True) (needs torch)
    tools/optim_reference.py --transcription OUT.json
        no torch: a transcription of the same algorithms in Python floats
        (float64, torch/optim/adam.py's _single_tensor_adam and sgd.py's
        _single_tensor_sgd, operation for operation); a provisional file
        until one is made with torch (its "generator" says which it is)

Three cases of three parameter tensors each (a few dozen values, seeded),
20 steps with a fixed gradient per tensor and step, the parameters after
every step. Every input (initial values, gradients, learning rates,
betas, eps, momentum, weight decay) is a float32 value, so that vdnn's
float32 arithmetic starts from exactly the numbers PyTorch's float64 run
starts from and the comparison measures the arithmetic alone. The
initial magnitudes lie in [1.6, 1.9] and the steps are small, so that
every parameter stays in [1.5, 2) (one float32 binade: an ulp of 2^-23):
the premise of the tests' 1e-6 bound, which they assert on the data.

Output (JSON; the tests read exactly this):
  {"format": "vdnn-optim-reference", "version": 1, "generator": "...",
   "steps": 20,
   "cases": [{"name": ..., "optimizer": "adamw" | "sgd",
              "lr": [20 per-step learning rates], "weight_decay": ...,
              adamw: "betas": [b1, b2], "eps": ...,
              sgd: "momentum": ..., "nesterov": true,
              "tensors": [{"init": [n], "grads": [20][n], "params": [20][n]}]}]}
"params"[s] are the values after step s + 1.
"""
import argparse
import json
import math
import random
import re
import struct
import sys

STEPS = 20


def f32(x):
    """x rounded to the nearest float32, as a Python float."""
    return struct.unpack("<f", struct.pack("<f", x))[0]


def make_inputs(seed, sizes, grad_scales):
    """Initial values (magnitude in [1.6, 1.9], random sign) and a
    gradient per step for each tensor; tensor k's gradients are uniform in
    +-grad_scales[k], a few of them exactly 0 (eps's regime for AdamW)."""
    rng = random.Random(seed)
    tensors = []
    for n, scale in zip(sizes, grad_scales):
        init = [f32(rng.choice((-1.0, 1.0)) * rng.uniform(1.6, 1.9)) for _ in range(n)]
        grads = []
        for _ in range(STEPS):
            grads.append([0.0 if rng.random() < 0.05 else f32(rng.uniform(-scale, scale))
                          for _ in range(n)])
        tensors.append({"init": init, "grads": grads})
    return tensors


def cases():
    """The three cases: AdamW at PyTorch's defaults (constant lr), AdamW
    with other betas and eps, a stronger weight decay and a decaying lr (a
    schedule, as vdnn's lr_policy sets each step's), and Nesterov SGD."""
    decaying = [f32(1e-4 + 1e-3 * (1 + math.cos(math.pi * s / STEPS))) for s in range(STEPS)]
    return [
        {"name": "adamw_defaults", "optimizer": "adamw",
         "lr": [f32(1e-3)] * STEPS, "weight_decay": f32(1e-2),
         "betas": [f32(0.9), f32(0.999)], "eps": f32(1e-8),
         "tensors": make_inputs(1, (24, 36, 17), (1.0, 0.05, 1e-7))},
        {"name": "adamw_betas_eps_schedule", "optimizer": "adamw",
         "lr": decaying, "weight_decay": f32(0.1),
         "betas": [f32(0.8), f32(0.99)], "eps": f32(1e-6),
         "tensors": make_inputs(2, (30, 19, 25), (0.5, 1e-3, 1e-6))},
        {"name": "sgd_nesterov", "optimizer": "sgd",
         "lr": [f32(5e-4)] * STEPS, "weight_decay": f32(1e-4),
         "momentum": f32(0.9), "nesterov": True,
         "tensors": make_inputs(3, (20, 33, 28), (0.5, 0.1, 1e-3))},
    ]


# ---- torch ------------------------------------------------------------------

def run_torch(case):
    import torch
    params = [torch.tensor(t["init"], dtype=torch.float64, requires_grad=True)
              for t in case["tensors"]]
    lr0 = case["lr"][0]
    if case["optimizer"] == "adamw":
        opt = torch.optim.AdamW(params, lr=lr0, betas=tuple(case["betas"]), eps=case["eps"],
                                weight_decay=case["weight_decay"], amsgrad=False,
                                foreach=False)
    else:
        opt = torch.optim.SGD(params, lr=lr0, momentum=case["momentum"], dampening=0,
                              weight_decay=case["weight_decay"], nesterov=case["nesterov"],
                              foreach=False)
    out = [[] for _ in params]
    for s in range(STEPS):
        for g in opt.param_groups:
            g["lr"] = case["lr"][s]
        for p, t in zip(params, case["tensors"]):
            p.grad = torch.tensor(t["grads"][s], dtype=torch.float64)
        opt.step()
        for k, p in enumerate(params):
            out[k].append(p.detach().tolist())
    return out, "torch %s (torch.optim, float64, foreach=False)" % torch.__version__


# ---- the transcription (no torch) -------------------------------------------

def lerp(a, b, w):
    """ATen's lerp (Lerp.h), in float64."""
    return a + w * (b - a) if abs(w) < 0.5 else b - (b - a) * (1 - w)


def run_transcription(case):
    out = []
    for t in case["tensors"]:
        p = list(t["init"])
        n = len(p)
        m = [0.0] * n
        v = [0.0] * n
        buf = None
        after = []
        for s in range(STEPS):
            lr, wd, g = case["lr"][s], case["weight_decay"], t["grads"][s]
            step = s + 1
            if case["optimizer"] == "adamw":
                b1, b2 = case["betas"]
                eps = case["eps"]
                # _single_tensor_adam, decoupled weight decay, not amsgrad
                p = [x * (1 - lr * wd) for x in p]
                m = [lerp(m[i], g[i], 1 - b1) for i in range(n)]
                v = [v[i] * b2 + ((1 - b2) * g[i]) * g[i] for i in range(n)]
                bc1 = 1 - b1 ** step
                bc2 = 1 - b2 ** step
                step_size = lr / bc1
                bc2_sqrt = math.sqrt(bc2)
                denom = [math.sqrt(v[i]) / bc2_sqrt + eps for i in range(n)]
                p = [p[i] + (-step_size) * m[i] / denom[i] for i in range(n)]
            else:
                # _single_tensor_sgd, dampening 0
                mu = case["momentum"]
                d = [g[i] + wd * p[i] for i in range(n)]
                buf = list(d) if buf is None else [buf[i] * mu + d[i] for i in range(n)]
                if case["nesterov"]:
                    d = [d[i] + mu * buf[i] for i in range(n)]
                else:
                    d = buf
                p = [p[i] + (-lr) * d[i] for i in range(n)]
            after.append(list(p))
        out.append(after)
    return out, ("transcription of torch.optim in Python float64 (tools/optim_reference.py "
                 "--transcription): provisional, regenerate with torch")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("out", help="the JSON file to write")
    ap.add_argument("--transcription", action="store_true",
                    help="no torch: the float64 transcription (provisional)")
    a = ap.parse_args()
    run = run_transcription if a.transcription else run_torch
    doc = {"format": "vdnn-optim-reference", "version": 1, "generator": "", "steps": STEPS,
           "cases": []}
    for c in cases():
        params, gen = run(c)
        doc["generator"] = gen
        for t, ps in zip(c["tensors"], params):
            t["params"] = ps
        doc["cases"].append(c)
    # indented, but each array of numbers on one line (a step's values)
    text = json.dumps(doc, indent=1)
    text = re.sub(r"\[\s+([-+0-9.eE,\s]+?)\s+\]",
                  lambda m: "[" + re.sub(r",\s+", ", ", m.group(1)) + "]", text)
    with open(a.out, "w") as f:
        f.write(text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
