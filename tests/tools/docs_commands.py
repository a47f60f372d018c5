#!/usr/bin/env python3
"""The commands the docs give still work as written, as far as a CPU machine
without the network can tell (README.md, bench/README.md, python/README.md,
docs/*.md):

- every script of the checkout the docs name (scripts/, bench/, tests/,
  tools/, python/examples/) exists;
- every one a code block or an inline command (`path args`) runs directly
  (first word of a command, after VAR=value, sudo, env, time, nice) is
  stored executable (git's mode
  100755), so `bench/compare.sh` is no "Permission denied";
- every shell script named parses (`sh -n`, bash for #!/bin/bash ones) and
  every Python one compiles;
- every tool of the build the docs name (tpx-*) answers `--help` with exit
  status 0 when it was built.

  docs_commands.py --root REPO --build BUILD_DIR [--selftest]
"""
import argparse
import glob
import os
import py_compile
import re
import subprocess
import sys
import tempfile

PATH_RE = re.compile(r"(?<![\w/.-])(?:\./)?((?:scripts|bench|tools|python/examples|tests/[a-z]+)/[A-Za-z0-9_./-]+"
                     r"\.(?:sh|py))\b")
TOOLS = ["tpx-bench", "tpx-netbench", "tpx-soak", "tpx-info"]
PREFIX_WORDS = {"sudo", "env", "time", "exec", "nohup"}


def doc_files(root):
    files = ["README.md", "bench/README.md", "python/README.md"] + \
        sorted(os.path.relpath(p, root) for p in glob.glob(os.path.join(root, "docs", "*.md")))
    return [f for f in files if os.path.exists(os.path.join(root, f))]


def code_lines(md):
    inside = False
    for line in md.split("\n"):
        if line.lstrip().startswith("```"):
            inside = not inside
            continue
        if inside:
            yield line


def direct_runs(line):
    """Repo paths a shell line runs as programs."""
    out = []
    line = line.split(" #", 1)[0]
    for part in re.split(r"&&|\|\||;|\||\$\(|`", line):
        words = part.strip().split()
        while words and (re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*=\S*", words[0]) or words[0] in PREFIX_WORDS
                         or words[0] in ("$", "#")):
            words.pop(0)
        if words and words[0] == "nice":
            words = words[3:] if len(words) > 2 and words[1] == "-n" else words[1:]
        if words:
            m = PATH_RE.fullmatch(words[0])
            if m:
                out.append(m.group(1))
    return out


def git_modes(root):
    r = subprocess.run(["git", "-C", root, "ls-files", "-s"], stdout=subprocess.PIPE, text=True)
    modes = {}
    for line in r.stdout.splitlines():
        meta, path = line.split("\t", 1)
        modes[path] = meta.split()[0]
    return modes


def check(root, build, docs, modes):
    problems = []
    named, runs = {}, {}
    for name, md in docs.items():
        for m in PATH_RE.finditer(md):
            named.setdefault(m.group(1), name)
        for line in code_lines(md):
            for p in direct_runs(line):
                runs.setdefault(p, name)
        # inline commands: `bench/kv_disagg_bench.py --registration`
        for span in re.findall(r"`([^`\n]+)`", re.sub(r"```.*?```", "", md, flags=re.S)):
            for p in direct_runs(span) if " " in span else []:
                runs.setdefault(p, name)
    for path, doc in sorted(named.items()):
        full = os.path.join(root, path)
        if not os.path.exists(full):
            problems.append(f"{doc}: names {path}, which does not exist")
            continue
        if path.endswith(".py"):
            try:
                py_compile.compile(full, cfile=os.path.join(tempfile.gettempdir(), "tpx-doccmd.pyc"),
                                   doraise=True)
            except py_compile.PyCompileError as e:
                problems.append(f"{path}: does not compile: {e.msg}")
        else:
            with open(full, encoding="utf-8", errors="replace") as f:
                first = f.readline()
            shell = "bash" if "bash" in first else "sh"
            r = subprocess.run([shell, "-n", full], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
            if r.returncode != 0:
                problems.append(f"{path}: does not parse ({shell} -n): {r.stdout.strip()}")
    for path, doc in sorted(runs.items()):
        if os.path.exists(os.path.join(root, path)) and modes.get(path, "100755") != "100755":
            problems.append(f"{doc}: runs {path} directly, but it is stored {modes[path]}, not executable "
                            f"(git update-index --chmod=+x {path})")
    alltext = "\n".join(docs.values())
    helped = 0
    for tool in TOOLS:
        exe = os.path.join(build, tool)
        if tool not in alltext or not os.path.exists(exe):
            continue
        r = subprocess.run([exe, "--help"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                           timeout=30)
        helped += 1
        if r.returncode != 0 or "usage" not in r.stdout.lower():
            problems.append(f"{tool} --help: exit status {r.returncode}, output: {r.stdout[:200]!r}")
    return problems, len(named), len(runs), helped


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--root", required=True)
    ap.add_argument("--build", required=True)
    ap.add_argument("--selftest", action="store_true")
    a = ap.parse_args()
    docs = {}
    for f in doc_files(a.root):
        with open(os.path.join(a.root, f), encoding="utf-8") as fh:
            docs[f] = fh.read()
    modes = git_modes(a.root)
    if a.selftest:
        docs = {"SELFTEST.md": "```sh\nFOO=1 bench/compare.sh --x && scripts/no-such.sh\n```\n"}
        modes = dict(modes, **{"bench/compare.sh": "100644"})
        found, _, _, _ = check(a.root, a.build, docs, modes)
        want = ["runs bench/compare.sh directly, but it is stored 100644", "names scripts/no-such.sh"]
        missed = [w for w in want if not any(w in p for p in found)]
        for w in missed:
            print(f"selftest: the checker did not report '{w}'")
        return 1 if missed else 0
    problems, n, r, h = check(a.root, a.build, docs, modes)
    for p in problems:
        print(p)
    if problems:
        print(f"{len(problems)} problem(s)")
        return 1
    print(f"docs: {n} scripts named exist and parse, {r} run directly are executable, {h} tools answer --help")
    return 0


if __name__ == "__main__":
    sys.exit(main())
