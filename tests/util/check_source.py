#!/usr/bin/env python3
"""check_source.py — rules of the source tree that a compiler does not check.

1. Dependencies run one way (docs/architecture.md): a file in src/AREA may
   include headers only of AREA itself or of areas to its left in ORDER; the
   two peers spec and data do not include each other.
2. No hidden knobs: getenv() appears only where a man page names the
   variable (ALLOWED_GETENV).
Exit 0 when both hold; otherwise 1 with one line per violation. Each rule is
checked against a known-bad snippet first, so the checker itself can fail.
"""
import glob, os, re, sys

ORDER = ["util", "net", "spec", "data", "profile", "backend", "plan", "exec",
         "train", "config", "cli"]
RANK = {a: i for i, a in enumerate(ORDER)}
PEERS = {("spec", "data"), ("data", "spec")}
# CUDA's own variable, read once for the device-memory report (vdnn-train(1)).
ALLOWED_GETENV = {("src/train/session.c", "CUDA_MODULE_LOADING")}
INC = re.compile(r'#\s*include\s+"([a-z_]+)/')
GETENV = re.compile(r'\bgetenv\s*\(\s*("([^"]*)")?')


def include_violations(path, area, text):
    out = []
    for m in INC.finditer(text):
        b = m.group(1)
        if b not in RANK or b == area:
            continue
        if RANK[b] > RANK[area] or (area, b) in PEERS:
            out.append(f"{path}: includes {b}/ (area {area} may include only "
                       f"areas left of it in {' -> '.join(ORDER)})")
    return out


def getenv_violations(path, text):
    out = []
    code = re.sub(r"/\*.*?\*/|//[^\n]*", "", text, flags=re.S)
    for m in GETENV.finditer(code):
        if (path, m.group(2)) not in ALLOWED_GETENV:
            out.append(f"{path}: getenv({m.group(1) or '...'}) — pass an option "
                       "from a documented flag instead")
    return out


def self_test():
    assert include_violations("x.c", "backend", '#include "plan/plan.h"\n')
    assert include_violations("x.c", "spec", '#include "data/data.h"\n')
    assert not include_violations("x.c", "plan", '#include "backend/backend.h"\n')
    assert getenv_violations("src/x.c", 'x = getenv("VDNN_X");')
    assert not getenv_violations("src/x.c", '/* getenv("VDNN_X") */')


def main():
    self_test()
    root = os.environ.get("VD_SRCDIR") or os.path.join(os.path.dirname(__file__), "..", "..")
    os.chdir(root)
    bad, n = [], 0
    for path in sorted(glob.glob("src/**/*.[ch]", recursive=True) +
                       glob.glob("src/**/*.cu", recursive=True)):
        area = path.split("/")[1]
        text = open(path, encoding="utf-8").read()
        n += 1
        if area in RANK:
            bad += include_violations(path, area, text)
        bad += getenv_violations(path, text)
    if n < 50:
        bad.append(f"only {n} source files found under {os.getcwd()}/src")
    for b in bad:
        print(b)
    print(f"check_source: {n} files, {len(bad)} violations")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
