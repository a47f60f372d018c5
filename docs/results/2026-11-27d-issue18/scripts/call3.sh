#!/bin/bash
# Session 4 call 3 (single GPU, 16 CPUs, tree 54217ec): GPU suite, then fill_compare with the cold rows (5 rounds).
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin
t0=$SECONDS
nproc; nvidia-smi --query-gpu=name --format=csv,noheader
STEPS="ctx unpack engine flush sockunpack gputcpx memcheck_engine" BUILD_DIR=$PWD/build-gpu-run OUT=/tmp/suite bash tests/gpu/run.sh >/tmp/suite.log 2>&1
echo "suite rc=$? at $((SECONDS - t0)) s"; tail -15 /tmp/suite.log; cp /tmp/suite/summary* $OUT/ 2>/dev/null; ls /tmp/suite | head
cp /tmp/suite.log $OUT/gpu_suite.log
B=build-g
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench tpx-netbench >/dev/null 2>&1 || { echo build failed; exit 1; }
echo "built at $((SECONDS - t0)) s"
CLIENT_GPU=0 SERVER_GPU=0 IPERF3=$PWD/build-iperf/iperf3w ROUNDS=5 bench/fill_compare.sh $B >$OUT/fill_h200_1gpu.txt 2>&1
echo "fill rc=$? at $((SECONDS - t0)) s"
tail -45 $OUT/fill_h200_1gpu.txt
