#!/bin/sh
# Builds the real NIXL client the NIXL plugin is tested against (abseil,
# NIXL with its C++ tests, examples and Python bindings; with --ucx also UCX
# and NIXL's UCX backend, for the comparison benchmark) from the release
# tarballs in $TPX_THIRD_PARTY (default: ../shared/third_party next to the
# checkout; docs/NIXL.md lists the files), into a prefix OUTSIDE the repository, the way
# NIXL's own documentation builds it (CMake for abseil, meson for NIXL,
# autotools for UCX). Never downloads anything (meson --wrap-mode=nodownload).
#
# The prefix is $TPX_DEPS_CACHE/<hash> (default /var/cache/tpx-testdeps when
# writable, else ~/.cache/tpx-testdeps), the hash
# covering the tarballs, this script, the test patch and the options, so a
# second run on the same machine reuses it. The last line printed is the
# prefix; CMake finds NIXL there through -DNIXL_PREFIX=<prefix> (the Makefile
# passes it: `scripts/build-testdeps.sh --prefix` prints an existing prefix and
# builds nothing).
#
#   scripts/build-testdeps.sh [--ucx] [--cuda] [--prefix] [--have-tarballs] [--check] [-j N]
# --have-tarballs: exit 0 when every tarball needed is readable (deps.sh asks
# first, so a machine without them still runs the rest of the suite).
# --check: list everything missing for the build (tools, headers, tarballs)
# and exit 1 if anything is; builds nothing.
#
# --cuda: let NIXL see the CUDA toolkit (GPU machines with a driver: VRAM
# through NIXL); by default it is hidden, for a host-only build that runs
# where the toolkit is installed without a driver. With --ucx too, UCX is
# built with CUDA support (cuda_copy), so NIXL's UCX backend moves VRAM over
# TCP through host buffers, as NIXL over UCX-TCP does on GPU nodes.
#
# Needs the Debian packages scripts/deps.sh --test installs (meson, ninja,
# pybind11, libasio-dev, liburing, libaio, gtest/gmock, numpy, autotools).
# Without gtest/gmock NIXL's tests are not built (the Python flow and the
# example still are); without liburing and libaio NIXL's POSIX plugin is not.
# A machine without a package registry (the GPU machines) takes what it lacks
# from $TPX_TESTDEPS_TOOLS, a directory scripts/pack-testdeps-tools.sh fills
# on a Debian machine: bin/ (meson as a zipapp, ninja, pkg-config), lib/
# (libpkgconf), include/ (asio, pybind11), lib/pkgconfig/pybind11.pc,
# third_party/ (the tarballs) and UCX's tarball with its autogen.sh run
# (for machines without autotools); what the machine has itself comes first.
set -eu

. "$(dirname "$0")/testdeps-paths.sh"
jobs=$(nproc)
with_ucx=0
with_cuda=0
print_only=0
check_only=0
preflight_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --ucx) with_ucx=1 ;;
    --cuda) with_cuda=1 ;;
    --prefix) print_only=1 ;;
    --have-tarballs) check_only=1 ;;
    --check) preflight_only=1 ;;
    -j) jobs=$2; shift ;;
    *) echo "build-testdeps: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done

die() { echo "build-testdeps: $*" >&2; exit 1; }

absl_tgz=$tp/abseil-cpp-20250814.1.tar.gz
nixl_tgz=$tp/nixl-8770b655.tar.gz
tf_tgz=$tp/taskflow-3.10.0-headers.tar.gz
toml_tgz=$tp/tomlplusplus-3.4.0-headers.tar.gz
ucx_tgz=$tp/ucx-1.22.0.tar.gz
patch_file=$repo/tests/nixl/nixl-gtest-tpx.sh
tarballs="$absl_tgz $nixl_tgz $tf_tgz $toml_tgz"
[ "$with_ucx" = 1 ] && tarballs="$tarballs $ucx_tgz"

# Bump when the steps below change what gets built.
recipe=1
# UCX with CUDA (only --ucx --cuda builds): its own key, the others' unchanged.
ucx_cuda_tag=""
[ "$with_ucx" = 1 ] && [ "$with_cuda" = 1 ] && ucx_cuda_tag=" ucx-cuda"
# Content decides the build: sha256 of ~12 MB of tarballs costs well under a
# second. Only the file contents enter the hash, not their paths.
key=$( (for f in $tarballs; do [ -r "$f" ] || { echo "missing:$f"; continue; }; sha256sum <"$f"; done
        sha256sum <"$patch_file"; echo "recipe=$recipe ucx=$with_ucx cuda=$with_cuda$ucx_cuda_tag") | sha256sum | cut -c1-16)
prefix=$cache/$key
if [ "$print_only" = 1 ]; then
  [ -f "$prefix/.complete" ] && echo "$prefix"
  exit 0
fi
if [ "$check_only" = 1 ]; then
  for f in $tarballs; do [ -r "$f" ] || exit 1; done
  exit 0
fi
for f in $tarballs; do
  [ -r "$f" ] || [ "$preflight_only" = 1 ] ||
    die "missing tarball $f (scripts/third-party.txt lists them; scripts/deps.sh --test fetches them, or set TPX_THIRD_PARTY to a folder holding them)"
done
if [ -f "$prefix/.complete" ] && [ "$preflight_only" = 0 ]; then
  echo "build-testdeps: cached, nothing to build"
  echo "$prefix"
  exit 0
fi
# Each tarball against scripts/third-party.txt (its sha256 or its content's).
if [ "$preflight_only" = 0 ]; then
  # shellcheck disable=SC2086
  "$repo/scripts/third-party.sh" verify $tarballs || die "the tarballs in $tp do not match scripts/third-party.txt"
fi

# Debian's python3 carries the pybind11 and numpy NIXL builds against; a
# python3 of pyenv & co. first on PATH would not. Carried tools come last.
PATH=/usr/bin:$PATH${tools:+:$tools/bin}
if [ -n "$tools" ]; then
  export LD_LIBRARY_PATH=${LD_LIBRARY_PATH:+$LD_LIBRARY_PATH:}$tools/lib # the carried pkg-config's libpkgconf
fi
asio_inc=""
if [ ! -f /usr/include/asio.hpp ] && [ -n "$tools" ] && [ -f "$tools/include/asio.hpp" ]; then asio_inc=$tools/include; fi
pc_path_tools=${tools:+$tools/lib/pkgconfig}

have_autotools() {
  command -v autoreconf >/dev/null 2>&1 && command -v automake >/dev/null 2>&1 &&
    command -v libtoolize >/dev/null 2>&1
}

# Everything the build needs that is not here, in one list.
preflight() {
  missing=""
  for tool in cmake meson ninja pkg-config python3 c++; do
    command -v $tool >/dev/null 2>&1 || missing="$missing tool:$tool"
  done
  if ! python3 -c 'import pybind11' 2>/dev/null &&
     ! PKG_CONFIG_PATH=$pc_path_tools pkg-config --exists pybind11 2>/dev/null; then
    missing="$missing pybind11"
  fi
  # meson before 1.2 (Debian 12's, and the carried one) asks distutils about
  # python3: gone from Python 3.12 unless setuptools provides it.
  if command -v meson >/dev/null 2>&1 && ! python3 -c 'import distutils' 2>/dev/null; then
    case $(meson --version 2>/dev/null) in 0.* | 1.0.* | 1.1.*) missing="$missing python3-distutils(setuptools)" ;; esac
  fi
  inc=$(python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null || true)
  [ -n "$inc" ] && [ -f "$inc/Python.h" ] || missing="$missing python3-headers(Python.h)"
  [ -f /usr/include/asio.hpp ] || [ -n "$asio_inc" ] || missing="$missing asio-headers"
  for f in $tarballs; do [ -r "$f" ] || missing="$missing tarball:$(basename "$f")"; done
  if [ "$with_cuda" = 1 ]; then command -v nvcc >/dev/null 2>&1 || missing="$missing nvcc"; fi
  if [ "$with_ucx" = 1 ]; then
    command -v make >/dev/null 2>&1 || missing="$missing tool:make"
    have_autotools || [ -f "$tools/ucx-1.22.0-autogen.tar.gz" ] || missing="$missing autotools(for UCX)"
  fi
}
preflight
# Needed only to use NIXL's Python agent (tests, benchmark), not to build it.
python3 -c 'import numpy' 2>/dev/null || echo "build-testdeps: note: python3 has no numpy: NIXL's Python agent needs it at run time" >&2
if [ "$preflight_only" = 1 ]; then
  pkg-config --exists gtest gmock 2>/dev/null || echo "build-testdeps: note: no gtest/gmock: NIXL's C++ tests will not be built" >&2
  if [ -n "$missing" ]; then echo "build-testdeps: missing:$missing"; exit 1; fi
  echo "build-testdeps: nothing missing"
  exit 0
fi
[ -z "$missing" ] || die "missing:$missing (scripts/deps.sh --test installs them; machines without a registry: TPX_TESTDEPS_TOOLS, see above)"

mkdir -p "$cache" || die "cannot create $cache (set TPX_DEPS_CACHE to a writable directory)"
rm -rf "$prefix"
mkdir -p "$prefix/src" "$prefix/lib/pkgconfig"
work=$prefix/src
log=$prefix/build.log
echo "build-testdeps: building into $prefix (log: $log)"
step() { echo "build-testdeps: $1 ($(date -u +%H:%M:%S))"; }
run() { "$@" >>"$log" 2>&1 || { tail -40 "$log" >&2; die "failed: $*"; }; }

# NIXL's host-only build: a CUDA toolkit without a driver makes its test
# programs link -lcuda and fail to start, so hide the toolkit from it.
if [ "$with_cuda" = 0 ]; then
  PATH=$(echo "$PATH" | tr ':' '\n' | grep -v -i cuda | paste -sd: -)
  export PATH CUDA_HOME=/nonexistent CUDA_PATH=/nonexistent
fi
export PKG_CONFIG_PATH="$prefix/lib/pkgconfig:$prefix/lib/x86_64-linux-gnu/pkgconfig:$prefix/lib64/pkgconfig${pc_path_tools:+:$pc_path_tools}"

step "abseil"
run tar xzf "$absl_tgz" -C "$work"
run cmake -S "$work/abseil-cpp-20250814.1" -B "$work/absl-build" -G Ninja \
  -DCMAKE_BUILD_TYPE=Release -DCMAKE_INSTALL_PREFIX="$prefix" -DCMAKE_INSTALL_LIBDIR=lib \
  -DCMAKE_CXX_STANDARD=20 -DABSL_PROPAGATE_CXX_STD=ON -DBUILD_SHARED_LIBS=ON \
  -DABSL_BUILD_TESTING=OFF -DCMAKE_INSTALL_RPATH="$prefix/lib"
run cmake --build "$work/absl-build" -j "$jobs"
run cmake --install "$work/absl-build"

step "taskflow, toml++ and asio pkg-config files"
run tar xzf "$tf_tgz" -C "$work"
run tar xzf "$toml_tgz" -C "$work"
cat >"$prefix/lib/pkgconfig/taskflow.pc" <<EOF
Name: taskflow
Description: Taskflow headers (release tarball)
Version: 3.10.0
Cflags: -I$work/taskflow-3.10.0
EOF
cat >"$prefix/lib/pkgconfig/tomlplusplus.pc" <<EOF
Name: tomlplusplus
Description: toml++ headers (release tarball)
Version: 3.4.0
Cflags: -I$work/tomlplusplus-3.4.0/include -DTOML_HEADER_ONLY=1
EOF
# Debian's libasio-dev ships no .pc file.
cat >"$prefix/lib/pkgconfig/asio.pc" <<EOF
Name: asio
Description: standalone asio (Debian libasio-dev)
Version: 1.22.1
Cflags: -DASIO_STANDALONE${asio_inc:+ -I$asio_inc}
EOF

ucx_opt=""
# POSIX needs liburing or libaio; NIXL's tests need gtest and gmock.
plugins=""
if pkg-config --exists liburing 2>/dev/null || [ -f /usr/include/libaio.h ]; then plugins="POSIX"; fi
tests_opt=true
pkg-config --exists gtest gmock 2>/dev/null || tests_opt=false
if [ "$with_ucx" = 1 ]; then
  ucx_cuda_opt=--without-cuda
  if [ "$with_cuda" = 1 ]; then
    # GDA-KI (mlx5 device verbs) needs DOCA GPUNetIO headers the release
    # tarball leaves out (an empty git submodule): not built, and neither is
    # the perftest's CUDA kernel, which includes them (its Makefile, below).
    ucx_cuda_opt="--with-cuda=$(dirname "$(dirname "$(command -v nvcc)")") --without-gda"
  fi
  step "UCX 1.22 (release configure, multi-threaded, TCP/shared memory only; $ucx_cuda_opt)"
  if have_autotools; then
    run tar xzf "$ucx_tgz" -C "$work"
    (cd "$work/ucx-1.22.0" && run ./autogen.sh)
  else # the same tarball with autogen.sh run on a machine that has autotools
    run tar xzf "$tools/ucx-1.22.0-autogen.tar.gz" -C "$work"
  fi
  (cd "$work/ucx-1.22.0" &&
   run ./contrib/configure-release --prefix="$prefix" --enable-mt --without-java \
     $ucx_cuda_opt --without-rocm --without-verbs --without-rdmacm --without-knem \
     --without-xpmem --without-ugni --without-go --disable-doxygen-doc &&
   { [ "$with_cuda" = 0 ] || run sed -i 's/^SUBDIRS = lib cuda /SUBDIRS = lib /' src/tools/perf/Makefile; } &&
   run make -j "$jobs" && run make install)
  ucx_opt="-Ducx_path=$prefix"
  plugins="UCX${plugins:+,$plugins}"
fi
# An empty list would make NIXL build every plugin it finds: none instead.
plugin_opt="-Denable_plugins=$plugins"
[ -n "$plugins" ] || plugin_opt="-Ddisable_plugins=UCX,LIBFABRIC,POSIX,OBJ,GDS,GDS_MT,MOONCAKE,HF3FS,GUSLI,GPUNETIO,UCCL,AZURE_BLOB,INFINIA,TELEMETRY_DOCA"

step "NIXL (meson, tests and examples; gtest patched for TPX)"
run tar xzf "$nixl_tgz" -C "$work"
nsrc=$work/nixl-8770b655
# The project's test instantiations go into this scratch copy only.
run sh "$patch_file" "$nsrc"
# NIXL builds its meta-package wheel (the `nixl` name that picks nixl_cu12 or
# nixl_cu13) with `uv build` whenever uv is on PATH, and uv asks PyPI for
# setuptools: a machine without a registry (the GPU machines, whose image has
# uv) stops there. Nothing here uses that wheel (the tests import
# nixl_cu12/13), so the scratch copy never looks for uv. Where uv is absent
# (Debian) the build is the same as before, hence no recipe bump.
meta=$nsrc/src/bindings/python/nixl-meta/meson.build
run sed -i "s/find_program('uv', required: false)/find_program('tpx-skips-uv', required: false)/" "$meta"
grep -q "tpx-skips-uv" "$meta" || die "$meta: no uv lookup to turn off (NIXL's layout changed?)"
# Tests build only when the build type is not "release".
# shellcheck disable=SC2086
run meson setup "$work/nixl-build" "$nsrc" --wrap-mode=nodownload --prefix="$prefix" \
  --libdir=lib --buildtype=debugoptimized -Dbuild_tests=$tests_opt -Dbuild_examples=true \
  "$plugin_opt" -Dwith_trace=false $ucx_opt
run meson compile -C "$work/nixl-build" -j "$jobs"
run meson install -C "$work/nixl-build"

# Where python3 finds the NIXL package (nixl_cu12, or nixl_cu13 with --cuda
# on CUDA 13: _api with nixl_agent).
pydir=$(cd "$prefix" && find . -type d -name 'nixl_cu1*' -path '*-packages*' | head -1)
[ -n "$pydir" ] || die "NIXL's Python package (nixl_cu12/13) was not installed"
pydir=$prefix/$(dirname "$pydir")
cat >"$prefix/env.sh" <<EOF
# Source this to use the NIXL built here.
export NIXL_PREFIX=$prefix
export LD_LIBRARY_PATH=$prefix/lib\${LD_LIBRARY_PATH:+:\$LD_LIBRARY_PATH}
export PYTHONPATH=$pydir\${PYTHONPATH:+:\$PYTHONPATH}
export NIXL_GTEST=$work/nixl-build/test/gtest/gtest
export NIXL_EXAMPLE=$work/nixl-build/examples/cpp/nixl_example
EOF
touch "$prefix/.complete"
step "done"
echo "$prefix"
