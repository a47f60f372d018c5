#!/bin/bash
# Issue 18 session 3 call 7: timelines of one 64 MiB write at a time, each end its own 16 CPUs: host cold, staging cold, staging cached, host cached.
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo
t0=$SECONDS
B=build-g
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench >/dev/null 2>&1 || { echo build failed; exit 1; }
echo "built at $((SECONDS - t0)) s"
T=/tmp/tl7; rm -rf $T; mkdir -p $T
tl() { # name mem regions
  local n=$1 m=$2 reg=$3 sg=() cg=()
  [ $m = cuda ] && sg=(--gpu 1) cg=(--gpu 0)
  TPX_TIMELINE=$T/$n taskset -c 16-31 $B/tpx-bench server --host 127.0.0.1 --port 27100 --mem $m "${sg[@]}" >$T/$n.s.log 2>&1 &
  for i in $(seq 60); do grep -q '^\[SERVER\] listening' $T/$n.s.log && break; sleep 0.05; done
  TPX_TIMELINE=$T/$n taskset -c 0-15 timeout 60 $B/tpx-bench client 127.0.0.1 --port 27100 --mem $m "${cg[@]}" --size 64M --inflight 1 --iters 20 --regions $reg --progress off >$T/$n.c.log 2>&1
  wait
  echo "== $n: $(sed -n 's/^\[PERF\].*BW: \([0-9.]*\) GB.*/\1/p' $T/$n.c.log | tail -1)"
  python3 bench/timeline.py $T/$n.[0-9]* 2>&1 | head -1; python3 bench/timeline.py $T/$n.[0-9]* 2>&1 | grep "^median"
}
for k in 1 2; do tl host_cold$k host 4; tl cuda_cold$k cuda 4; tl cuda$k cuda 1; tl host$k host 1; done 2>&1 | tee $OUT/timelines_own.txt
for n in host_cold2 cuda_cold2 cuda2 host2; do echo "=== $n"; python3 bench/timeline.py $T/$n.[0-9]* --sockets --wake 2>&1 | tail -50; done >$OUT/timeline_sockets_own.txt 2>&1
tar -C /tmp -cJf $OUT/tl7.tar.xz tl7
echo "done at $((SECONDS - t0)) s"
