#!/bin/sh
# Install the build into a temporary prefix and build the consumer program
# (consumer.c) against it four ways, as users will: pkg-config shared and
# static, find_package(tpx) shared and static; run each. Also: the soname is
# versioned, every tool answers --version, the NCCL plugin is installed.
# usage: test_install.sh BUILD_DIR SOURCE_DIR CC
set -eu
build=$1 here=$2/tests/install cc=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT INT TERM
prefix=$tmp/prefix
cmake --install "$build" --prefix "$prefix" >"$tmp/install.log"
libdir=$(ls -d "$prefix"/lib*/pkgconfig | sed 's,/pkgconfig$,,')
fail() { echo "FAIL: $*"; exit 1; }

# The library, its soname and the plugin.
soname=$(readelf -d "$libdir/libtpx.so" | sed -n 's/.*SONAME.*\[\(.*\)\]/\1/p')
case "$soname" in libtpx.so.[0-9]*) echo "soname $soname" ;; *) fail "soname '$soname'" ;; esac
[ -f "$libdir/$soname" ] && [ -f "$libdir/libtpx.a" ] || fail "libtpx.so / libtpx.a missing"
[ -f "$libdir/libnccl-net-tpx.so" ] || fail "libnccl-net-tpx.so missing"
[ -f "$prefix/include/tpx/tpx.h" ] || fail "headers missing"
version=$(sed -n 's/^#define TPX_VERSION_STRING "\(.*\)"/\1/p' "$prefix/include/tpx/version.h")
for t in tpx-bench tpx-info tpx-netbench tpx-soak tpx-unpack-bench; do
  out=$("$prefix/bin/$t" --version) || fail "$t --version"
  case "$out" in "$t (tcpx-p2p) $version, library $version, wire protocol "[0-9]*) ;; *) fail "$t --version: $out" ;; esac
done

export PKG_CONFIG_PATH=$libdir/pkgconfig
[ "$(pkg-config --modversion tpx)" = "$version" ] || fail "pkg-config --modversion"
run() { # name binary
  out=$("$2") || fail "$1: exit $?: $out"
  [ "$out" = "consumer ok $version" ] || fail "$1: '$out'"
  echo "$1: ok"
}
# pkg-config, shared.
# shellcheck disable=SC2046
"$cc" -o "$tmp/pc_shared" "$here/consumer.c" $(pkg-config --cflags --libs tpx) -Wl,-rpath,"$libdir"
readelf -d "$tmp/pc_shared" | grep -q "NEEDED.*\[$soname\]" || fail "pc_shared does not load $soname"
run pkgconfig-shared "$tmp/pc_shared"
# pkg-config, static: libtpx.a by name, then what Libs.private says it needs.
libs=$(pkg-config --static --libs tpx | sed 's/-ltpx\b/-l:libtpx.a/')
# shellcheck disable=SC2086
"$cc" -o "$tmp/pc_static" "$here/consumer.c" $(pkg-config --cflags tpx) $libs
if readelf -d "$tmp/pc_static" | grep -q 'NEEDED.*libtpx'; then fail "pc_static loads libtpx.so"; fi
run pkgconfig-static "$tmp/pc_static"
# find_package(tpx), shared and static.
for kind in shared static; do
  st=OFF
  [ $kind = static ] && st=ON
  cmake -S "$here/cmake_consumer" -B "$tmp/cm_$kind" -DCMAKE_PREFIX_PATH="$prefix" -DTPX_STATIC=$st \
    -DCMAKE_C_COMPILER="$cc" -DCMAKE_BUILD_RPATH="$libdir" >"$tmp/cm_$kind.log" 2>&1 || { cat "$tmp/cm_$kind.log"; fail "cmake $kind"; }
  cmake --build "$tmp/cm_$kind" >>"$tmp/cm_$kind.log" 2>&1 || { cat "$tmp/cm_$kind.log"; fail "build $kind"; }
  needs=$(readelf -d "$tmp/cm_$kind/consumer" | grep -c 'NEEDED.*libtpx' || true)
  { [ $kind = shared ] && [ "$needs" = 1 ]; } || { [ $kind = static ] && [ "$needs" = 0 ]; } || fail "cmake $kind links libtpx.so $needs times"
  run "find_package-$kind" "$tmp/cm_$kind/consumer"
done
echo "ok: installed prefix builds and runs shared and static consumers"
