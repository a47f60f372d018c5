#!/bin/bash
# Issue 18 call 6: bench/fill_compare.sh (timed runs unchecked, GPU cases verified once) on two GPUs:
# the stand-in (both ends on 16 shared CPUs), then each end on 16 CPUs of its own.
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn
t0=$SECONDS
nvidia-smi -L > $OUT/machine.txt; nproc >> $OUT/machine.txt; lscpu | grep -E "^(Model name|NUMA|Socket|Core|Thread)" >> $OUT/machine.txt
B=build-g
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench tpx-netbench >/dev/null 2>&1 || { echo build failed; exit 1; }
git log -1 --format='tree: %h %s' >> $OUT/machine.txt; git status --short >> $OUT/machine.txt
echo "built at $((SECONDS - t0)) s"
CLIENT_GPU=0 SERVER_GPU=1 IPERF3=$PWD/build-iperf/iperf3w ROUNDS=5 taskset -c 0-15 bench/fill_compare.sh $B > $OUT/fill16.txt 2>&1
sed -n '/^ratios/,/^Markdown/p' $OUT/fill16.txt
echo "fill16 done at $((SECONDS - t0)) s"
R=5; [ $((SECONDS - t0)) -gt 280 ] && R=3
CLIENT_GPU=0 SERVER_GPU=1 CLIENT_CPUS=0-15 SERVER_CPUS=16-31 IPERF3=$PWD/build-iperf/iperf3w ROUNDS=$R bench/fill_compare.sh $B > $OUT/fill16x2.txt 2>&1
sed -n '/^ratios/,/^Markdown/p' $OUT/fill16x2.txt
echo "fill16x2 done at $((SECONDS - t0)) s"
