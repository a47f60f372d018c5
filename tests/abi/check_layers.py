#!/usr/bin/env python3
"""Holds src/ and include/tpx/ to the order of tests/abi/layers.txt
(docs/ARCHITECTURE.md).

Three kinds of use are checked, each against the line order of layers.txt:
  - includes: every quoted #include of a header of src/ or include/tpx/, in
    its own folder or another (a header is a use of its line, whatever the
    folder);
  - calls: an undefined symbol of one object file that another object file of
    the library defines (nm), so macros and out-of-line wrappers are seen
    through;
  - inline helpers: a call of a `static inline` function defined in another
    file's header counts as a call of that header's line (the compiler copies
    the body into the caller, so nm cannot see it).
A file may use files of its own line or of lines above it, and the files of
one line may not use each other round a circle, by calls or includes (a .c
and its .h count as one file). Every violation is printed as 'from -> to (what)' or 'a circle of
files: ...'; exit 1 if there is any, if a library file matches no line (or
several), or if an entry of the allow-list is no longer needed or the list
grew past its bound.

The allow-list (--allow, layers_allow.txt) names the upward edges, and the
calls that close a circle, that stand for now, one per line: 'from to kind
reason...', kind one of include, call, inline. It can only shrink: an entry
that matches nothing fails the check.

  check_layers.py --src SRC --include INC --layers layers.txt [--allow FILE]
                  [--objs DIR] [--nm nm] [--reverse | --selftest]

--objs is the CMake object directory of the library (tpx_obj.dir); without it
calls are not checked. --selftest plants one violation of each kind in a
scratch copy (a cross-folder call, an upward include inside a folder, a
public header, an inline helper, a circle inside a line) and fails unless
each is reported.
"""
import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile

from abi_report import report, selftest_verdict

SOURCE_EXT = (".c", ".cu", ".h")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)
INLINE_DEF_RE = re.compile(
    r"\bstatic\s+(?:__)?inline(?:__)?\b[^;{}()]*?\b([A-Za-z_]\w*)\s*\([^;{}]*\)\s*\{")
CALL_RE = re.compile(r"\b([A-Za-z_]\w*)\s*\(")
COMMENT_RE = re.compile(r'/\*.*?\*/|//[^\n]*|"(?:\\.|[^"\\\n])*"|\'(?:\\.|[^\'\\\n])*\'', re.S)
ALLOW_MAX = 0  # the allow-list's bound: lower it as edges are fixed, never raise it
KINDS = ("include", "call", "inline")


def read_layers(path):
    layers = []  # (name, [patterns])
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if line:
                layers.append((line[0], line[1:]))
    return layers


def read_allow(path):
    """{(from, to, kind): reason} and the problems of the file itself."""
    allow, problems = {}, []
    if not path:
        return allow, problems
    with open(path, encoding="utf-8") as f:
        for no, line in enumerate(f, 1):
            line = line.split("#", 1)[0].strip()
            if not line:
                continue
            parts = line.split(None, 3)
            if len(parts) < 4 or parts[2] not in KINDS:
                problems.append(f"{path}:{no}: not 'from to {'|'.join(KINDS)} reason'")
                continue
            allow[(parts[0], parts[1], parts[2])] = parts[3]
    if len(allow) > ALLOW_MAX:
        problems.append(f"{path}: {len(allow)} entries, over its bound of {ALLOW_MAX}: "
                        "fix an edge instead")
    return allow, problems


def matches(rel, pattern):
    if pattern.endswith("/"):
        return rel.startswith(pattern)
    if os.path.splitext(pattern)[1]:
        return rel == pattern
    stem = os.path.splitext(rel)[0]
    # 'engine/api_' names a family of files; 'engine/plan' one stem.
    return stem == pattern or (pattern.endswith("_") and stem.startswith(pattern))


def rank_of(rel, layers):
    return [i for i, (_, pats) in enumerate(layers) if any(matches(rel, p) for p in pats)]


def library_files(src, inc):
    """Paths as the code includes them: src/ relative, public headers as tpx/x.h."""
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
    if inc:
        for name in os.listdir(os.path.join(inc, "tpx")):
            if name.endswith(".h"):
                out.append("tpx/" + name)
    return sorted(out)


def path_of(src, inc, rel):
    return os.path.join(inc, rel) if rel.startswith("tpx/") else os.path.join(src, rel)


def resolve_include(src, inc, rel, name):
    bases = [(src, os.path.dirname(rel)), (src, "")] + ([(inc, "")] if inc else [])
    if rel.startswith("tpx/"):  # a public header reaching into src/ is a use too
        bases = [(inc, os.path.dirname(rel)), (inc, ""), (src, "")]
    for root, base in bases:
        cand = os.path.normpath(os.path.join(base, name))
        if os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def code_of(text):
    """The text without comments and string literals (their lines kept)."""
    return COMMENT_RE.sub(lambda m: "\n" * m.group(0).count("\n"), text)


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


def check_tree(src, inc, layers, allow, table):
    """The problems of the tree against the order and the allow-list."""
    files = library_files(src, inc)
    problems, rank, used = [], {}, set()
    for rel in files:
        hits = rank_of(rel, layers)
        if len(hits) != 1:
            what = "no line" if not hits else "several lines: " + ", ".join(layers[i][0] for i in hits)
            problems.append(f"{rel}: matches {what} of layers.txt")
            continue
        rank[rel] = hits[0]

    side = {}  # calls between files of one line: (from stem, to stem) -> (from, to, kind, what)

    def check(frm, to, kind, what):
        if frm not in rank or to not in rank:
            return
        if rank[to] == rank[frm] and stem(frm) != stem(to):
            side.setdefault((stem(frm), stem(to)), (frm, to, kind, what))
        elif rank[to] > rank[frm]:
            if (frm, to, kind) in allow:
                used.add((frm, to, kind))
                return
            problems.append(f"{frm} -> {to} ({what}; {layers[rank[frm]][0]} is below {layers[rank[to]][0]})")

    texts, inlines = {}, {}  # inline helper name -> the header defining it
    for rel in files:
        with open(path_of(src, inc, rel), encoding="utf-8", errors="replace") as f:
            texts[rel] = f.read()
        if rel.endswith(".h"):
            for name in INLINE_DEF_RE.findall(code_of(texts[rel])):
                inlines.setdefault(name, rel)
    for rel in files:
        for name in INCLUDE_RE.findall(texts[rel]):
            target = resolve_include(src, inc, rel, name)
            if target and target != rel:
                check(rel, target, "include", f'#include "{name}"')
        own = set(INLINE_DEF_RE.findall(code_of(texts[rel]))) if rel.endswith(".h") else set()
        for name in sorted(set(CALL_RE.findall(code_of(texts[rel])))):
            if name in inlines and name not in own and inlines[name] != rel:
                check(rel, inlines[name], "inline", f"calls inline {name}")

    if table is not None:
        owner = {}
        for rel, (defined, _) in table.items():
            for sym in defined:
                owner.setdefault(sym, rel)
        for rel, (_, undefined) in sorted(table.items()):
            for sym in sorted(undefined):
                if sym in owner and owner[sym] != rel:
                    check(rel, owner[sym], "call", f"calls {sym}")
    problems += circles(side, allow, used)
    for key in sorted(set(allow) - used):
        problems.append(f"allow-list: '{' '.join(key)}' is no longer needed: remove it")
    return problems, len(files)


def stem(rel):
    return os.path.splitext(rel)[0]


def circles(side, allow, used):
    """Files of one line that call each other round a circle (a .c and its .h
    are one file): each circle once, naming its calls, unless an edge of it is
    in the allow-list (which breaks it there)."""
    edges = {}
    for (a, b), (frm, to, kind, what) in side.items():
        if (frm, to, kind) in allow:
            used.add((frm, to, kind))
        else:
            edges.setdefault(a, set()).add(b)
    index, low, stack, on, out, n = {}, {}, [], set(), [], [0]

    def visit(v):  # Tarjan's strongly connected components
        index[v] = low[v] = n[0]
        n[0] += 1
        stack.append(v)
        on.add(v)
        for w in sorted(edges.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    problems = []
    for comp in out:
        calls = [f"{side[(a, b)][0]} -> {side[(a, b)][1]} ({side[(a, b)][3]})"
                 for a in comp for b in comp if (a, b) in side and b in edges.get(a, ())]
        problems.append(f"a circle of files: {', '.join(comp)}: " + "; ".join(calls))
    return problems


def selftest(args, layers, allow, table):
    """Each kind of violation planted in a scratch copy must be reported. The
    files are chosen from the tree as it is (the lowest and highest of the
    order), so the test follows the code as it moves."""
    files = library_files(args.src, args.include)
    rank = {f: h[0] for f in files for h in [rank_of(f, layers)] if len(h) == 1}
    srcs = [f for f in files if f in rank and not f.startswith("tpx/")]
    pubs = [f for f in files if f in rank and f.startswith("tpx/")]
    by_rank = lambda f: (rank[f], f)  # noqa: E731
    low_c = min((f for f in srcs if f.endswith(".c")), key=by_rank)
    top_h = max((f for f in srcs if f.endswith(".h")), key=by_rank)
    # Inside one folder: its lowest .c including its highest header.
    ups = [(a, b) for a in srcs if a.endswith(".c") for b in srcs
           if b.endswith(".h") and os.path.dirname(a) == os.path.dirname(b) and rank[b] > rank[a]]
    up_from, up_to = min(ups, key=lambda p: (rank[p[0]] - rank[p[1]], p))
    helpers = inline_helpers(args.src, args.include)
    helper = max(sorted(helpers), key=lambda n: rank.get(helpers[n], -1))
    want = [f'{up_from} -> {up_to} (#include "{os.path.basename(up_to)}"',
            f'{min(pubs, key=by_rank)} -> {top_h} (#include "{top_h}"',
            f'{low_c} -> {max(pubs, key=by_rank)} (#include "{max(pubs, key=by_rank)}"',
            f"{low_c} -> {helpers[helper]} (calls inline {helper}"]
    scratch = tempfile.mkdtemp(prefix="check_layers.")
    try:
        src, inc = os.path.join(scratch, "src"), os.path.join(scratch, "include")
        shutil.copytree(args.src, src)
        shutil.copytree(args.include, inc)

        def plant(rel, line):
            with open(path_of(src, inc, rel), "a", encoding="utf-8") as f:
                f.write("\n" + line + "\n")
        plant(up_from, f'#include "{os.path.basename(up_to)}"')
        # A public header using a private one, and a low file a high public header.
        plant(min(pubs, key=by_rank), f'#include "{top_h}"')
        plant(low_c, f'#include "{max(pubs, key=by_rank)}"')
        # An inline helper of the highest header that has one, called from the bottom.
        plant(low_c, f"static void planted(void) {{ {helper}(0); }}")
        if table is not None:
            table = dict(table)
            objs = [f for f in table if f in rank]
            # A cross-folder call: the bottom object calling the top one.
            frm = min(objs, key=by_rank)
            to = max((f for f in objs if any(s.startswith("tpx") for s in table[f][0])), key=by_rank)
            callee = sorted(s for s in table[to][0] if s.startswith("tpx"))[0]
            table[frm] = (table[frm][0], table[frm][1] | {callee})
            want.append(f"{frm} -> {to} (calls {callee}")
            # A circle inside one line: a call of one line's files turned back.
            owner = {s: f for f in sorted(objs) for s in table[f][0]}
            back = sorted((a, owner[s]) for a in objs for s in table[a][1]
                          if s in owner and owner[s] != a and rank[owner[s]] == rank[a]
                          and stem(owner[s]) != stem(a))
            if back:
                a_, b_ = back[0]
                sym = sorted(s for s in table[a_][0] if s.startswith("tpx"))[0]
                table[b_] = (table[b_][0], table[b_][1] | {sym})
                want.append(f"{b_} -> {a_} (calls {sym})")
            # The same turned back by an include: a file of one line that the
            # other calls including the caller's header.
            inc_back = [(a, b) for a, b in back if stem(a) + ".h" in rank and b.endswith(".c")
                        and (a, b) != back[0]]
            if inc_back:
                a2, b2 = inc_back[0]
                plant(b2, f'#include "{stem(a2)}.h"')
                want.append(f'{b2} -> {stem(a2)}.h (#include "{stem(a2)}.h")')
        found, _ = check_tree(src, inc, layers, allow, table)
    finally:
        shutil.rmtree(scratch)
    return selftest_verdict(found, want)


def inline_helpers(src, inc):
    out = {}
    for rel in library_files(src, inc):
        if rel.endswith(".h"):
            with open(path_of(src, inc, rel), encoding="utf-8", errors="replace") as f:
                for name in INLINE_DEF_RE.findall(code_of(f.read())):
                    out.setdefault(name, rel)
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--include", help="the public headers' root (include/, holding tpx/)")
    ap.add_argument("--layers", required=True)
    ap.add_argument("--allow", help="the upward edges that stand for now (layers_allow.txt)")
    ap.add_argument("--objs")
    ap.add_argument("--nm", default="nm")
    ap.add_argument("--reverse", action="store_true",
                    help="check against the order upside down (the check's own test: it must fail)")
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    layers = read_layers(args.layers)
    allow, problems = read_allow(args.allow)
    table = None
    if args.objs:
        table = object_symbols(args.objs, args.nm, args.src)
        if not table:
            problems.append(f"{args.objs}: no object files")
    if args.selftest:
        return selftest(args, layers, allow, table) or report(problems, "check_layers: selftest passed")
    if args.reverse:
        layers.reverse()
    found, nfiles = check_tree(args.src, args.include, layers, allow, table)
    return report(problems + found, f"check_layers: {nfiles} files, {len(layers)} layers, "
                                    f"{len(allow)} allowed edges, no problems")


if __name__ == "__main__":
    sys.exit(main())
