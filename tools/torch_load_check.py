#!/usr/bin/env python3
"""torch_load_check.py CKPT NET — prove a vdnn checkpoint loads into torchvision.

Reads CKPT (safetensors written by vdnn-train --save) with the safetensors
package if present, else with a small reader of the format, and calls
torchvision.models.NET().load_state_dict(state, strict=True). Exits non-zero
on any missing/unexpected key or shape mismatch. Run on the GPU machine where
PyTorch is installed:  python3 tools/torch_load_check.py vgg16.safetensors vgg16
"""
import json
import struct
import sys

import torch
import torchvision

DT = {"F32": torch.float32, "I64": torch.int64, "F64": torch.float64, "I32": torch.int32}


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + n])
    meta = header.pop("__metadata__", {})
    base = 8 + n
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        buf = bytearray(data[base + b:base + e])
        out[name] = torch.frombuffer(buf, dtype=DT[t["dtype"]]).reshape(t["shape"]).clone() \
            if e > b else torch.zeros(t["shape"], dtype=DT[t["dtype"]])
    return out, meta


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    path, net = sys.argv[1], sys.argv[2]
    state, meta = read_safetensors(path)
    kw = {"aux_logits": False, "init_weights": False} if net == "googlenet" else {}
    model = getattr(torchvision.models, net)(weights=None, **kw)
    res = model.load_state_dict(state, strict=True)
    n = sum(p.numel() for p in model.parameters())
    same = all(torch.equal(model.state_dict()[k].to(state[k].dtype), state[k]) for k in state)
    print(f"torchvision.models.{net}: load_state_dict(strict=True) OK ({res}); "
          f"{len(state)} tensors, {n} parameters, values equal: {same}, metadata {meta}")
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
