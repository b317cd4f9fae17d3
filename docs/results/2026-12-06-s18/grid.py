#!/usr/bin/env python3
"""grid.py — the auto search's grid (issue 32 item 3): for each net x math x
profile, 6 budgets from auto's smallest (vdnn-plan --min-budget) to none's
need, and at each, for each vdnn-plan given (run back to back, so that they
share the machine's load), --policy auto's predicted iteration and its
planning time (user CPU seconds of the process, the best of REPEAT runs),
and the lower bound.

usage: grid.py BUDGETS.json VDNN_PLAN... > OUT.tsv
  BUDGETS.json: the budgets of each series; written when absent (from the
  first vdnn-plan's --min-budget), read when present.
  env REPEAT (default 1): runs per point and binary.
Run from the repository root. The profiles: the analytic one (H200), the
measured ones in tests/plan/data, and session 16's ResNet-152 bf16 one
decompressed to /tmp/r152-bf16-profile.json."""
import json, os, re, resource, subprocess, sys

SERIES = [(n, m, "analytic") for n in ("vgg16", "resnet50", "resnet152", "googlenet")
          for m in ("fp32", "bf16")] + [
    ("vgg16", "fp32", "tests/plan/data/vgg16-b256-h200-fp32-api.json"),
    ("vgg16", "bf16", "tests/plan/data/vgg16-b256-h100-bf16.json"),
    ("resnet50", "fp32", "tests/plan/data/resnet50-b256-h200-fp32-s7.json"),
    ("resnet152", "bf16", "/tmp/r152-bf16-profile.json"),
]
STEPS = 6


def args(net, math, prof):
    a = [f"nets/{net}.yaml", "--batch", "256", "--math", math, "--quiet"]
    return a + (["--profile", prof] if prof != "analytic" else [])


def run(cmd):
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime
    r = subprocess.run(cmd, capture_output=True, text=True)
    return r, resource.getrusage(resource.RUSAGE_CHILDREN).ru_utime - before


def main():
    bfile, vps = sys.argv[1], sys.argv[2:]
    repeat = int(os.environ.get("REPEAT", "1"))
    budgets = json.load(open(bfile)) if os.path.exists(bfile) else {}
    print("net", "math", "profile", "budget", "bound_ms",
          *[f"{k}{i}" for i in range(len(vps)) for k in ("pred_ms", "plan_s")], sep="\t")
    for net, math, prof in SERIES:
        key = f"{net}:{math}:{prof}"
        if key not in budgets:
            r = subprocess.run([vps[0]] + args(net, math, prof) + ["--min-budget"],
                               capture_output=True, text=True, check=True)
            lo = int(re.search(r"^  auto .*\((\d+) bytes\)$", r.stdout, re.M).group(1))
            hi = int(re.search(r"^  none .*\((\d+) bytes\)$", r.stdout, re.M).group(1))
            budgets[key] = [(lo + (hi - lo) * i // (STEPS - 1) + 255) // 256 * 256
                            for i in range(STEPS)]
            json.dump(budgets, open(bfile, "w"), indent=1)
        for b in budgets[key]:
            cols, bound = [], None
            for vp in vps:
                best = None
                for _ in range(repeat):
                    r, t = run([vp] + args(net, math, prof) + ["--budget", str(b), "--format", "json"])
                    best = t if best is None else min(best, t)
                d = json.loads(r.stdout) if r.stdout.strip() else {}
                pred = d["predicted_iter_s"] * 1e3 if d.get("feasible") else float("nan")
                bound = d.get("bound_s")
                cols += [f"{pred:.3f}", f"{best:.2f}"]
            print(net, math, os.path.basename(prof), b,
                  f"{bound * 1e3:.3f}" if bound else "-", *cols, sep="\t", flush=True)


main()
