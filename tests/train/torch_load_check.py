#!/usr/bin/env python3
"""Load a vdnn checkpoint into a torchvision model with strict=True.

usage: torch_load_check.py MODEL FILE      (MODEL: vgg16, resnet50, alexnet, ...)

Needs torch and torchvision (not the safetensors package: the file is read
with json + struct here, the way safetensors.torch.load_file reads it).
Prints the number of tensors loaded and checks that every value arrived
unchanged. Not part of the CI suite (CI has no torch); a manual check that
the checkpoint promise of man vdnn-train(1) holds:

    vdnn-train nets/vgg16.yaml --batch 1 --iters 1 --data synthetic:2,1 \\
        --eval-every -1 --save /tmp/vgg16.safetensors
    python3 tests/train/torch_load_check.py vgg16 /tmp/vgg16.safetensors
"""
import json
import struct
import sys

import torch
import torchvision

DT = {"F32": torch.float32, "I64": torch.int64, "F16": torch.float16,
      "BF16": torch.bfloat16, "F64": torch.float64, "I32": torch.int32}


def load_file(path):
    with open(path, "rb") as f:
        raw = f.read()
    (hl,) = struct.unpack("<Q", raw[:8])
    hdr = json.loads(raw[8:8 + hl])
    meta = hdr.pop("__metadata__", {})
    data = bytearray(raw[8 + hl:])
    out = {}
    for name, t in hdr.items():
        b, e = t["data_offsets"]
        x = torch.frombuffer(data[b:e], dtype=DT[t["dtype"]]) if e > b else \
            torch.empty(0, dtype=DT[t["dtype"]])
        out[name] = x.reshape(t["shape"]).clone()
    return out, meta


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    arch, path = sys.argv[1], sys.argv[2]
    sd, meta = load_file(path)
    # GoogLeNet without its auxiliary classifiers, as nets/googlenet.yaml is
    kw = {"aux_logits": False, "init_weights": False} if arch == "googlenet" else {}
    model = getattr(torchvision.models, arch)(**kw)
    model.load_state_dict(sd, strict=True)          # raises on any mismatch
    got = model.state_dict()
    for k, v in sd.items():
        if not torch.equal(got[k], v):
            sys.exit(f"{k}: value changed in load_state_dict")
    print(f"{path}: torchvision.models.{arch}() strict load_state_dict OK "
          f"({len(sd)} tensors, metadata {meta})")


if __name__ == "__main__":
    main()
