#!/usr/bin/env python3
"""The reference pages (docs/*.md) stay reference: each under its size, and
none carries a record of runs. docs/notes/ holds the records.

A page fails when it is over its limit (bytes, and lines where LIMITS names
them), or when a table row is a dated run row: a row with a date
(YYYY-MM-DD) in a table without a "date" column, or, in a table with one
(docs/BENCHMARKS.md: one row per question, the date its figure was taken),
a row that also names a time of day or a commit (what runs are told apart
by). A run's record goes to docs/notes/, the page keeps the state.

  check_docs.py --root REPO [--selftest]

--selftest checks the checker against changed copies of the pages.
"""
import argparse
import glob
import os
import re
import sys

from abi_report import report, selftest_verdict

MAX_BYTES = 45000                     # every reference page
LIMITS = {                            # page: (bytes, lines, characters per line)
    "BENCHMARKS.md": (8000, 60, 220),  # one screen: one row per question
    "A3HIGH.md": (MAX_BYTES, 200, None),  # the runbook, nothing else
}
DATE_RE = re.compile(r"\b20\d\d-[01]\d-[0-3]\d\b")
TIME_RE = re.compile(r"\b[0-2]\d:[0-5]\d\b")
COMMIT_RE = re.compile(r"\b(?=[0-9a-f]*\d)(?=[0-9a-f]*[a-f])[0-9a-f]{7,12}\b")


def cells(line):
    return [c.strip().lower() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]]


def check_page(name, text):
    problems = []
    nbytes, nlines, width = LIMITS.get(name, (MAX_BYTES, None, None))
    lines = text.split("\n")
    if len(text.encode()) > nbytes:
        problems.append(f"docs/{name}: {len(text.encode())} bytes, over its {nbytes}")
    if nlines and len(lines) - (lines[-1] == "") > nlines:
        problems.append(f"docs/{name}: {len(lines) - 1} lines, over its {nlines}")
    header = None
    for no, line in enumerate(lines, 1):
        if width and len(line) > width:
            problems.append(f"docs/{name}:{no}: {len(line)} characters, over its {width}")
        if not line.startswith("|"):
            header = None
            continue
        if header is None:
            header = cells(line)
            continue
        if not DATE_RE.search(line):
            continue
        if "date" not in header:
            problems.append(f"docs/{name}:{no}: a dated run row (a date in a table without a date column)")
        elif TIME_RE.search(line) or COMMIT_RE.search(line):
            problems.append(f"docs/{name}:{no}: a dated run row (a time of day or a commit beside the date)")
    return problems


def check(pages):
    problems = []
    for name in sorted(pages):
        problems += check_page(name, pages[name])
    return problems


def selftest(pages):
    p = dict(pages)
    p["RELIABILITY.md"] += "\n| Run | Passed |\n|---|---|\n| 2026-11-28, `scripts/ci-repeat.sh 1` | 1 |\n"
    p["BENCHMARKS.md"] = p["BENCHMARKS.md"].replace(
        "| 2026-11-27 |", "| 2026-11-27 13:14 |", 1).replace("| 2026-11-24 |", "| 2026-11-24 2ac9891 |", 1)
    p["BENCHMARKS.md"] += "\n" + "x" * 300 + "\n"
    p["A3HIGH.md"] += "story\n" * 20
    p["SECURITY.md"] += "y" * MAX_BYTES
    found = check(p)
    want = ["docs/RELIABILITY.md:", "a date in a table without a date column",
            "a time of day or a commit beside the date", "characters, over its 220",
            "docs/A3HIGH.md: 2", "lines, over its 200", "docs/SECURITY.md:", "bytes, over its 45000"]
    clean = check(pages)
    if clean:
        print("selftest: the pages as they are fail:", *clean, sep="\n  ")
    return selftest_verdict(found, want) or (1 if clean else 0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    pages = {}
    for path in glob.glob(os.path.join(a.root, "docs", "*.md")):
        with open(path, encoding="utf-8") as f:
            pages[os.path.basename(path)] = f.read()
    if a.selftest:
        return selftest(pages)
    return report(check(pages), f"{len(pages)} reference pages within their limits, no dated run rows")


if __name__ == "__main__":
    sys.exit(main())
