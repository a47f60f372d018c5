#!/usr/bin/env python3
"""docs/CONFIG.md and the settings table of src/common/config.c agree.

Every row of `vars[]` in config.c carries a tier (T_EVERYDAY, T_TUNING,
T_LIMITS, T_TESTING); CONFIG.md has one section per tier ("## Everyday",
"## Tuning", "## Limits", "## Testing ..."), each with a table whose rows
start with the variable (| `TPX_...` |), and a "## Retired" section.
Fails when a setting of the table is missing from its tier's section, is
documented under another tier or twice, has no tier, or is listed as
retired; when CONFIG.md documents a TPX_* setting the table lacks; or when
the "Retired" section and config.c's `retired[]` list differ.

  check_config_doc.py --root REPO [--selftest]

--selftest checks the checker against a changed copy of both files.
"""
import argparse
import re
import sys

from abi_report import report, selftest_verdict

ROW_RE = re.compile(r'^\s*\{"(TPX_[A-Z0-9_]+)",.*?(?:,\s*(T_[A-Z]+))?\s*\},\s*$', re.M)
SECTIONS = {"everyday": "T_EVERYDAY", "tuning": "T_TUNING", "limits": "T_LIMITS", "testing": "T_TESTING",
            "retired": "retired"}
DOC_ROW_RE = re.compile(r"^\|\s*`(TPX_[A-Z0-9_]+)`\s*\|")


def table_rows(config_c):
    start = config_c.index("static const struct var vars[] = {")
    end = config_c.index("};", start)
    return [(name, tier or "T_NONE") for name, tier in ROW_RE.findall(config_c[start:end])]


def retired_names(config_c):
    m = re.search(r"retired\[\]\s*=\s*\{([^}]*)\}", config_c)
    return set(re.findall(r'"(TPX_[A-Z0-9_]+)"', m.group(1))) if m else set()


def doc_rows(config_md):
    rows, section = [], None
    for line in config_md.split("\n"):
        if line.startswith("## "):
            word = line[3:].strip().split()[0].lower() if line[3:].strip() else ""
            section = SECTIONS.get(word)  # other sections (the plugin's environment): not ours
            continue
        m = DOC_ROW_RE.match(line)
        if m and section:
            rows.append((m.group(1), section))
    return rows


def check(config_c, config_md):
    problems = []
    table = table_rows(config_c)
    if not table:
        return ["src/common/config.c: no rows found in vars[]"]
    doc = doc_rows(config_md)
    where = {}
    for name, section in doc:
        where.setdefault(name, []).append(section)
    for name, tier in table:
        if tier not in SECTIONS.values():
            problems.append(f"config.c: {name} has no tier (add T_EVERYDAY, T_TUNING, T_LIMITS or T_TESTING)")
            continue
        got = where.get(name, [])
        if not got:
            problems.append(f"docs/CONFIG.md: {name} ({tier}) is not documented")
        elif len(got) > 1:
            problems.append(f"docs/CONFIG.md: {name} is documented {len(got)} times ({', '.join(got)})")
        elif got[0] != tier:
            problems.append(f"docs/CONFIG.md: {name} is under {got[0]}, config.c says {tier}")
    names = {n for n, _ in table}
    for name, section in doc:
        if name not in names and section != "retired":
            problems.append(f"docs/CONFIG.md: {name} is documented but config.c has no such setting")
    doc_retired = {n for n, s in doc if s == "retired"}
    for name in sorted(doc_retired ^ retired_names(config_c)):
        side = "docs/CONFIG.md" if name in retired_names(config_c) else "config.c retired[]"
        problems.append(f"{side}: lacks the retired setting {name}")
    for section in ("T_EVERYDAY", "T_TUNING", "T_LIMITS", "T_TESTING"):
        if section not in {s for _, s in doc}:
            problems.append(f"docs/CONFIG.md: no section for {section}")
    return problems


def selftest(config_c, config_md):
    c = config_c.replace("F(window), 1, 1024, T_TUNING}", "F(window), 1, 1024, T_LIMITS}", 1)
    c = c.replace(", T_EVERYDAY},", "},", 1)  # the first everyday row loses its tier
    md = re.sub(r"^\| `TPX_NTHREADS` .*\n", "", config_md, count=1, flags=re.M)
    c = c.replace('retired[] = {"', 'retired[] = {"TPX_NOT_A_SETTING", "', 1)
    md = re.sub(r"^\| `TPX_STAGING_COPY` .*\n", "", md, count=1, flags=re.M)
    md = md.replace("\n## Tuning\n", "\n## Tuning\n\n| `TPX_BOGUS_KNOB` | | 1 | nothing |\n", 1)
    found = check(c, md)
    want = ["TPX_WINDOW is under T_TUNING, config.c says T_LIMITS", "TPX_LOG has no tier",
            "TPX_NTHREADS (T_TUNING) is not documented", "TPX_BOGUS_KNOB is documented but",
            "docs/CONFIG.md: lacks the retired setting TPX_NOT_A_SETTING",
            "docs/CONFIG.md: lacks the retired setting TPX_STAGING_COPY"]
    return selftest_verdict(found, want)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    with open(f"{a.root}/src/common/config.c", encoding="utf-8") as f:
        config_c = f.read()
    with open(f"{a.root}/docs/CONFIG.md", encoding="utf-8") as f:
        config_md = f.read()
    if a.selftest:
        return selftest(config_c, config_md)
    problems = check(config_c, config_md)
    return report(problems, f"docs/CONFIG.md and src/common/config.c agree on {len(table_rows(config_c))} settings")


if __name__ == "__main__":
    sys.exit(main())
