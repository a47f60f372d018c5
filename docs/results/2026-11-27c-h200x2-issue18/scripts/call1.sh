#!/bin/bash
# Issue 18 session 3 call 1: GPU suite at e83827a; cache sizes; arena size and cold-cache probes.
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo
t0=$SECONDS
{ nproc; lscpu | grep -Ei "model name|cache|numa|socket"; nvidia-smi -L; } >$OUT/machine.txt 2>&1
B=build-g
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench tpx-netbench >/dev/null 2>&1 || { echo build failed; exit 1; }
echo "built at $((SECONDS - t0)) s"
STEPS="ctx unpack engine flush sockunpack gputcpx memcheck_engine" BUILD_DIR=$PWD/build-gpu-run OUT=/tmp/suite bash tests/gpu/run.sh >$OUT/gpu_suite.txt 2>&1; echo "suite rc=$? at $((SECONDS - t0)) s"
cp /tmp/suite/summary.txt $OUT/gpu_suite_summary.txt 2>/dev/null; tail -15 $OUT/gpu_suite.txt
. x/ab.sh
cases=("host x1|host|host|1" "host x1 cold|host|host|1|TPX_X_THRASH=1024"
  "cuda x1|cuda|cuda|1" "cuda x1 cold|cuda|cuda|1|TPX_X_THRASH=1024"
  "cuda x1 sa4M|cuda|cuda|1|TPX_X_SARENA=4194304" "cuda x1 sa2M|cuda|cuda|1|TPX_X_SARENA=2097152" "cuda x1 sa1M|cuda|cuda|1|TPX_X_SARENA=1048576"
  "cuda x1 sa2M ra4M|cuda|cuda|1|TPX_X_SARENA=2097152|TPX_X_RARENA=4194304"
  "host x4|host|host|4" "cuda x4|cuda|cuda|4" "cuda x4 sa2M|cuda|cuda|4|TPX_X_SARENA=2097152" "cuda x4 sa2M ra4M|cuda|cuda|4|TPX_X_SARENA=2097152|TPX_X_RARENA=4194304")
abloop $OUT/ab.txt | tee $OUT/ab_summary.txt
echo "done at $((SECONDS - t0)) s"
