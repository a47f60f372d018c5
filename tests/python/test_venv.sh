#!/bin/sh
# The README's Python install, as a new user runs it (README.md, "Python"):
# into a fresh venv (setuptools without `wheel`, no registry), system-wide
# on Debian 12 (an externally managed Python: --break-system-packages, here
# under --root so nothing leaves the test's folder), and as a wheel built
# once and installed into another venv. Each time tpx imports from outside
# the checkout and finds this build's libtpx.so.
# usage: test_venv.sh BUILD_DIR SOURCE_DIR PYTHON
# Exit 77 (skip) when PYTHON cannot make a venv with pip (Debian: python3-venv).
set -eu
build=$1 src=$2 py=$3
tmp=$(mktemp -d "${TMPDIR:-/tmp}/tpx-venv.XXXXXX")
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() { echo "FAIL: $*"; [ -f "$tmp/log" ] && cat "$tmp/log"; exit 1; }
unset TPX_LIBRARY PYTHONPATH PIP_REQUIRE_VIRTUALENV
export PIP_NO_INDEX=1 PIP_DISABLE_PIP_VERSION_CHECK=1 # no registry here: pip must need none
# pip builds in the source tree: a copy keeps the checkout clean; the build
# folder beside it is the one the package records.
mkdir -p "$tmp/repo"
cp -r "$src/python" "$src/include" "$tmp/repo/"
ln -s "$(realpath "$build")" "$tmp/repo/build"
probe='import tpx, os; print(tpx.__version__, os.path.realpath(tpx._lib.lib._name))'
lib=$(realpath "$build")/libtpx.so
check() { # WHAT PYTHON [PYTHONPATH]
  out=$(cd / && PYTHONPATH="${3:-}" "$2" -c "$probe" 2>&1) || fail "$1: import tpx: $out"
  case "$out" in *"$lib"*) echo "$1: $out" ;; *) fail "$1: not this build's library: $out" ;; esac
}

if ! "$py" -m venv "$tmp/venv" >"$tmp/log" 2>&1; then
  cat "$tmp/log"
  echo "SKIP: $py -m venv failed (Debian: apt-get install python3-venv)"
  exit 77
fi
# 1. The README's command in a fresh venv.
(cd "$tmp/repo" && "$tmp/venv/bin/pip" install ./python) >"$tmp/log" 2>&1 || fail "venv: pip install ./python"
check venv "$tmp/venv/bin/python"
if "$tmp/venv/bin/python" -c 'import wheel' 2>/dev/null; then
  echo "note: this venv has the wheel package; the build did not need it"
fi

# 2. System-wide (Debian 12 marks its Python externally managed).
(cd "$tmp/repo" && "$py" -m pip install --break-system-packages --root "$tmp/root" ./python) \
  >"$tmp/log" 2>&1 || fail "system-wide: pip install --break-system-packages ./python"
site=$(find "$tmp/root" -type d -name tpx -path '*-packages/tpx' | head -n 1)
[ -n "$site" ] || fail "system-wide: no tpx folder under $tmp/root"
check system-wide "$py" "$(dirname "$site")"

# 3. A wheel built once, then installed elsewhere from the file alone.
(cd "$tmp/repo" && "$tmp/venv/bin/pip" wheel --no-deps -w "$tmp/dist" ./python) >"$tmp/log" 2>&1 ||
  fail "pip wheel ./python"
"$py" -m venv "$tmp/venv2" >"$tmp/log" 2>&1 || fail "second venv"
"$tmp/venv2/bin/pip" install "$tmp"/dist/tpx-*.whl >"$tmp/log" 2>&1 || fail "pip install the wheel"
check wheel "$tmp/venv2/bin/python"
echo "ok: venv, system-wide and wheel installs"
