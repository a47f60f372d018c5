#!/bin/bash
# Session 5 call 1: staging lookahead (X_PREMAX, TPX_WINDOW) vs default, one GPU, 64 MiB x1/x4
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo SGPU=0 CGPU=0
t0=$SECONDS
B=build-g
lscpu | grep -E "Model name|L3|^CPU\(s\)" > $OUT/machine.txt; uname -r >> $OUT/machine.txt
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench >/dev/null 2>&1 || { echo build failed; exit 1; }
echo "built at $((SECONDS - t0)) s"
. x/ab.sh
cases=("host x1|host|host|1" "stg x1|cuda|cuda|1" "stg x1 p4|cuda|cuda|1|X_PREMAX=4" "stg x1 w8p4|cuda|cuda|1|X_PREMAX=4|TPX_WINDOW=8" "stg x1 w4p2|cuda|cuda|1|X_PREMAX=2|TPX_WINDOW=4"
  "host x4|host|host|4" "stg x4|cuda|cuda|4" "stg x4 p4|cuda|cuda|4|X_PREMAX=4" "stg x4 w8p4|cuda|cuda|4|X_PREMAX=4|TPX_WINDOW=8" "stg x4 w4p2|cuda|cuda|4|X_PREMAX=2|TPX_WINDOW=4")
ITERS=40 ROUNDS=6 TLIM=400 abloop $OUT/ab_ahead.txt | tee $OUT/ab_ahead_summary.txt
echo "done at $((SECONDS - t0)) s"
