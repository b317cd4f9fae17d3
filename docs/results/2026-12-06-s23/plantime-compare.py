#!/usr/bin/env python3
"""plantime-compare.py BASE_DIR NEW_DIR — compare two output directories of
docs/results/2026-12-06-s21/plantime-ident.sh point by point: the exit
status (rc.txt) and the JSON's predicted_iter_s, and whether the whole JSON
is byte for byte the same. Prints one line per point that differs and a
summary; exits 1 when a point plans slower (or changes its exit status,
or is missing), else 0."""
import json
import os
import sys


def rcs(d):
    out = {}
    with open(os.path.join(d, "rc.txt")) as f:
        for line in f:
            name, rc = line.split()
            out[name] = int(rc.split("=")[1])
    return out


def pred(d, name):
    try:
        with open(os.path.join(d, name + ".json")) as f:
            return json.load(f).get("predicted_iter_s")
    except (OSError, ValueError):
        return None


def raw(d, name):
    try:
        with open(os.path.join(d, name + ".json"), "rb") as f:
            return f.read()
    except OSError:
        return None


def main():
    a, b = sys.argv[1], sys.argv[2]
    ra, rb = rcs(a), rcs(b)
    bad = same = faster = other = 0
    for name in sorted(set(ra) | set(rb)):
        if name not in ra or name not in rb:
            print(f"{name}: only in {'base' if name in ra else 'new'}")
            bad += 1
            continue
        pa, pb = pred(a, name), pred(b, name)
        if ra[name] != rb[name]:
            print(f"{name}: exit status {ra[name]} -> {rb[name]}")
            bad += 1
        elif raw(a, name) == raw(b, name):
            same += 1
        elif pa is None or pb is None:
            print(f"{name}: rc {ra[name]}, JSON differs, predicted {pa} -> {pb}")
            other += 1
        elif pb > pa:
            print(f"{name}: SLOWER {pa * 1e3:.3f} -> {pb * 1e3:.3f} ms")
            bad += 1
        elif pb < pa:
            print(f"{name}: faster {pa * 1e3:.3f} -> {pb * 1e3:.3f} ms")
            faster += 1
        else:
            print(f"{name}: same prediction {pa * 1e3:.3f} ms, another plan")
            other += 1
    print(f"{same} identical, {faster} faster, {other} other changes, {bad} slower or broken "
          f"(of {len(set(ra) | set(rb))})")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
