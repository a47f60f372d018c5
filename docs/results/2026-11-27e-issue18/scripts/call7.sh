#!/bin/bash
# Session 5 call 7 (call 6 under an MPS daemon, no suite): unpack launches not waiting for the head's (new) vs X_UNPACK_HEAD=1 (the old rule); GPU suite
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo SGPU=0 CGPU=0
t0=$SECONDS
B=build-g
grep -c X_UNPACK_HEAD src/engine/gpu/unpack_stage.c > $OUT/tree_check.txt
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench >/dev/null 2>&1 || { echo build failed; exit 1; }
. x/ab.sh
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p /tmp/mps-pipe /tmp/mps-log; nvidia-cuda-mps-control -d; sleep 0.5
cases=("host x4|host|host|4" "unpack x1 old|cuda|cuda|1|TPX_SOCK_UNPACK=1|X_UNPACK_HEAD=1" "unpack x1 new|cuda|cuda|1|TPX_SOCK_UNPACK=1"
  "unpack x4 old|cuda|cuda|4|TPX_SOCK_UNPACK=1|X_UNPACK_HEAD=1" "unpack x4 new|cuda|cuda|4|TPX_SOCK_UNPACK=1")
ITERS=30 ROUNDS=7 TLIM=300 abloop $OUT/ab_unpack.txt | tee $OUT/ab_unpack_summary.txt
echo quit | nvidia-cuda-mps-control; sleep 1; echo "ab done at $((SECONDS - t0)) s"; exit 0
STEPS="ctx unpack engine flush sockunpack gputcpx memcheck_engine" BUILD_DIR=$PWD/build-gpu-run OUT=$OUT bash tests/gpu/run.sh > $OUT/gpu_suite.txt 2>&1; echo "suite rc $?"
tail -15 $OUT/gpu_suite.txt
echo "done at $((SECONDS - t0)) s"
