#!/usr/bin/env python3
"""gap-points.py — where auto's time goes at the grid points over 5% above
the bound (bound-gap.md): the plan's predicted iteration split into the
passes' time (its options), the recomputes and the stalls, beside the
bound and its compute-only figure.

usage: gap-points.py VDNN_PLAN > gap-points.txt (from the repository root;
the ResNet-152 measured profile is not among these points)."""
import json, re, subprocess, sys

API = "tests/plan/data/vgg16-b256-h200-fp32-api.json"
H100 = "tests/plan/data/vgg16-b256-h100-bf16.json"
S7 = "tests/plan/data/resnet50-b256-h200-fp32-s7.json"
POINTS = [("vgg16", "fp32", None, 2627428352), ("vgg16", "bf16", None, 1882415104),
          ("resnet152", "fp32", None, 3768866304), ("resnet152", "fp32", None, 12154684672), ("resnet152", "bf16", None, 6320460032),
          ("googlenet", "fp32", None, 2520252160), ("googlenet", "bf16", None, 1287126784),
          ("vgg16", "fp32", API, 2627430656), ("vgg16", "fp32", API, 8448573952),
          ("vgg16", "bf16", H100, 1933795328), ("resnet50", "fp32", S7, 3491363328)]


def main():
    vp = sys.argv[1]
    print("net", "math", "profile", "budget", "bound", "bound_compute", "iter", "passes",
          "recompute", "stalls", "above%", sep="\t")
    for net, math, prof, b in POINTS:
        a = [vp, f"nets/{net}.yaml", "--batch", "256", "--math", math, "--quiet",
             "--budget", str(b)] + (["--profile", prof] if prof else [])
        d = json.loads(subprocess.run(a + ["--format", "json"], capture_output=True,
                                      text=True, check=True).stdout)
        txt = subprocess.run(a, capture_output=True, text=True, check=True).stdout
        bc = float(re.search(r"lower bound +[\d.]+ ms \(compute ([\d.]+) ms", txt).group(1))
        pr = d["predicted"]
        it, rc, st = pr["iter_s"] * 1e3, d["recompute_s"] * 1e3, pr["stall_s"] * 1e3
        print(net, math, prof.split("/")[-1] if prof else "analytic", b,
              f"{d['bound_s'] * 1e3:.3f}", f"{bc:.3f}", f"{it:.3f}",
              f"{pr['compute_s'] * 1e3 - rc:.3f}", f"{rc:.3f}", f"{st:.3f}",
              f"{100 * (it / (d['bound_s'] * 1e3) - 1):.1f}", sep="\t", flush=True)


main()
