#!/bin/bash
# Session 5 call 8: bench/fill_compare.sh on two GPUs (sender GPU 0, receiver GPU 1), 16 shared CPUs, at 0a6aec3
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn
B=build-g
nvidia-smi -L > $OUT/machine.txt; nproc >> $OUT/machine.txt; lscpu | grep -E "^(Model name|NUMA|Socket)" >> $OUT/machine.txt
grep -c "launched at the comm's next poll" docs/GPU.md >> $OUT/machine.txt
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench tpx-netbench >/dev/null 2>&1 || { echo build failed; exit 1; }
taskset -c 0-15 env CLIENT_GPU=0 SERVER_GPU=1 IPERF3=$PWD/build-iperf/iperf3w ROUNDS=5 bench/fill_compare.sh $B > $OUT/fill_2gpu.txt 2>&1; echo "rc $?" >> $OUT/fill_2gpu.txt
sed -n '/ratios of medians/,/^Markdown/p' $OUT/fill_2gpu.txt
