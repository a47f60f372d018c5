#!/bin/bash
# Session 4 call 1 (single GPU, 16 CPUs: the machine): chunk size A/B at 256 MiB and 64 MiB; timelines of 64 MiB x1.
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo SGPU=0 CGPU=0
t0=$SECONDS
B=build-g
nproc; nvidia-smi --query-gpu=name --format=csv,noheader; lscpu | grep -E "Model name|L3"
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench tpx-netbench >/dev/null 2>&1 || { echo build failed; exit 1; }
echo "built at $((SECONDS - t0)) s"
. x/ab.sh
C2=TPX_CHUNK_BYTES=2097152; C1=TPX_CHUNK_BYTES=1048576
cases=("host x1|host|host|1" "host x1 2M|host|host|1|$C2" "host x4|host|host|4" "host x4 2M|host|host|4|$C2"
  "staging x1|cuda|cuda|1" "staging x1 2M|cuda|cuda|1|$C2" "staging x4|cuda|cuda|4" "staging x4 2M|cuda|cuda|4|$C2"
  "unpack x1|cuda|cuda|1|TPX_SOCK_UNPACK=1" "unpack x1 2M|cuda|cuda|1|TPX_SOCK_UNPACK=1|$C2" "unpack x4|cuda|cuda|4|TPX_SOCK_UNPACK=1" "unpack x4 2M|cuda|cuda|4|TPX_SOCK_UNPACK=1|$C2")
SIZE=256M ITERS=8 ROUNDS=5 TLIM=200 abloop $OUT/ab256.txt | tee $OUT/ab256_summary.txt
echo "256 done at $((SECONDS - t0)) s"
cases=("host x1|host|host|1" "host x1 1M|host|host|1|$C1" "staging x1|cuda|cuda|1" "staging x1 1M|cuda|cuda|1|$C1"
  "unpack x1|cuda|cuda|1|TPX_SOCK_UNPACK=1" "unpack x1 1M|cuda|cuda|1|TPX_SOCK_UNPACK=1|$C1" "staging x4|cuda|cuda|4" "staging x4 1M|cuda|cuda|4|$C1")
ROUNDS=5 TLIM=330 abloop $OUT/ab64.txt | tee $OUT/ab64_summary.txt
echo "64 done at $((SECONDS - t0)) s"
T=/tmp/tl1; rm -rf $T; mkdir -p $T
tl() { # name mem env
  local n=$1 m=$2 e=${3:-X=1} g=()
  [ $m = cuda ] && g=(--gpu 0)
  env $e TPX_TIMELINE=$T/$n $B/tpx-bench server --host 127.0.0.1 --port 27100 --mem $m "${g[@]}" >$T/$n.s.log 2>&1 &
  for i in $(seq 60); do grep -q '^\[SERVER\] listening' $T/$n.s.log && break; sleep 0.05; done
  env $e TPX_TIMELINE=$T/$n timeout 60 $B/tpx-bench client 127.0.0.1 --port 27100 --mem $m "${g[@]}" --size 64M --inflight 1 --iters 20 --progress off >$T/$n.c.log 2>&1
  wait
  echo "== $n: $(sed -n 's/^\[PERF\].*BW: \([0-9.]*\) GB.*/\1/p' $T/$n.c.log | tail -1)"
  python3 bench/timeline.py $T/$n.[0-9]* 2>&1 | head -1; python3 bench/timeline.py $T/$n.[0-9]* 2>&1 | grep "^median"
}
for k in 1 2; do tl host$k host; tl cuda$k cuda; tl unpack$k cuda TPX_SOCK_UNPACK=1; done 2>&1 | tee $OUT/timelines.txt
for n in host2 cuda2 unpack2; do echo "=== $n"; python3 bench/timeline.py $T/$n.[0-9]* --sockets --wake 2>&1 | tail -42; done >$OUT/timeline_sockets.txt 2>&1
tar -C /tmp -cJf $OUT/tl1.tar.xz tl1
echo "done at $((SECONDS - t0)) s"
