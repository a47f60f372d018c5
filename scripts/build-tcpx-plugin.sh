#!/bin/sh
# Builds Google's GPUDirect-TCPX NCCL net plugin (google/nccl-plugin-gpudirecttcpx,
# commit 4b8ea7f, the plugin A3-high runs) from the release tarballs in
# $TPX_THIRD_PARTY (default: ../shared/third_party next to the checkout), with
# abseil from its tarball and NCCL 2.19.4's headers, into a prefix OUTSIDE the
# repository. Nothing of the plugin's code enters the repository; its three
# defects are mended in a scratch copy (see "Mends" below). docs/A3HIGH.md,
# "The real plugin on this machine", says how the tests use it.
#
# The prefix is $TPX_DEPS_CACHE/tcpx-<hash> (default /var/cache/tpx-testdeps
# when writable, else ~/.cache/tpx-testdeps: the same root as
# scripts/build-testdeps.sh), the hash covering the tarballs, this script and
# the protobuf it builds against, so a second run reuses it. The last line
# printed is the plugin's path, <prefix>/lib/libnccl-net-tcpx.so.
#
#   scripts/build-tcpx-plugin.sh [--prefix] [--have-tarballs] [--check] [-j N]
# --prefix: print the plugin of an existing build and build nothing (nothing
#   printed when there is none).
# --have-tarballs: exit 0 when every tarball needed is readable.
# --check: list everything missing for the build and exit 1 if anything is.
#
# Needs cmake, make, a C++ compiler, the CUDA toolkit in /usr/local/cuda (the
# plugin's CMakeLists.txt names /usr/local/cuda/bin/nvcc itself), protobuf
# (protoc and headers) and gtest (its CMake files ask for it). On Debian:
# scripts/deps.sh --test. A machine without a package registry (the GPU
# machines) takes protobuf and gtest from Debian 12 .debs in
# $TPX_TESTDEPS_TOOLS/debs, which scripts/pack-testdeps-tools.sh puts there;
# they are unpacked (dpkg-deb -x) into the prefix, and the plugin gets an
# rpath to their libraries.
set -eu

. "$(dirname "$0")/testdeps-paths.sh"
jobs=$(nproc)
print_only=0
have_only=0
check_only=0
while [ $# -gt 0 ]; do
  case "$1" in
    --prefix) print_only=1 ;;
    --have-tarballs) have_only=1 ;;
    --check) check_only=1 ;;
    -j) jobs=$2; shift ;;
    *) echo "build-tcpx-plugin: unknown argument '$1'" >&2; exit 2 ;;
  esac
  shift
done
die() { echo "build-tcpx-plugin: $*" >&2; exit 1; }

plugin_tgz=$tp/nccl-plugin-gpudirecttcpx-4b8ea7f.tar.gz
absl_tgz=$tp/abseil-cpp-20250814.1.tar.gz
nccl_tgz=$tp/nccl-2.19.4.tar.gz
tarballs="$plugin_tgz $absl_tgz $nccl_tgz"
cuda=/usr/local/cuda
debs=${tools:+$tools/debs}

# Protobuf: the machine's own, else the carried Debian .debs.
proto_src=none
if command -v protoc >/dev/null 2>&1 && [ -f /usr/include/google/protobuf/message.h ]; then
  proto_src=system
elif [ -n "$debs" ] && ls "$debs"/libprotobuf-dev_*.deb >/dev/null 2>&1; then
  proto_src=debs
fi

# Bump when the steps below change what gets built.
recipe=2
key=$( (for f in $tarballs; do [ -r "$f" ] || { echo "missing:$f"; continue; }; sha256sum <"$f"; done
        sha256sum <"$0"
        case $proto_src in
          system) protoc --version ;;
          debs) for d in "$debs"/*.deb; do basename "$d"; done ;;
        esac
        echo "recipe=$recipe") | sha256sum | cut -c1-16)
prefix=$cache/tcpx-$key
plugin=$prefix/lib/libnccl-net-tcpx.so
if [ "$print_only" = 1 ]; then
  [ -f "$prefix/.complete" ] && echo "$plugin"
  exit 0
fi
if [ "$have_only" = 1 ]; then
  for f in $tarballs; do [ -r "$f" ] || exit 1; done
  exit 0
fi

missing=""
for t in cmake make c++ sha256sum; do command -v $t >/dev/null 2>&1 || missing="$missing tool:$t"; done
[ -x $cuda/bin/nvcc ] || missing="$missing cuda-toolkit($cuda/bin/nvcc)"
case $proto_src in
  none) missing="$missing protobuf(libprotobuf-dev+protobuf-compiler, or .debs in \$TPX_TESTDEPS_TOOLS/debs)" ;;
  debs) command -v dpkg-deb >/dev/null 2>&1 || missing="$missing tool:dpkg-deb" ;;
esac
gtest_dir=""
for d in /usr/lib/x86_64-linux-gnu/cmake/GTest /usr/lib/cmake/GTest /usr/local/lib/cmake/GTest; do
  [ -f "$d/GTestConfig.cmake" ] && gtest_dir=$d && break
done
if [ -z "$gtest_dir" ] && ! { [ -n "$debs" ] && ls "$debs"/libgtest-dev_*.deb >/dev/null 2>&1; }; then
  missing="$missing gtest(libgtest-dev)"
fi
for f in $tarballs; do [ -r "$f" ] || missing="$missing tarball:$(basename "$f")"; done
if [ "$check_only" = 1 ]; then
  if [ -n "$missing" ]; then echo "build-tcpx-plugin: missing:$missing"; exit 1; fi
  echo "build-tcpx-plugin: nothing missing (protobuf: $proto_src)"
  exit 0
fi
[ -z "$missing" ] || die "missing:$missing (scripts/deps.sh --test installs them)"
if [ -f "$prefix/.complete" ]; then
  echo "build-tcpx-plugin: cached, nothing to build"
  echo "$plugin"
  exit 0
fi
# Each tarball against scripts/third-party.txt (its sha256 or its content's).
# shellcheck disable=SC2086
"$repo/scripts/third-party.sh" verify $tarballs || die "the tarballs in $tp do not match scripts/third-party.txt"

mkdir -p "$cache" || die "cannot create $cache (set TPX_DEPS_CACHE to a writable directory)"
rm -rf "$prefix"
mkdir -p "$prefix/src" "$prefix/lib"
work=$prefix/src
log=$prefix/build.log
echo "build-tcpx-plugin: building into $prefix (log: $log)"
step() { echo "build-tcpx-plugin: $1 ($(date -u +%H:%M:%S))"; }
run() { "$@" >>"$log" 2>&1 || { tail -40 "$log" >&2; die "failed: $*"; }; }

proto_opts=""
proto_inc=""
rpath=""
if [ "$proto_src" = debs ]; then
  step "protobuf and gtest from the carried .debs"
  root=$prefix/debroot
  for d in "$debs"/*.deb; do run dpkg-deb -x "$d" "$root"; done
  libdir=$root/usr/lib/x86_64-linux-gnu
  # The .so symlinks of -dev packages point at absolute paths: relink them here.
  for l in "$libdir"/*.so; do
    [ -L "$l" ] && ln -sf "$(basename "$(readlink "$l")")" "$l"
  done
  export LD_LIBRARY_PATH=$libdir${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH} # protoc's libprotoc
  proto_opts="-DProtobuf_PROTOC_EXECUTABLE=$root/usr/bin/protoc -DProtobuf_INCLUDE_DIR=$root/usr/include
    -DProtobuf_LIBRARY=$libdir/libprotobuf.so"
  # Only its proto library is given Protobuf_INCLUDE_DIR; the sources that
  # include the generated headers find protobuf's in /usr/include or nowhere.
  proto_inc="-I$root/usr/include"
  [ -n "$gtest_dir" ] || gtest_dir=$libdir/cmake/GTest
  rpath="-Wl,-rpath,$libdir"
fi

# Abseil goes to a prefix of its own, keyed by its tarball and these flags
# only, so a change of the plugin's steps does not rebuild it.
absl_flags="-DCMAKE_BUILD_TYPE=Release -DCMAKE_CXX_STANDARD=17 -DABSL_PROPAGATE_CXX_STD=ON
  -DCMAKE_POSITION_INDEPENDENT_CODE=ON -DBUILD_SHARED_LIBS=OFF -DABSL_BUILD_TESTING=OFF"
absl=$cache/tcpx-absl-$( (sha256sum <"$absl_tgz"; echo "$absl_flags") | sha256sum | cut -c1-16)
if [ -f "$absl/.complete" ]; then
  step "abseil: cached in $absl"
else
  step "abseil (static, C++17, PIC) into $absl"
  rm -rf "$absl" "$work/absl-build"
  run tar xzf "$absl_tgz" -C "$work"
  # shellcheck disable=SC2086
  run cmake -S "$work/abseil-cpp-20250814.1" -B "$work/absl-build" -G "Unix Makefiles" \
    -DCMAKE_INSTALL_PREFIX="$absl" -DCMAKE_INSTALL_LIBDIR=lib $absl_flags
  run cmake --build "$work/absl-build" -j "$jobs"
  run cmake --install "$work/absl-build"
  rm -rf "$work/absl-build" "$work/abseil-cpp-20250814.1"
  touch "$absl/.complete"
fi

step "NCCL 2.19.4 headers"
run tar xzf "$nccl_tgz" -C "$work"
nccl=$work/nccl-2.19.4
[ -d "$nccl" ] || nccl=$(find "$work" -maxdepth 1 -type d -name 'nccl-*' | head -1)
mkdir -p "$nccl/build/include"
# What NCCL's own makefile does to make nccl.h.
sed -e 's/${nccl:Major}/2/g' -e 's/${nccl:Minor}/19/g' -e 's/${nccl:Patch}/4/g' \
    -e 's/${nccl:Suffix}//g' -e 's/${nccl:Version}/21904/g' \
    "$nccl/src/nccl.h.in" >"$nccl/build/include/nccl.h"

step "the plugin (scratch copy, three mends)"
run tar xzf "$plugin_tgz" -C "$work"
psrc=$work/nccl-plugin-gpudirecttcpx-4b8ea7f
# Mend 1: the top-level CMakeLists.txt opens with a C comment (the licence),
# which CMake cannot parse: drop the lines up to the first "*/".
sed -i '1,/\*\//d' "$psrc/CMakeLists.txt"
head -1 "$psrc/CMakeLists.txt" | grep -q '^\s*$\|^cmake' || die "mend 1: unexpected CMakeLists.txt head"
# Mend 2: the two .proto files open with "#" comments, which protoc refuses.
for p in "$psrc"/src/rx_buf_mgr_client/proto/*.proto; do sed -i '/^#/d' "$p"; done
# Mend 3: CUDA 13's cuCtxCreate takes a CUctxCreateParams * second; the
# plugin passes three arguments. Pass NULL there under CUDA >= 13.
cw=$psrc/src/gpu/cuda_wrapper.cu
call='CUASSERT(cuCtxCreate(&(gpu->ctx), CU_CTX_MAP_HOST, gpu->dev));'
grep -qF "$call" "$cw" || die "mend 3: no three-argument cuCtxCreate in $cw"
awk -v call="$call" '
  index($0, call) { print "#if CUDA_VERSION >= 13000"
                    print "    CUASSERT(cuCtxCreate(&(gpu->ctx), NULL, CU_CTX_MAP_HOST, gpu->dev));"
                    print "#else"; print; print "#endif"; next } { print }' "$cw" >"$cw.new"
mv "$cw.new" "$cw"
# Its proto library links utf8_range and utf8_validity, which protobuf 3.21
# (Debian 12) does not have: empty archives of those names satisfy the link.
mkdir -p "$work/empty-libs"
for l in utf8_range utf8_validity; do run ar rc "$work/empty-libs/lib$l.a"; done

# "Unix Makefiles": its flags use make's $(subst). Only the plugin's target
# is built (nccl-net), not its tests. The CUDA runtime is linked shared
# (CMake's default is static): a static runtime starts only on NVIDIA's
# driver (it asks the driver for private tables), so on a machine without a
# GPU the plugin's few runtime calls (cudaGetDevice at listen, connect and
# accept) could not be answered by tests/fakes. The plugin's code is the
# same; its RUNPATH finds the toolkit's libcudart.so.13.
# shellcheck disable=SC2086
run cmake -S "$psrc" -B "$work/plugin-build" -G "Unix Makefiles" -DCMAKE_BUILD_TYPE=Release \
  -DCMAKE_PREFIX_PATH="$absl" -DNCCL_PATH="$nccl" -DNCCL_VERSION=2.19.4 \
  -DNET_GPUDIRECTTCPX_EXPORT=nccl -DGTest_DIR="$gtest_dir" $proto_opts \
  -DCMAKE_CXX_FLAGS="$proto_inc" -DCMAKE_CUDA_FLAGS="$proto_inc" \
  -DCMAKE_CUDA_RUNTIME_LIBRARY=Shared \
  -DCMAKE_SHARED_LINKER_FLAGS="-L$work/empty-libs $rpath -Wl,-rpath,$cuda/lib64" \
  -DCMAKE_EXE_LINKER_FLAGS="-L$work/empty-libs $rpath"
run cmake --build "$work/plugin-build" -j "$jobs" --target nccl-net
cp "$work/plugin-build/libnccl-net.so" "$plugin"
nm -D --defined-only "$plugin" | grep -q ' ncclNetPlugin_v7$' || die "$plugin exports no ncclNetPlugin_v7"
touch "$prefix/.complete"
step "done"
echo "$plugin"
