#!/bin/bash
# Session 4 call 5 (single GPU, 16 CPUs, 54217ec): CPU ticks per thread kind of the receiving process, unpack vs staging vs host, 64 MiB x4.
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo
B=build-g
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench >/dev/null 2>&1 || { echo build failed; exit 1; }
ticks() { # pid -> "name ticks" per thread
  for t in /proc/$1/task/*; do n=$(cat $t/comm 2>/dev/null); set -- $(cut -d' ' -f14,15 $t/stat 2>/dev/null); echo "${n%%-[0-9]*} $(( ${1:-0} + ${2:-0} ))"; done
}
one() { # name mem env
  local n=$1 m=$2 e=${3:-X=1} g=() port=$((27400 + RANDOM % 500))
  [ $m = cuda ] && g=(--gpu 0)
  env $e $B/tpx-bench server --host 127.0.0.1 --port $port --mem $m "${g[@]}" >/tmp/s.log 2>&1 &
  local sp=$!
  for i in $(seq 60); do grep -q '^\[SERVER\] listening' /tmp/s.log && break; sleep 0.05; done
  env $e $B/tpx-bench client 127.0.0.1 --port $port --mem $m "${g[@]}" --size 64M --inflight 4 --iters 2500 --progress off >/tmp/c.log 2>&1 &
  local cp=$!
  sleep 1.0; ticks $sp >/tmp/t0; local bw0=$(date +%s.%N); sleep 1.5; ticks $sp >/tmp/t1
  wait $cp; wait $sp
  local bw=$(sed -n 's/^\[PERF\].*BW: \([0-9.]*\) GB.*/\1/p' /tmp/c.log | tail -1)
  python3 - "$n" "$bw" <<'PY'
import sys, collections
def rd(f):
    d = collections.Counter()
    for l in open(f):
        k, v = l.split(); d[k] += int(v)
    return d
a, b = rd("/tmp/t0"), rd("/tmp/t1")
gb = float(sys.argv[2]) * 1.5
print(sys.argv[1], sys.argv[2], "GB/s; receiver CPU s per GB by thread kind:", " ".join("%s %.3f" % (k, (b[k] - a[k]) / 100 / gb) for k in sorted(b)))
PY
}
for r in 1 2 3; do one host host; one staging cuda; one unpack cuda TPX_SOCK_UNPACK=1; done 2>&1 | tee $OUT/thread_cpu.txt
