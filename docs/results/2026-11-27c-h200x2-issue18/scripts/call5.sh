#!/bin/bash
# Issue 18 session 3 call 5: cold (--regions 4) vs cached, host / staging / unpack, 64 MiB x1 x4, 9 alternating rounds:
# each end its own 16 CPUs (client 0-15, server 16-31), then 16 shared CPUs.
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo
t0=$SECONDS
B=build-g
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench tpx-netbench >/dev/null 2>&1 || { echo build failed; exit 1; }
echo "built at $((SECONDS - t0)) s"
. x/ab.sh
cases=("host x1|host|host|1" "host x4|host|host|4" "staging x1|cuda|cuda|1" "staging x4|cuda|cuda|4" "unpack x1|cuda|cuda|1|TPX_SOCK_UNPACK=1" "unpack x4|cuda|cuda|4|TPX_SOCK_UNPACK=1"
  "host x1 cold|host|host|1|REG=4" "host x4 cold|host|host|4|REG=4" "staging x1 cold|cuda|cuda|1|REG=4" "staging x4 cold|cuda|cuda|4|REG=4" "unpack x1 cold|cuda|cuda|1|TPX_SOCK_UNPACK=1|REG=4" "unpack x4 cold|cuda|cuda|4|TPX_SOCK_UNPACK=1|REG=4")
CCPUS=0-15 SCPUS=16-31 ROUNDS=9 TLIM=230 abloop $OUT/ab_own.txt | tee $OUT/ab_own_summary.txt
echo "own done at $((SECONDS - t0)) s"
ROUNDS=9 TLIM=440 abloop $OUT/ab_shared.txt | tee $OUT/ab_shared_summary.txt
echo "done at $((SECONDS - t0)) s"
