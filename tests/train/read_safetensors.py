#!/usr/bin/env python3
"""Independent safetensors reader (plain python3: json + struct, no numpy).

usage: read_safetensors.py FILE EXPECTED

Reads FILE (the model) and, if EXPECTED mentions state tensors, FILE.state.
Checks the container rules (little-endian u64 header length, header a JSON
object, header padded to 8 bytes, __metadata__ all strings, tensors
contiguous, non-overlapping and covering the data area exactly, byte counts
matching dtype x shape) and that the tensors are exactly those listed in
EXPECTED, one per line:

    model|state NAME DTYPE NDIM DIM... VALUE...

F32 values are C99 hex floats (printf %a), compared bit-exactly; I64 values
are decimal. Lines starting with '#' are ignored. Exit status 0 on success.
"""
import json
import struct
import sys

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
         "I8": 1, "U8": 1, "BOOL": 1}


def fail(msg):
    print("read_safetensors.py: " + msg, file=sys.stderr)
    sys.exit(1)


def load(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        fail(f"{path}: shorter than 8 bytes")
    (hl,) = struct.unpack("<Q", raw[:8])
    if 8 + hl > len(raw):
        fail(f"{path}: header length {hl} exceeds the file")
    if hl % 8:
        fail(f"{path}: header length {hl} is not a multiple of 8")
    hdr = json.loads(raw[8:8 + hl].decode("utf-8"))
    if not isinstance(hdr, dict):
        fail(f"{path}: header is not an object")
    data = raw[8 + hl:]
    meta = hdr.pop("__metadata__", {})
    if not all(isinstance(v, str) for v in meta.values()):
        fail(f"{path}: __metadata__ values must be strings")
    spans = []
    tensors = {}
    for name, t in hdr.items():
        dt, shape, (b, e) = t["dtype"], t["shape"], t["data_offsets"]
        n = 1
        for d in shape:
            n *= d
        if e - b != n * SIZES[dt]:
            fail(f"{path}: {name}: {e - b} bytes for {dt}{shape}")
        spans.append((b, e, name))
        tensors[name] = (dt, shape, data[b:e])
    pos = 0
    for b, e, name in sorted(spans):
        if b != pos:
            fail(f"{path}: {name} starts at {b}, expected {pos}")
        pos = e
    if pos != len(data):
        fail(f"{path}: tensors cover {pos} of {len(data)} data bytes")
    return tensors, meta


def main():
    if len(sys.argv) != 3:
        fail("usage: read_safetensors.py FILE EXPECTED")
    path, expected = sys.argv[1], sys.argv[2]
    want = {"model": {}, "state": {}}
    with open(expected) as f:
        for line in f:
            if not line.strip() or line.startswith("#"):
                continue
            tok = line.split()
            which, name, dt, ndim = tok[0], tok[1], tok[2], int(tok[3])
            shape = [int(x) for x in tok[4:4 + ndim]]
            vals = tok[4 + ndim:]
            want[which][name] = (dt, shape, vals)
    files = {"model": path, "state": path + ".state"}
    checked = 0
    for which, exp in want.items():
        if not exp:
            continue
        tensors, meta = load(files[which])
        if set(tensors) != set(exp):
            fail(f"{files[which]}: tensors {sorted(set(tensors) ^ set(exp))} differ from expected")
        for name, (dt, shape, vals) in exp.items():
            gdt, gshape, blob = tensors[name]
            if gdt != dt or gshape != shape:
                fail(f"{name}: {gdt}{gshape}, expected {dt}{shape}")
            if dt == "F32":
                got = struct.unpack("<%df" % (len(blob) // 4), blob)
                exp_vals = [float.fromhex(v) for v in vals]
            elif dt == "I64":
                got = struct.unpack("<%dq" % (len(blob) // 8), blob)
                exp_vals = [int(v) for v in vals]
            else:
                fail(f"{name}: unexpected dtype {dt}")
            if len(got) != len(exp_vals):
                fail(f"{name}: {len(got)} values, expected {len(exp_vals)}")
            for i, (g, w) in enumerate(zip(got, exp_vals)):
                if g != w:
                    fail(f"{name}[{i}] = {g!r}, expected {w!r}")
            checked += 1
        if which == "model" and meta.get("format") != "pt":
            fail(f"{files[which]}: metadata format is {meta.get('format')!r}, expected 'pt'")
    print(f"read_safetensors.py: {checked} tensors match")


if __name__ == "__main__":
    main()
