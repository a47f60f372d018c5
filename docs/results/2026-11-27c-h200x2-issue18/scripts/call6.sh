#!/bin/bash
# Issue 18 session 3 call 6: fill_compare at 58ed586, each end its own 16 CPUs, 5 rounds.
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo
t0=$SECONDS
B=build-g
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench tpx-netbench >/dev/null 2>&1 || { echo build failed; exit 1; }
echo "built at $((SECONDS - t0)) s"
CLIENT_GPU=0 SERVER_GPU=1 IPERF3=$PWD/build-iperf/iperf3w ROUNDS=5 CLIENT_CPUS=0-15 SERVER_CPUS=16-31 timeout 330 bench/fill_compare.sh $B >$OUT/fill-own-cold-call6.txt 2>&1; echo "own rc=$? at $((SECONDS - t0)) s"
sed -n '/^medians/,/^Markdown/p' $OUT/fill-own-cold-call6.txt
