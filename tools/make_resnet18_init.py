#!/usr/bin/env python3
"""torchvision's ResNet-18 as a safetensors file for vdnn-train --init, and
the check of a fine-tuned checkpoint against it.

usage:
  make_resnet18_init.py OUT.safetensors [--seed N] [--classes N]
      torchvision.models.resnet18(num_classes=N) (default 1000) made after
      torch.manual_seed(N) (default 0): its state_dict, every tensor F32 but
      num_batches_tracked (I64), under torchvision's names.
  make_resnet18_init.py --check INIT FINETUNED [--freeze REGEX] [--skip REGEX]
      FINETUNED (vdnn-train --save) loads into torchvision's resnet18 with
      strict=True (its class count from fc.weight); every parameter whose
      name REGEX matches (re.search, as vdnn's --freeze) is bit for bit
      INIT's, every other one that --skip does not match differs from it.

Needs torch and torchvision (no safetensors package: the file is written and
read with json and struct, as tests/train/torch_load_check.py reads it). Not
part of the CI suite, which has no torch: there tests/train/test_tune.c makes
the same names and shapes with vdnn's own writer. The cross-check on a
machine with PyTorch (nets/examples/resnet18.yaml; a 10-class copy of it:
classes: 10 and the fc's out: 10):

    python3 tools/make_resnet18_init.py /tmp/r18.safetensors --seed 1
    vdnn-train r18-10.yaml --data folder:DIR --init /tmp/r18.safetensors \\
        --init-skip '^fc\\.' --freeze '^(conv1|bn1|layer[1-3])\\.' --iters 200 \\
        --save /tmp/r18-10.safetensors
    python3 tools/make_resnet18_init.py --check /tmp/r18.safetensors \\
        /tmp/r18-10.safetensors --freeze '^(conv1|bn1|layer[1-3])\\.' --skip '^fc\\.'
"""
import argparse
import json
import re
import struct
import sys

import torch
import torchvision

DT = {torch.float32: "F32", torch.int64: "I64"}
TORCH = {"F32": torch.float32, "I64": torch.int64, "F16": torch.float16,
         "BF16": torch.bfloat16}


def save_file(path, tensors, meta):
    """safetensors: u64 header length, the JSON header, the tensors' bytes."""
    hdr, blobs, at = {"__metadata__": meta}, [], 0
    for name, t in tensors.items():
        b = t.detach().contiguous().cpu().numpy().tobytes()
        hdr[name] = {"dtype": DT[t.dtype], "shape": list(t.shape),
                     "data_offsets": [at, at + len(b)]}
        blobs.append(b)
        at += len(b)
    h = json.dumps(hdr).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for b in blobs:
            f.write(b)


def load_file(path):
    with open(path, "rb") as f:
        raw = f.read()
    (hl,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + hl])
    hdr.pop("__metadata__", None)
    data = bytearray(raw[8 + hl:])
    out = {}
    for name, t in hdr.items():
        b, e = t["data_offsets"]
        x = torch.frombuffer(data[b:e], dtype=TORCH[t["dtype"]]) if e > b else \
            torch.empty(0, dtype=TORCH[t["dtype"]])
        out[name] = x.reshape(t["shape"]).clone()
    return out


def make(a):
    torch.manual_seed(a.seed)
    m = torchvision.models.resnet18(num_classes=a.classes)
    sd = m.state_dict()
    save_file(a.out, sd, {"format": "pt", "producer": "torchvision %s" % torchvision.__version__,
                          "seed": str(a.seed)})
    n = sum(t.numel() for k, t in sd.items() if not k.endswith(("running_mean", "running_var",
                                                                   "num_batches_tracked")))
    print("%s: resnet18, %d classes, seed %d: %d tensors, %d parameters"
          % (a.out, a.classes, a.seed, len(sd), n))


def check(a):
    init, tuned = load_file(a.check[0]), load_file(a.check[1])
    m = torchvision.models.resnet18(num_classes=tuned["fc.weight"].shape[0])
    m.load_state_dict({k: v.float() if v.is_floating_point() else v for k, v in tuned.items()},
                      strict=True)
    frz = re.compile(a.freeze) if a.freeze else None
    skip = re.compile(a.skip) if a.skip else None
    bad, same, moved = [], 0, 0
    for name, p in m.named_parameters():
        t = tuned[name]
        i = init.get(name)
        if skip and skip.search(name):
            continue
        equal = i is not None and i.dtype == t.dtype and i.shape == t.shape and \
            i.numpy().tobytes() == t.numpy().tobytes()   # bit for bit (FINETUNED saved F32)
        if frz and frz.search(name):
            same += equal
            if not equal:
                bad.append("%s: frozen but changed" % name)
        else:
            moved += not equal
            if equal:
                bad.append("%s: trained but unchanged" % name)
    print("%s loads into torchvision resnet18 (strict); %d frozen parameters unchanged, "
          "%d trained ones changed" % (a.check[1], same, moved))
    for b in bad:
        print("MISMATCH " + b)
    return 1 if bad else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("out", nargs="?", help="the safetensors file to write")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--classes", type=int, default=1000)
    ap.add_argument("--check", nargs=2, metavar=("INIT", "FINETUNED"))
    ap.add_argument("--freeze", help="the --freeze pattern of the fine-tuning run")
    ap.add_argument("--skip", help="the --init-skip pattern of the fine-tuning run")
    a = ap.parse_args()
    if a.check:
        return check(a)
    if not a.out:
        ap.error("OUT.safetensors or --check INIT FINETUNED")
    make(a)
    return 0


if __name__ == "__main__":
    sys.exit(main())
