#!/bin/bash
# Session 5 call 3: the same cases with and without an MPS daemon (both processes on GPU 0), alternating blocks
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo SGPU=0 CGPU=0
t0=$SECONDS
B=build-g
which nvidia-cuda-mps-control > $OUT/mps_which.txt 2>&1 || { echo "no MPS"; cat $OUT/mps_which.txt; exit 1; }
nvidia-smi -q | grep -iE "compute mode|MIG Mode" -A1 | head -6 > $OUT/gpu_mode.txt
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench >/dev/null 2>&1 || { echo build failed; exit 1; }
. x/ab.sh
export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps-pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps-log
mkdir -p /tmp/mps-pipe /tmp/mps-log
mps_on() { nvidia-cuda-mps-control -d && sleep 0.5; }
mps_off() { echo quit | nvidia-cuda-mps-control >/dev/null 2>&1; sleep 1; }
cases=("host x1|host|host|1" "stg x1|cuda|cuda|1" "unpack x1|cuda|cuda|1|TPX_SOCK_UNPACK=1" "host x4|host|host|4" "stg x4|cuda|cuda|4" "unpack x4|cuda|cuda|4|TPX_SOCK_UNPACK=1")
: > $OUT/mps_ab.txt
for r in 1 2 3 4; do
  [ $((SECONDS - t0)) -gt 420 ] && break
  for mode in off on; do
    [ $mode = on ] && mps_on
    for c in "${cases[@]}"; do
      IFS='|' read -r n cm sm inf e1 <<<"$c"
      echo "$r|$(run "$n mps-$mode" $cm $sm $inf X=1 ${e1:-X2=1})" >> $OUT/mps_ab.txt
    done
    [ $mode = on ] && mps_off
  done
done
python3 - $OUT/mps_ab.txt <<'PY' | tee $OUT/mps_ab_summary.txt
import sys, statistics as st
rows = {}
for l in open(sys.argv[1]):
    r, n, v, cc, sc = l.strip().split("|")
    if v: rows.setdefault(n, []).append((float(v), cc, sc))
for n, vs in rows.items():
    xs = [v[0] for v in vs]
    print("%-22s %6.2f  %6.2f-%-6.2f n=%d  cpu %s / %s" % (n, st.median(xs), min(xs), max(xs), len(xs), vs[len(vs)//2][1], vs[len(vs)//2][2]))
PY
# one timeline of staging x1 with MPS
mps_on
rm -rf /tmp/tl; mkdir -p /tmp/tl
TPX_TIMELINE=/tmp/tl/t $B/tpx-bench server --host 127.0.0.1 --port 27910 --mem cuda --gpu 0 >/tmp/s.log 2>&1 & sp=$!
for i in $(seq 60); do grep -q '^\[SERVER\] listening' /tmp/s.log && break; sleep 0.05; done
TPX_TIMELINE=/tmp/tl/t $B/tpx-bench client 127.0.0.1 --port 27910 --mem cuda --gpu 0 --size 64M --inflight 1 --iters 40 --progress off > /tmp/c.log 2>&1
wait $sp
mps_off
{ grep PERF /tmp/c.log; python3 bench/timeline.py /tmp/tl/t.* --sockets --wake; } > $OUT/tl_stg_x1_mps.txt 2>&1
python3 bench/timeline.py /tmp/tl/t.* --plot $OUT/tl_stg_x1_mps.png --label "staging x1, MPS" >/dev/null 2>&1 || true
pgrep -a mps >> $OUT/mps_which.txt || echo "no MPS process left" >> $OUT/mps_which.txt
echo "done at $((SECONDS - t0)) s"
