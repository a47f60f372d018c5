#!/bin/bash
# Issue 18 call 3: GPU-side completion times of the staging copies (TPX_X_GPUTS); I/O threads pinned (TPX_X_IOPIN).
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo
t0=$SECONDS
B=build-g
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench tpx-netbench >/dev/null 2>&1 || { echo build failed; exit 1; }
echo "built at $((SECONDS - t0)) s"
T=/tmp/tlraw; rm -rf $T; mkdir -p $T
tl() { # name cmem smem env...
  local n=$1 cm=$2 sm=$3; shift 3
  local sg=() cg=(); [ $sm = cuda ] && sg=(--gpu 1); [ $cm = cuda ] && cg=(--gpu 0)
  env "$@" TPX_TIMELINE=$T/$n taskset -c 0-15 $B/tpx-bench server --host 127.0.0.1 --port 27100 --mem $sm "${sg[@]}" >$T/$n.s.log 2>&1 &
  for i in $(seq 60); do grep -q '^\[SERVER\] listening' $T/$n.s.log && break; sleep 0.05; done
  env "$@" TPX_TIMELINE=$T/$n taskset -c 0-15 timeout 60 $B/tpx-bench client 127.0.0.1 --port 27100 --mem $cm "${cg[@]}" --size 64M --inflight 1 --iters 20 --progress off >$T/$n.c.log 2>&1
  wait
  echo "== $n: $(grep -h '^\[PERF\]' $T/$n.c.log | tail -1 | sed 's/.*BW: \([0-9.]*\) GB.*/\1/')"
  python3 bench/timeline.py $T/$n.[0-9]* >$T/$n.rep 2>&1; head -1 $T/$n.rep; grep "^median" $T/$n.rep
}
{ tl cuda_ts cuda cuda TPX_X_GPUTS=1; tl cudahost_ts cuda host TPX_X_GPUTS=1; tl hostcuda_ts host cuda TPX_X_GPUTS=1; tl cuda_ts2 cuda cuda TPX_X_GPUTS=1; } >$OUT/timelines.txt 2>&1
cat $OUT/timelines.txt
tar -C /tmp -cJf $OUT/tlraw.tar.xz tlraw
echo "timelines done at $((SECONDS - t0)) s"
echo "A/B done at $((SECONDS - t0)) s"
