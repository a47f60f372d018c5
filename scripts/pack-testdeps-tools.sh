#!/bin/sh
# Fills a directory with what scripts/build-testdeps.sh needs on a machine
# that has no package registry (the GPU machines: Ubuntu with CUDA, cmake
# and a C++ compiler): the release tarballs, and from this Debian machine
# meson (as a Python zipapp), ninja, pkg-config (pkgconf and its library),
# the asio headers, the pybind11 headers (with a pybind11.pc), and UCX's
# tarball with its autogen.sh run (no autotools needed there), and in debs/
# the Debian 12 .debs of protobuf and gtest that scripts/build-tcpx-plugin.sh
# unpacks to build Google's GPUDirect-TCPX plugin, and cmocka's, with which
# tests/gpu/run.sh builds the programs of its tcpxreal step. On the other machine:
# TPX_TESTDEPS_TOOLS=DIR scripts/build-testdeps.sh --cuda and
# TPX_TESTDEPS_TOOLS=DIR scripts/build-tcpx-plugin.sh (what that machine has
# itself is used first). docs/NIXL.md, "GPU"; docs/A3HIGH.md.
#
#   scripts/pack-testdeps-tools.sh DIR     (DIR: e.g. build-gpu-tools, which
#                                           .gitignore ignores, so it can travel)
# Needs what scripts/deps.sh --test installs. Prints DIR's size at the end.
set -eu
[ $# -eq 1 ] || { echo "usage: $0 DIR" >&2; exit 2; }
here=$(cd "$(dirname "$0")" && pwd)
tp=${TPX_THIRD_PARTY:-$(dirname "$here")/../shared/third_party}
out=$1
die() { echo "pack-testdeps-tools: $*" >&2; exit 1; }
mb=$(python3 -c 'import mesonbuild, os; print(os.path.dirname(mesonbuild.__file__))' 2>/dev/null) ||
  mb=$(/usr/bin/python3 -c 'import mesonbuild, os; print(os.path.dirname(mesonbuild.__file__))') ||
  die "meson's Python package not found (apt-get install meson)"
pyb=$(/usr/bin/python3 -c 'import pybind11; print(pybind11.get_include())') || die "pybind11 not found"
for f in /usr/bin/ninja /usr/bin/pkgconf /usr/include/asio.hpp; do [ -e "$f" ] || die "$f missing"; done
libpc=$(ldd /usr/bin/pkgconf | awk '/libpkgconf/ {print $3}')
rm -rf "$out"
mkdir -p "$out/bin" "$out/lib/pkgconfig" "$out/include" "$out/third_party" "$out/.zip/mesonbuild"
cp "$tp"/*.tar.gz "$tp"/README.md "$out/third_party/"
# meson: its package and a __main__, run by the python3 of the machine.
cp -r "$mb"/. "$out/.zip/mesonbuild/"
printf 'import sys\nfrom mesonbuild import mesonmain\nsys.exit(mesonmain.main())\n' >"$out/.zip/__main__.py"
python3 -m zipapp "$out/.zip" -o "$out/bin/meson" -p '/usr/bin/env python3' -c
rm -rf "$out/.zip"
cp /usr/bin/ninja "$out/bin/"
cp /usr/bin/pkgconf "$out/bin/pkg-config"
cp "$libpc" "$out/lib/"
cp -r /usr/include/asio /usr/include/asio.hpp "$out/include/"
cp -r "$pyb/pybind11" "$out/include/"
# UCX's release tarball has no configure script: run its autogen.sh here.
tmp=$(mktemp -d)
tar xzf "$tp/ucx-1.22.0.tar.gz" -C "$tmp"
(cd "$tmp/ucx-1.22.0" && ./autogen.sh >/dev/null 2>&1) || { rm -rf "$tmp"; die "UCX autogen.sh failed (autotools: scripts/deps.sh --test)"; }
tar czf "$out/ucx-1.22.0-autogen.tar.gz" -C "$tmp" ucx-1.22.0
rm -rf "$tmp"
# The TCPX plugin's protobuf and gtest, as .debs (apt-get download: from the
# archive, whatever is installed here).
mkdir -p "$out/debs"
(cd "$out/debs" && apt-get download protobuf-compiler libprotoc32 libprotobuf32 libprotobuf-lite32 \
   libprotobuf-dev zlib1g-dev libgtest-dev libgmock-dev libcmocka0 libcmocka-dev >/dev/null 2>&1) ||
  die "apt-get download of protobuf/gtest/cmocka .debs failed (needs Debian 12's archive)"
cat >"$out/lib/pkgconfig/pybind11.pc" <<EOF
prefix=\${pcfiledir}/../..
Name: pybind11
Description: pybind11 headers (Debian, carried)
Version: $(/usr/bin/python3 -c 'import pybind11; print(pybind11.__version__)')
Cflags: -I\${prefix}/include
EOF
du -sh "$out"
