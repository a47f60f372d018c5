#!/bin/bash
# Session 5 call 4: bench/fill_compare.sh on one GPU, without and with MPS=1
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn
B=build-g
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench tpx-netbench >/dev/null 2>&1 || { echo build failed; exit 1; }
grep -c "CUDA MPS on" bench/fill_compare.sh > $OUT/tree_check.txt
CLIENT_GPU=0 SERVER_GPU=0 IPERF3=$PWD/build-iperf/iperf3w ROUNDS=5 bench/fill_compare.sh $B > $OUT/fill_nomps.txt 2>&1; echo "rc $?" >> $OUT/fill_nomps.txt
MPS=1 CLIENT_GPU=0 SERVER_GPU=0 IPERF3=$PWD/build-iperf/iperf3w ROUNDS=5 bench/fill_compare.sh $B > $OUT/fill_mps.txt 2>&1; echo "rc $?" >> $OUT/fill_mps.txt
pgrep -a nvidia-cuda-mps >> $OUT/tree_check.txt || echo "no MPS process left" >> $OUT/tree_check.txt
sed -n '/ratios of medians/,/^Markdown/p' $OUT/fill_nomps.txt $OUT/fill_mps.txt
