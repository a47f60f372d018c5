#!/bin/sh
# Installs what the project needs from Debian 12 (as root). Without arguments:
# what building and running the benchmark needs. With --test: also what the
# tests need. With --bench: also what bench/ needs (iperf3 to compare with,
# matplotlib for bench/plot.py). Installs nothing that is already there.
# libssl-dev: libcrypto (HMAC, random numbers) for the authentication.
# libcurl4-openssl-dev and libjansson-dev: the etcd rendezvous (without them
# libtpx still builds; tpx_rdv_open then returns TPX_ENOTSUP). etcd-server:
# the rendezvous tests start one on 127.0.0.1.
set -eu
pkgs="build-essential cmake pkg-config iproute2 libssl-dev libcurl4-openssl-dev libjansson-dev"
if [ "${1:-}" = "--test" ]; then
  pkgs="$pkgs libcmocka-dev iperf3 nftables procps python3 python3-pytest python3-numpy python3-setuptools python3-pip python3-venv python3-dev etcd-server curl"
  # The NIXL plugin's tests build NIXL itself (scripts/build-testdeps.sh).
  pkgs="$pkgs meson ninja-build pybind11-dev python3-pybind11 libasio-dev liburing-dev"
  pkgs="$pkgs libaio-dev libgtest-dev libgmock-dev"
  pkgs="$pkgs autoconf automake libtool"
  # Google's GPUDirect-TCPX plugin (scripts/build-tcpx-plugin.sh): protobuf;
  # gtest above serves it too.
  pkgs="$pkgs libprotobuf-dev protobuf-compiler"
  # libFuzzer (make fuzz, part of make check): clang and its runtimes.
  pkgs="$pkgs clang libclang-rt-14-dev"
  # scripts/ci-repeat.sh --load keeps the CPUs busy with it.
  pkgs="$pkgs stress-ng"
elif [ "${1:-}" = "--bench" ]; then
  pkgs="$pkgs iperf3 python3 python3-matplotlib"
fi
missing=""
for p in $pkgs; do
  dpkg -s "$p" >/dev/null 2>&1 || missing="$missing $p"
done
if [ -n "$missing" ]; then
  echo "deps: installing$missing"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update
  # shellcheck disable=SC2086
  apt-get install -y --no-install-recommends $missing
fi
if [ "${1:-}" = "--test" ]; then
  # The third-party source tarballs (scripts/third-party.txt: where each comes
  # from, its hashes and licence): fetched from upstream where the network
  # allows (failing within seconds where it does not), each checked, else
  # taken from TPX_THIRD_PARTY.
  if ! "$(dirname "$0")/third-party.sh" check >/dev/null 2>&1; then
    "$(dirname "$0")/third-party.sh" fetch || true
  fi
  # NIXL (and abseil) from the release tarballs, cached outside the checkout.
  # Without the tarballs the rest of the suite still runs; the NIXL tests
  # then report themselves skipped, naming why.
  if ! "$(dirname "$0")/build-testdeps.sh" --have-tarballs; then
    echo "deps: WARNING: NIXL's source tarballs not found: scripts/third-party.txt lists them and where each comes" >&2
    echo "deps:          from; put them in a folder and set TPX_THIRD_PARTY to it (then rerun scripts/deps.sh --test)." >&2
    echo "deps:          The NIXL plugin and its tests are skipped in this build" >&2
  else
    "$(dirname "$0")/build-testdeps.sh"
  fi
  # The real TCPX plugin, run by the tests labelled tcpx-real over the CUDA
  # driver test double and the RxDM stand-in (docs/A3HIGH.md). Cached the same way.
  if ! "$(dirname "$0")/build-tcpx-plugin.sh" --have-tarballs; then
    echo "deps: WARNING: the GPUDirect-TCPX plugin's source tarballs not found: scripts/third-party.txt lists them;" >&2
    echo "deps:          set TPX_THIRD_PARTY to a folder holding them: the tests over the real plugin are skipped" >&2
  elif ! "$(dirname "$0")/build-tcpx-plugin.sh" --check >/dev/null; then
    echo "deps: WARNING: cannot build the GPUDirect-TCPX plugin here ($("$(dirname "$0")/build-tcpx-plugin.sh" --check)):" >&2
    echo "deps:          the tests over the real plugin are skipped in this build" >&2
  else
    "$(dirname "$0")/build-tcpx-plugin.sh"
  fi
fi
