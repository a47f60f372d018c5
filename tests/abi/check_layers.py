#!/usr/bin/env python3
"""Holds src/ to the order of tests/abi/layers.txt (docs/ARCHITECTURE.md).

Two kinds of use are checked, each against the line order of layers.txt:
  - includes: a quoted #include of a private header in another folder of src/
    (inside a folder, such as the engine, headers are shared for their types);
  - calls: an undefined symbol of one object file that another object file of
    the library defines (nm), so macros and inline wrappers are seen through.
A file may use files of its own line or of lines above it. Every violation is
printed as 'from -> to (what)'; exit 1 if there is any, or if a library file
matches no line (or several).

  check_layers.py --src SRC --layers layers.txt [--objs DIR] [--nm nm] [--reverse]

--objs is the CMake object directory of the library (tpx_obj.dir); without it
only includes are checked.
"""
import argparse
import os
import re
import subprocess
import sys

from abi_report import report

SOURCE_EXT = (".c", ".cu", ".h")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def read_layers(path):
    layers = []  # (name, [patterns])
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if line:
                layers.append((line[0], line[1:]))
    return layers


def matches(rel, pattern):
    if pattern.endswith("/"):
        return rel.startswith(pattern)
    if os.path.splitext(pattern)[1]:
        return rel == pattern
    stem = os.path.splitext(rel)[0]
    # 'engine/api_' names a family of files; 'engine/plan' one stem.
    return stem == pattern or (pattern.endswith("_") and stem.startswith(pattern))


def rank_of(rel, layers):
    hits = [i for i, (_, pats) in enumerate(layers) if any(matches(rel, p) for p in pats)]
    return hits


def library_files(src):
    out = []
    for root, _, files in os.walk(src):
        for name in files:
            rel = os.path.relpath(os.path.join(root, name), src)
            # The NIXL backend (C++) and the exported NCCL table sit above the
            # library and are not part of it.
            if rel.startswith(("nixl/", "plugin/")):
                continue
            if rel.endswith(SOURCE_EXT):
                out.append(rel)
    return sorted(out)


def resolve_include(src, rel, inc):
    for base in (os.path.dirname(rel), ""):
        cand = os.path.normpath(os.path.join(base, inc))
        if os.path.isfile(os.path.join(src, cand)):
            return cand
    return None


def object_symbols(objs, nm, src):
    """{source rel path: (defined set, undefined set)} from CMake's object dir."""
    table = {}
    for root, _, files in os.walk(objs):
        for name in files:
            if not name.endswith(".o"):
                continue
            path = os.path.join(root, name)
            rel = os.path.relpath(path, objs)
            # CMake names objects <dirs below the source root>/<file>.o
            rel = rel[len("src/"):] if rel.startswith("src/") else rel
            rel = rel[:-2]
            if not os.path.isfile(os.path.join(src, rel)):
                continue  # a stale object of a file since renamed or removed
            out = subprocess.run([nm, "-P", path], capture_output=True, text=True, check=True).stdout
            defined, undefined = set(), set()
            for line in out.splitlines():
                parts = line.split()
                if len(parts) < 2:
                    continue
                sym, kind = parts[0], parts[1]
                if kind == "U":
                    undefined.add(sym)
                elif kind in "TDBRVWGS":
                    defined.add(sym)
            table[rel] = (defined, undefined)
    return table


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--layers", required=True)
    ap.add_argument("--objs")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--reverse", action="store_true",
                    help="check against the order upside down (the check's own test: it must fail)")
    args = ap.parse_args()
    layers = read_layers(args.layers)
    if args.reverse:
        layers.reverse()
    files = library_files(args.src)
    problems = []
    rank = {}
    for rel in files:
        hits = rank_of(rel, layers)
        if len(hits) != 1:
            what = "no line" if not hits else "several lines: " + ", ".join(layers[i][0] for i in hits)
            problems.append(f"{rel}: matches {what} of layers.txt")
            continue
        rank[rel] = hits[0]

    def check(frm, to, what):
        if frm in rank and to in rank and rank[to] > rank[frm]:
            problems.append(f"{frm} -> {to} ({what}; {layers[rank[frm]][0]} is below {layers[rank[to]][0]})")

    for rel in files:
        with open(os.path.join(args.src, rel), encoding="utf-8", errors="replace") as f:
            text = f.read()
        for inc in INCLUDE_RE.findall(text):
            target = resolve_include(args.src, rel, inc)
            # Within a folder a header may be included for its types (the
            # engine's structs); between folders an include is a use.
            if target and target.split("/")[0] != rel.split("/")[0]:
                check(rel, target, f'#include "{inc}"')

    if args.objs:
        table = object_symbols(args.objs, args.nm, args.src)
        if not table:
            problems.append(f"{args.objs}: no object files")
        owner = {}
        for rel, (defined, _) in table.items():
            for sym in defined:
                owner.setdefault(sym, rel)
        for rel, (_, undefined) in sorted(table.items()):
            for sym in sorted(undefined):
                if sym in owner and owner[sym] != rel:
                    check(rel, owner[sym], f"calls {sym}")

    return report(problems, f"check_layers: {len(files)} files, {len(layers)} layers, no problems")


if __name__ == "__main__":
    sys.exit(main())
