#!/bin/bash
# Issue 18 on two GPUs: each process on its own GPU, 16 CPUs then all CPUs.
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$SECONDS
{ nvidia-smi -L; nvidia-smi topo -m; lscpu | head -30; git log -1 --oneline 2>/dev/null; } >$OUT/machine.txt 2>&1
cmake -S . -B build-g -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >$OUT/build.log 2>&1 &&
  cmake --build build-g -j "$(nproc)" --target tpx-bench tpx-netbench >>$OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
echo "built in $((SECONDS - t0)) s"
I=$PWD/build-iperf/iperf3w
# timelines first (short): x1, host/host and cuda/cuda, GPUs split, 16 CPUs
tl() { # name cmem smem
  local d=/tmp/tl-$1; rm -rf $d; mkdir -p $d
  local sg=() cg=(); [ $3 = cuda ] && sg=(--gpu 1); [ $2 = cuda ] && cg=(--gpu 0)
  TPX_SOCKET_IFNAME=lo TPX_TIMELINE=$d/tl taskset -c 0-15 build-g/tpx-bench server --host 127.0.0.1 --port 27100 --mem $3 "${sg[@]}" >$d/s.log 2>&1 &
  sleep 1.5
  TPX_SOCKET_IFNAME=lo TPX_TIMELINE=$d/tl taskset -c 0-15 timeout 60 build-g/tpx-bench client 127.0.0.1 --port 27100 --mem $2 "${cg[@]}" --size 64M --inflight 1 --iters 20 --progress off >$d/c.log 2>&1
  wait
  echo "== $1: $(grep -h '^\[PERF\]' $d/c.log | tail -1)"
  local pl=(); [ $1 = cuda ] && pl=(--plot $OUT/timeline-cuda-2gpu.png --label "64 MiB write, GPU0 -> GPU1, two processes, 16 CPUs")
  python3 bench/timeline.py $d/tl.* "${pl[@]}" >$d/rep.txt 2>&1; head -1 $d/rep.txt; grep "^median" $d/rep.txt
}
{ tl host host host; tl cuda cuda cuda; tl cudahost cuda host; tl hostcuda host cuda; } >$OUT/timeline16.txt 2>&1
cat $OUT/timeline16.txt
echo "timelines done at $((SECONDS - t0)) s"
CLIENT_GPU=0 SERVER_GPU=1 IPERF3=$I ROUNDS=${R16:-5} taskset -c 0-15 bench/fill_compare.sh build-g 2>&1 | tee $OUT/fill16.txt | grep -v '^round'
echo "fill16 done at $((SECONDS - t0)) s"
CLIENT_GPU=0 SERVER_GPU=1 IPERF3=$I ROUNDS=${R32:-3} bench/fill_compare.sh build-g 2>&1 | tee $OUT/fill32.txt | grep -v '^round'
echo "fill32 done at $((SECONDS - t0)) s"
