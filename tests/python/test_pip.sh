#!/bin/sh
# `pip install ./python` offline with Debian's packages only (no build
# isolation, no index), then the installed package finds libtpx.so without
# TPX_LIBRARY: in the build tree it was installed from, and (a copy of the
# package with no build tree) in an installed prefix named by TPX_PREFIX.
# usage: test_pip.sh BUILD_DIR SOURCE_DIR PYTHON
set -eu
build=$1 src=$2 py=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
fail() { echo "FAIL: $*"; exit 1; }
unset TPX_LIBRARY PYTHONPATH
# pip builds in the source tree: work on a copy so the checkout stays clean.
cp -r "$src/python" "$tmp/python"
cp -r "$src/include" "$tmp/include"
ln -s "$build" "$tmp/build"
"$py" -m pip install --no-build-isolation --no-index --no-deps --target "$tmp/site" "$tmp/python" \
  >"$tmp/pip.log" 2>&1 || { cat "$tmp/pip.log"; fail "pip install"; }
probe='import tpx, os; print(tpx.__version__, os.path.realpath(tpx._lib.lib._name))'
out=$(cd / && PYTHONPATH="$tmp/site" "$py" -c "$probe") || fail "import after pip install"
echo "pip install: $out"
# With Python's headers, pip also built the compiled fast path and the package uses it.
if [ -f "$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')/Python.h" ]; then
  fast=$(cd / && PYTHONPATH="$tmp/site" "$py" -c 'import tpx; print(tpx._core._fast.__name__)') || fail "fast path"
  [ "$fast" = "tpx._speedups" ] || fail "pip did not build tpx._speedups: $fast"
fi
case "$out" in *"$(realpath "$build")/libtpx.so"*) ;; *) fail "not the build tree's library: $out" ;; esac
# An installed prefix: cmake --install, and the package alone (no _where.py, no build tree).
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
mkdir -p "$tmp/bare/pkg" && cp -r "$src/python/tpx" "$tmp/bare/pkg/tpx" && rm -f "$tmp/bare/pkg/tpx/_where.py"
out=$(cd / && PYTHONPATH="$tmp/bare/pkg" TPX_PREFIX="$tmp/prefix" "$py" -c "$probe") || fail "import with TPX_PREFIX"
echo "installed prefix: $out"
case "$out" in *"$tmp/prefix/"*) ;; *) fail "not the prefix's library: $out" ;; esac
# TPX_LIBRARY wins, and a wrong one is an error that names it.
out=$(cd / && PYTHONPATH="$tmp/bare/pkg" TPX_LIBRARY="$tmp/prefix/lib" "$py" -c "$probe") || fail "TPX_LIBRARY=dir"
case "$out" in *"$tmp/prefix/lib/"*) ;; *) fail "TPX_LIBRARY not used: $out" ;; esac
if err=$(cd / && PYTHONPATH="$tmp/bare/pkg" TPX_LIBRARY=/nonexistent/libtpx.so "$py" -c "import tpx" 2>&1); then
  fail "a missing TPX_LIBRARY was accepted"
fi
case "$err" in *"TPX_LIBRARY=/nonexistent/libtpx.so"*) ;; *) fail "unclear error: $err" ;; esac
echo "ok: pip install and library lookup"
