#!/bin/bash
# Session 4 call 6 (single GPU, 16 CPUs, tree of this session): cold (--regions 4) host / staging / unpack and cached host, 64 MiB x1 x4, 9 alternating rounds.
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo SGPU=0 CGPU=0
t0=$SECONDS
B=build-g
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench >/dev/null 2>&1 || { echo build failed; exit 1; }
. x/ab.sh
cases=("host x1|host|host|1" "host x4|host|host|4" "host x1 cold|host|host|1|REG=4" "host x4 cold|host|host|4|REG=4"
  "staging x1 cold|cuda|cuda|1|REG=4" "staging x4 cold|cuda|cuda|4|REG=4" "unpack x1 cold|cuda|cuda|1|TPX_SOCK_UNPACK=1|REG=4" "unpack x4 cold|cuda|cuda|4|TPX_SOCK_UNPACK=1|REG=4")
ROUNDS=9 TLIM=420 abloop $OUT/ab_cold9.txt | tee $OUT/ab_cold9_summary.txt
echo "done at $((SECONDS - t0)) s"
