#!/usr/bin/env python3
"""Every struct, union and enum type a header of src/ defines (one that more
than one file can see) carries the project's prefix: `tpx_` for what the
public API names, `tpx__` for the rest (docs/ARCHITECTURE.md, "Conventions").
File-local types in .c files keep plain names. The ncclNet ABI's own types
(`ncclnet_*` in src/ncclnet/) mirror NCCL's headers and keep its names.

usage: check_type_names.py --src DIR [--selftest]
Exit 0 when every type is named so; 1 listing the others.
"""
import argparse
import os
import re
import shutil
import sys
import tempfile

from abi_report import report, selftest_verdict

DEF = re.compile(r"^\s*(?:typedef\s+)?(struct|union|enum)\s+([A-Za-z_]\w*)\s*\{", re.M)
ABI_MIRROR = ("ncclnet_",)


def offenders(src):
    bad = []
    for root, _, files in os.walk(src):
        for name in sorted(files):
            if not name.endswith(".h"):
                continue
            path = os.path.join(root, name)
            with open(path, encoding="utf-8") as f:
                text = f.read()
            for m in DEF.finditer(text):
                kind, tag = m.group(1), m.group(2)
                if tag.startswith("tpx_") or tag.startswith(ABI_MIRROR):
                    continue
                line = text.count("\n", 0, m.start()) + 1
                bad.append(f"{os.path.relpath(path, src)}:{line}: {kind} {tag}: a type shared through a header "
                           "is named tpx_ or tpx__ (docs/ARCHITECTURE.md, \"Conventions\")")
    return bad


def selftest(src):
    with tempfile.TemporaryDirectory(prefix="check_type_names.") as tmp:
        copy = os.path.join(tmp, "src")
        shutil.copytree(src, copy)
        if offenders(copy):
            print("selftest: the tree itself has offenders")
            return 1
        planted = {"engine/core.h": "struct window {\n  int x;\n};\n",
                   "sock/sock.h": "typedef enum peer_state { A } ps_t;\n"}
        for rel, text in planted.items():
            with open(os.path.join(copy, rel), "a", encoding="utf-8") as f:
                f.write("\n" + text)
        found = offenders(copy)
    want = ["struct window", "enum peer_state"]
    if len(found) != len(want):
        print("selftest: planted", want, "found", found)
        return 1
    return selftest_verdict(found, want)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--src", required=True)
    ap.add_argument("--selftest", action="store_true")
    args = ap.parse_args()
    if args.selftest:
        return selftest(args.src)
    return report(offenders(args.src), "every type a header of src/ defines carries the prefix")


if __name__ == "__main__":
    sys.exit(main())
