#!/bin/bash
# Session 5 call 2: timelines, host vs staging, 64 MiB x1 (one GPU, both processes)
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo
B=build-g
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench >/dev/null 2>&1 || { echo build failed; exit 1; }
tl() { # name mem inflight
  rm -rf /tmp/tl; mkdir -p /tmp/tl; local g=(); [ $2 = cuda ] && g=(--gpu 0)
  TPX_TIMELINE=/tmp/tl/t $B/tpx-bench server --host 127.0.0.1 --port 27900 --mem $2 "${g[@]}" >/tmp/s.log 2>&1 & local sp=$!
  for i in $(seq 60); do grep -q '^\[SERVER\] listening' /tmp/s.log && break; sleep 0.05; done
  TPX_TIMELINE=/tmp/tl/t $B/tpx-bench client 127.0.0.1 --port 27900 --mem $2 "${g[@]}" --size 64M --inflight $3 --iters 40 --progress off > /tmp/c.log 2>&1
  wait $sp
  { grep PERF /tmp/c.log; python3 bench/timeline.py /tmp/tl/t.* --sockets --wake; } > $OUT/tl_$1.txt 2>&1
  python3 bench/timeline.py /tmp/tl/t.* --plot $OUT/tl_$1.png --label "$1" >/dev/null 2>&1 || true
  cp /tmp/tl/t.* $OUT/ 2>/dev/null; mkdir -p $OUT/raw_$1; mv $OUT/t.* $OUT/raw_$1/
}
for r in 1 2; do tl host_x1_$r host 1; tl stg_x1_$r cuda 1; done
tail -3 $OUT/tl_*_1.txt
