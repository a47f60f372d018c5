#!/usr/bin/env python3
"""No internal path returns a code the public API does not document.

  - src/ returns named codes only: no `return -1;`, `return -N` or
    `return (-N)` (a bare -1 reads as TPX_ECUDA once it escapes; a value
    that is not an error, such as "no GPU", gets a named constant);
  - every code of include/tpx/error.h has a comment there, a text in
    src/common/error.c and a row in docs/API.md's "Errors" table, and that
    table names no other code.

  check_errors.py --root REPO [--selftest]

--selftest checks the checker: a copy of the tree with one bare return
added and one code dropped from the table must fail.
Exit 1 listing every finding.
"""
import argparse
import os
import re
import shutil
import sys
import tempfile

from abi_report import report, selftest_verdict

SOURCE_EXT = (".c", ".h", ".cu", ".cpp")
BARE_RE = re.compile(r"\breturn\s*\(?\s*-\s*[0-9]")
ENUM_RE = re.compile(r"^\s*(TPX_E[A-Z]+)\s*=\s*(-?\d+)\s*,?\s*(/\*.*)?$", re.M)
ROW_RE = re.compile(r"^\|\s*`(TPX_E[A-Z]+)`\s*\|\s*(-?\d+)\s*\|([^|]*)\|", re.M)


def strip_comments(text):
    text = re.sub(r"/\*.*?\*/", lambda m: "\n" * m.group(0).count("\n"), text, flags=re.S)
    return re.sub(r"//[^\n]*", "", text)


def bare_returns(src):
    found = []
    for d, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith(SOURCE_EXT):
                continue
            path = os.path.join(d, name)
            with open(path, encoding="utf-8", errors="replace") as f:
                text = strip_comments(f.read())
            for n, line in enumerate(text.split("\n"), 1):
                if BARE_RE.search(line):
                    found.append(f"{os.path.relpath(path, os.path.dirname(src))}:{n}: bare negative return: "
                                 f"{line.strip()}")
    return found


def codes(root):
    problems = []
    with open(os.path.join(root, "include/tpx/error.h"), encoding="utf-8") as f:
        header = f.read()
    enum = {}
    for name, value, comment in ENUM_RE.findall(header):
        if name == "TPX_EUNKNOWN":
            continue  # the sentinel
        enum[name] = int(value)
        if not comment:
            problems.append(f"include/tpx/error.h: {name} has no comment saying what it means")
    if not enum:
        problems.append("include/tpx/error.h: no TPX_E* codes found")
    with open(os.path.join(root, "src/common/error.c"), encoding="utf-8") as f:
        texts = {int(i) for i in re.findall(r"^\s*\[(\d+)\]\s*=\s*\"", f.read(), re.M)}
    for name, value in enum.items():
        if -value not in texts:
            problems.append(f"src/common/error.c: {name} ({value}) has no tpx_strerror text")
    with open(os.path.join(root, "docs/API.md"), encoding="utf-8") as f:
        doc = f.read()
    rows = {name: (int(value), meaning.strip()) for name, value, meaning in ROW_RE.findall(doc)}
    for name, value in enum.items():
        if name not in rows:
            problems.append(f"docs/API.md: {name} ({value}) is missing from the Errors table")
        elif rows[name][0] != value or not rows[name][1]:
            problems.append(f"docs/API.md: {name} is listed as {rows[name][0]} or without a meaning "
                            f"(include/tpx/error.h: {value})")
    for name in rows:
        if name not in enum:
            problems.append(f"docs/API.md: the Errors table lists {name}, which include/tpx/error.h lacks")
    return problems


def check(root):
    return bare_returns(os.path.join(root, "src")) + codes(root)


def selftest(root):
    with tempfile.TemporaryDirectory() as tmp:
        for part in ("src", "include", "docs"):
            shutil.copytree(os.path.join(root, part), os.path.join(tmp, part))
        with open(os.path.join(tmp, "src/common/error.c"), "a", encoding="utf-8") as f:
            f.write("\nstatic int selftest_bad(void) { return -1; }\n")
        api = os.path.join(tmp, "docs/API.md")
        with open(api, encoding="utf-8") as f:
            text = f.read()
        with open(api, "w", encoding="utf-8") as f:
            f.write(re.sub(r"^\|\s*`TPX_EPROTO`.*\n", "", text, count=1, flags=re.M))
        found = check(tmp)
    want = ["bare negative return", "TPX_EPROTO (-16) is missing"]
    return selftest_verdict(found, want)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    if a.selftest:
        return selftest(a.root)
    problems = check(a.root)
    return report(problems, "error codes: named everywhere in src/, each documented")


if __name__ == "__main__":
    sys.exit(main())
