#!/usr/bin/env python3
"""docs/API.md agrees with the headers and the settings table.

1. "Return values": every public `int` call whose header comment says it
   returns something other than 0 or a negative code ("1 when ...", an
   index, a count, a port, an ncclResult_t) is listed in API.md's table
   under "## Return values", and every call listed there is a public `int`
   call of include/tpx/.
2. The engine knobs table (| `field` | `TPX_...` | default | meaning |):
   each variable is a row of src/common/config.c's settings table, with the
   synonym config.c gives it and the field it fills; a range written
   "(A..B)" in the meaning is config.c's minimum..maximum; the numbers of
   the default are those of docs/CONFIG.md's default for the same variable
   (16 KiB = 16K), where CONFIG.md gives one with numbers.

  check_api_doc.py --root REPO [--selftest]
"""
import argparse
import glob
import os
import re
import sys

from abi_report import report, selftest_verdict

# a comment that announces a non-error, non-zero result
VALUE_RE = re.compile(r"\b1 when\b|GPU index|channels agreed|port actually bound|ncclResult_t values|"
                      r"data sockets|\breturns? (?:the|a) (?:count|number|index)\b", re.I)
VAR_ROW_RE = re.compile(r'^\s*\{"(TPX_[A-Z0-9_]+)",\s*(NULL|"[A-Z0-9_]+"),\s*(V_[A-Z]+),\s*F\((\w+)\),\s*'
                        r"([^,]+),\s*([^,]+),", re.M)


def int_calls(headers):
    """{name: comment text} of every `TPX_API int` call: the comment block just
    above it (up to the previous declaration) and one on the same line."""
    out = {}
    for text in headers:
        lines = text.split("\n")
        for i, line in enumerate(lines):
            m = re.match(r"TPX_API int (tpx_\w+)\(", line)
            if not m:
                continue
            comment = line.split("/*", 1)[1] if "/*" in line else ""
            j = i - 1
            block = []
            while j >= 0 and not lines[j].startswith("TPX_API") and lines[j].strip() and \
                    not lines[j].startswith("#") and not lines[j].startswith("}"):
                block.insert(0, lines[j])
                j -= 1
            out[m.group(1)] = " ".join(block) + " " + comment
    return out


def section(md, title):
    m = re.search(r"^## " + re.escape(title) + r"\s*\n(.*?)(?=^## )", md, re.M | re.S)
    return m.group(1) if m else ""


def size_val(tok):
    m = re.fullmatch(r"(\d+)\s*(K|KiB|M|MiB|G|GiB)?", tok)
    if not m:
        return tok
    mult = {None: 1, "K": 1 << 10, "KiB": 1 << 10, "M": 1 << 20, "MiB": 1 << 20, "G": 1 << 30, "GiB": 1 << 30}
    return int(m.group(1)) * mult[m.group(2)]


def numbers(text):
    return [size_val(t.strip()) for t in re.findall(r"\d+\s*(?:KiB|MiB|GiB|K\b|M\b|G\b)?", text)]


def config_rows(config_c):
    start = config_c.index("static const struct var vars[] = {")
    end = config_c.index("};", start)
    rows = {}
    for name, syn, kind, field, lo, hi in VAR_ROW_RE.findall(config_c[start:end]):
        rows[name] = {"syn": None if syn == "NULL" else syn.strip('"'), "kind": kind, "field": field,
                      "lo": lo.strip(), "hi": hi.strip()}
    return rows


def config_md_defaults(config_md):
    out = {}
    for line in config_md.split("\n"):
        cells = [c.strip() for c in line.split("|")]
        if len(cells) > 4 and re.fullmatch(r"`TPX_[A-Z0-9_]+`", cells[1]):
            out[cells[1].strip("`")] = cells[3]
    return out


def c_int(expr):
    expr = expr.replace("LL", "").replace("ll", "")
    if not re.fullmatch(r"[0-9<> ()]+", expr):
        return None
    return eval(expr)  # digits and shifts only


def check(headers, api_md, config_c, config_md):
    problems = []
    calls = int_calls(headers)
    listed = set(re.findall(r"`(tpx_\w+)`", "\n".join(
        line for line in section(api_md, "Return values").split("\n") if line.startswith("|"))))
    if not listed:
        problems.append('docs/API.md: no "## Return values" table')
    for name, comment in sorted(calls.items()):
        if VALUE_RE.search(comment) and name not in listed:
            problems.append(f"docs/API.md: {name} returns a value (header: '{comment.strip()[:80]}') "
                            f"but is not under Return values")
    for name in sorted(listed - set(calls)):
        problems.append(f"docs/API.md: Return values lists {name}, which is no public int call")

    rows = config_rows(config_c)
    docdef = config_md_defaults(config_md)
    knobs = 0
    for line in api_md.split("\n"):
        cells = [c.strip() for c in line.split("|")]
        if len(cells) < 6 or not re.search(r"`TPX_[A-Z0-9_]+`", cells[2]) or not cells[1].startswith("`"):
            continue
        knobs += 1
        fields = re.findall(r"`(\w+)`", cells[1])
        vars_ = re.findall(r"`(TPX_[A-Z0-9_]+)`", cells[2])
        syns = re.findall(r"\(`([A-Z0-9_]+)`\)", cells[2])
        for k, var in enumerate(vars_):
            r = rows.get(var)
            if r is None:
                problems.append(f"docs/API.md: {var} is no setting of src/common/config.c")
                continue
            if fields and k < len(fields) and fields[k] != r["field"]:
                problems.append(f"docs/API.md: {var} fills {r['field']}, the table says {fields[k]}")
            if r["syn"] and r["syn"] not in syns:
                problems.append(f"docs/API.md: {var}'s synonym {r['syn']} is not named")
            for lo, hi in re.findall(r"\((\d+)\.\.(\d+)\)", cells[4]):
                want = (c_int(r["lo"]), c_int(r["hi"]))
                if (int(lo), int(hi)) != want:
                    problems.append(f"docs/API.md: {var} range {lo}..{hi}, config.c says {want[0]}..{want[1]}")
            if len(vars_) == 1:
                ref = docdef.get(var, "")
                if re.search(r"\d", ref) and numbers(ref) != numbers(cells[3]):
                    problems.append(f"docs/API.md: {var} default '{cells[3]}', docs/CONFIG.md says '{ref}'")
            elif k < len(numbers(cells[3])):
                ref = docdef.get(var, "")
                if re.search(r"\d", ref) and numbers(ref)[:1] != numbers(cells[3])[k:k + 1]:
                    problems.append(f"docs/API.md: {var} default '{cells[3]}', docs/CONFIG.md says '{ref}'")
    if knobs == 0:
        problems.append("docs/API.md: no engine knobs table found")
    return problems, knobs, len(listed)


def selftest(headers, api_md, config_c, config_md):
    md = api_md.replace("| `tpx_endpoint_port` |", "| `tpx_endpoint_portx` |", 1)
    md = md.replace("(7..12)", "(7..11)", 1)
    md = re.sub(r"(\| `num_channels` \| [^|]*\| )[^|]*\|", r"\g<1>4 |", md, count=1)
    h = headers + ["/* 1 when the moon is full. */\nTPX_API int tpx_moon(void);\n"]
    found, _, _ = check(h, md, config_c, config_md)
    want = ["tpx_endpoint_port returns a value", "lists tpx_endpoint_portx", "tpx_moon returns a value",
            "TPX_NET_ABI range 7..11, config.c says 7..12", "TPX_NUM_CHANNELS default '4'"]
    return selftest_verdict(found, want)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    headers = []
    for h in sorted(glob.glob(os.path.join(a.root, "include", "tpx", "*.h"))):
        with open(h, encoding="utf-8") as f:
            headers.append(f.read())
    with open(f"{a.root}/docs/API.md", encoding="utf-8") as f:
        api_md = f.read()
    with open(f"{a.root}/src/common/config.c", encoding="utf-8") as f:
        config_c = f.read()
    with open(f"{a.root}/docs/CONFIG.md", encoding="utf-8") as f:
        config_md = f.read()
    if a.selftest:
        return selftest(headers, api_md, config_c, config_md)
    problems, knobs, listed = check(headers, api_md, config_c, config_md)
    return report(problems, f"docs/API.md agrees with the headers ({listed} calls returning values) and "
                            f"the settings table ({knobs} knob rows)")


if __name__ == "__main__":
    sys.exit(main())
