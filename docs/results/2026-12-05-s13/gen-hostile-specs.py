#!/usr/bin/env python3
"""Write hostile vdnn specs of about SIZE bytes (default 16 MiB, the spec
size limit) into DIR, one per shape, for measuring the parser's peak memory
(spec-memory.md). Usage: gen-hostile-specs.py DIR [SIZE]"""
import os
import sys

out = sys.argv[1]
size = int(sys.argv[2]) if len(sys.argv) > 2 else (16 << 20) - 4096
os.makedirs(out, exist_ok=True)
HEAD = "input: {channels: 1, height: 8, width: 8, classes: 10}\n"


def upto(prefix, units, suffix):
    """prefix + as many of the generated units as fit in size + suffix"""
    parts, n = [prefix], len(prefix) + len(suffix)
    for u in units:
        if n + len(u) > size:
            break
        parts.append(u)
        n += len(u)
    return "".join(parts) + suffix


def fill(prefix, unit, suffix, budget=None):
    n = ((budget or size) - len(prefix) - len(suffix)) // len(unit)
    return prefix + unit * n + suffix


shapes = {
    # 8.4 M flow-list items of two bytes: the audit's shape
    "flow-list": fill(HEAD + "layers: [", "1,", "1]\n"),
    # block list, one item a line
    "block-list": fill(HEAD + "layers:\n", "- 1\n", ""),
    # block list of empty (null) items: two bytes each
    "empty-items": fill(HEAD + "layers:\n", "-\n", ""),
    # a flow mapping of keys without values ({a,a,...} is a duplicate-key
    # error only after the document is built)
    "flow-keys": fill(HEAD + "templates: {", "a,", "a}\nlayers: [{name: r, type: relu}]\n"),
    # many distinct keys in a block mapping
    "many-keys": upto(HEAD + "layers: [{name: r, type: relu}]\ntemplates:\n",
                      ("  k%d: 1\n" % i for i in range(size)), ""),
    # lists nested 60 deep, repeated
    "deep-nesting": fill(HEAD + "layers: [", "[" * 60 + "]" * 60 + ",", "1]\n"),
    # one long string
    "long-string": fill(HEAD + "description: \"", "x", "\"\nlayers: [{name: r, type: relu}]\n"),
    # the most layers a spec may hold, each its own entry (a valid net)
    "layers-16384": HEAD + "layers:\n" + "".join(
        "  - {name: l%d, type: relu}\n" % i for i in range(16382))
        + "  - {name: fc, type: fc, out: 10}\n  - {name: loss, type: softmax_cross_entropy}\n",
    # far more layer entries than the limit
    "layers-many": fill(HEAD + "layers:\n", "- {type: relu, repeat: 0}\n", ""),
    # billion laughs: ten levels of ten aliases
    "laughs": HEAD + "a0: &a0 [1,1,1,1,1,1,1,1,1,1]\n" + "".join(
        "a%d: &a%d [%s]\n" % (i, i, ",".join(["*a%d" % (i - 1)] * 10)) for i in range(1, 10))
        + "layers: [{name: r, type: relu}]\n",
    # millions of aliases of one anchor
    "aliases": fill(HEAD + "x: &a 1\nlayers: [", "*a,", "*a]\n"),
    # millions of anchors
    "anchors": upto(HEAD + "layers: [", ("&a%d 1," % i for i in range(size)), "1]\n"),
}
for name, text in shapes.items():
    with open(os.path.join(out, name + ".yaml"), "w") as f:
        f.write(text)
    print("%-14s %9d bytes" % (name, len(text)))
