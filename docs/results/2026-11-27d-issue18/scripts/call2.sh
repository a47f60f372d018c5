#!/bin/bash
# Session 4 call 2 (single GPU, 16 CPUs): staging copies by SM vs copy engine per direction, 64 MiB x1/x4.
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo SGPU=0 CGPU=0
t0=$SECONDS
B=build-g
nproc; nvidia-smi --query-gpu=name --format=csv,noheader
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench tpx-netbench >/dev/null 2>&1 || { echo build failed; exit 1; }
echo "built at $((SECONDS - t0)) s"
. x/ab.sh
U=TPX_SOCK_UNPACK=1
cases=("host x1|host|host|1" "host x4|host|host|4"
  "staging x1|cuda|cuda|1" "staging x4|cuda|cuda|4" "staging x1 ce|cuda|cuda|1|TPX_STAGING_COPY=ce" "staging x4 ce|cuda|cuda|4|TPX_STAGING_COPY=ce"
  "staging x1 ce,sm|cuda|cuda|1|TPX_STAGING_COPY=ce,sm" "staging x4 ce,sm|cuda|cuda|4|TPX_STAGING_COPY=ce,sm"
  "staging x1 sm,ce|cuda|cuda|1|TPX_STAGING_COPY=sm,ce" "staging x4 sm,ce|cuda|cuda|4|TPX_STAGING_COPY=sm,ce"
  "unpack x1|cuda|cuda|1|$U" "unpack x4|cuda|cuda|4|$U" "unpack x1 ce,sm|cuda|cuda|1|$U|TPX_STAGING_COPY=ce,sm" "unpack x4 ce,sm|cuda|cuda|4|$U|TPX_STAGING_COPY=ce,sm")
ROUNDS=7 TLIM=300 abloop $OUT/ab_copy.txt | tee $OUT/ab_copy_summary.txt
echo "ab done at $((SECONDS - t0)) s"
T=/tmp/tl2; rm -rf $T; mkdir -p $T
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
for k in 1 2; do tl cuda$k cuda; tl cudace$k cuda TPX_STAGING_COPY=ce; tl cudacesm$k cuda TPX_STAGING_COPY=ce,sm; done 2>&1 | tee $OUT/timelines2.txt
tar -C /tmp -cJf $OUT/tl2.tar.xz tl2
echo "done at $((SECONDS - t0)) s"
