#!/usr/bin/env python3
"""Tests of a ctest build folder whose last run took more than a third of
their TIMEOUT (scripts/check-summary.sh prints them after `make check`):
the ones a loaded machine would push over their limit first.

  ctest-slow.py BUILD_DIR [--fraction 0.333]

Reads the times of BUILD_DIR/Testing/Temporary/LastTest.log (the last
ctest run there) and the limits from the CTestTestfile.cmake files (not
through ctest itself: any ctest run there rewrites that log). Prints one
line per test over the fraction, slowest share first; exit status 0 either
way (a report, not a verdict), 2 when the folder has no test log.
"""
import os
import re
import sys


def main():
    args = sys.argv[1:]
    if not args:
        print(__doc__, file=sys.stderr)
        return 2
    build = args[0]
    frac = float(args[args.index("--fraction") + 1]) if "--fraction" in args else 1 / 3
    try:
        with open(f"{build}/Testing/Temporary/LastTest.log", encoding="utf-8", errors="replace") as f:
            log = f.read()
    except OSError:
        return 2
    times, name = {}, None
    for line in log.split("\n"):
        m = re.match(r"^\d+/\d+ Test(?:ing)?: (\S+)", line)
        if m:
            name = m.group(1)
        m = re.match(r"^Test time =\s+([0-9.]+) sec", line)
        if m and name:
            times[name] = float(m.group(1))
    limits = {}
    for root, _, files in os.walk(build):
        if "CTestTestfile.cmake" in files:
            with open(os.path.join(root, "CTestTestfile.cmake"), encoding="utf-8", errors="replace") as f:
                for m in re.finditer(r'^set_tests_properties\(\[?=*\[?(\S+?)\]?=*\]? PROPERTIES (.*)\)\s*$',
                                     f.read(), re.M):
                    t = re.search(r'\bTIMEOUT "([0-9.]+)"', m.group(2))
                    if t:
                        limits[m.group(1)] = float(t.group(1))
    slow = []
    for n, s in times.items():
        lim = limits.get(n, 1500.0)  # ctest's default
        if s > frac * lim:
            slow.append((s / lim, n, s, lim))
    for share, n, s, lim in sorted(slow, reverse=True):
        print(f"  {n}: {s:.1f} s of its {lim:.0f} s limit ({100 * share:.0f}%)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
