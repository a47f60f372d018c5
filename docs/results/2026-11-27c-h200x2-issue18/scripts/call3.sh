#!/bin/bash
# Issue 18 session 3 call 3: huge pages for the staging arenas (TPX_X_HUGE) and for tpx-bench's host buffers (TPX_X_BHUGE).
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo
t0=$SECONDS
{ cat /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/mm/transparent_hugepage/defrag; grep -i huge /proc/meminfo; } >$OUT/thp.txt 2>&1
cat $OUT/thp.txt
B=build-g
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench tpx-netbench >/dev/null 2>&1 || { echo build failed; exit 1; }
echo "built at $((SECONDS - t0)) s"
. x/ab.sh
# bytes of a huge-page arena run verified
TPX_X_HUGE=1 taskset -c 0-15 $B/tpx-bench loopback --mem cuda --gpu 0 --server-gpu 1 --size 64M --inflight 4 --iters 6 --check --progress off 2>&1 | grep -E "CHECK|PERF|rror" | head -5
TPX_X_HUGE=1 TPX_SOCK_UNPACK=1 taskset -c 0-15 $B/tpx-bench loopback --mem cuda --gpu 0 --server-gpu 1 --size 64M --iters 4 --check --progress off 2>&1 | grep -E "CHECK|PERF|rror" | head -5
cases=("host x1|host|host|1" "host x4|host|host|4" "host x1 bhuge|host|host|1|TPX_X_BHUGE=1" "host x4 bhuge|host|host|4|TPX_X_BHUGE=1"
  "cuda x1|cuda|cuda|1" "cuda x4|cuda|cuda|4" "cuda x1 huge|cuda|cuda|1|TPX_X_HUGE=1" "cuda x4 huge|cuda|cuda|4|TPX_X_HUGE=1"
  "recv x1|host|cuda|1" "recv x1 huge|host|cuda|1|TPX_X_HUGE=1" "send x1|cuda|host|1" "send x1 huge|cuda|host|1|TPX_X_HUGE=1")
ROUNDS=7 TLIM=470 abloop $OUT/ab.txt | tee $OUT/ab_summary.txt
echo "done at $((SECONDS - t0)) s"
