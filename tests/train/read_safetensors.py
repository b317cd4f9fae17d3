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
are decimal. BF16 values are the fp32 values (hex floats) the file rounded:
each stored bf16 must be the one nearest to it, ties to the even one (chosen
here by comparing distances, not by vdnn's bit trick). Lines starting with
'#' are ignored. Exit status 0 on success.
"""
import json
import struct
import sys

SIZES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I64": 8, "I32": 4, "I16": 2,
         "I8": 1, "U8": 1, "BOOL": 1}


def fail(msg):
    print("read_safetensors.py: " + msg, file=sys.stderr)
    sys.exit(1)


def bf16_mag(p):
    """The magnitude of bf16 pattern p (0 .. 0x7F80, 0x7F80 read as 2**128)."""
    e, m = p >> 7, p & 0x7F
    return (128 + m) * 2.0 ** (e - 134) if e else m * 2.0 ** -133


def nearest_bf16(x):
    """The bf16 pattern nearest to the float32 x, ties to even (x finite or inf)."""
    (u,) = struct.unpack("<I", struct.pack("<f", x))
    sign, mag = (u >> 16) & 0x8000, u & 0x7FFFFFFF
    if mag == 0x7F800000:
        return sign | 0x7F80
    lo = mag >> 16
    v = abs(x)
    dl, dh = v - bf16_mag(lo), bf16_mag(lo + 1) - v   # exact in double
    r = lo if dl < dh else lo + 1 if dh < dl else lo + (lo & 1)
    return sign | r


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
            elif dt == "BF16":
                got = struct.unpack("<%dH" % (len(blob) // 2), blob)
                exp_vals = [nearest_bf16(float.fromhex(v)) for v in vals]
            elif dt == "I64":
                got = struct.unpack("<%dq" % (len(blob) // 8), blob)
                exp_vals = [int(v) for v in vals]
            else:
                fail(f"{name}: unexpected dtype {dt}")
            if len(got) != len(exp_vals):
                fail(f"{name}: {len(got)} values, expected {len(exp_vals)}")
            for i, (g, w) in enumerate(zip(got, exp_vals)):
                if g != w:
                    if dt == "BF16":
                        fail(f"{name}[{i}] = 0x{g:04x}, expected 0x{w:04x} (from {vals[i]})")
                    fail(f"{name}[{i}] = {g!r}, expected {w!r}")
            checked += 1
        if which == "model" and meta.get("format") != "pt":
            fail(f"{files[which]}: metadata format is {meta.get('format')!r}, expected 'pt'")
    print(f"read_safetensors.py: {checked} tensors match")


if __name__ == "__main__":
    main()
