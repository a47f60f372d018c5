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
{ tl cuda_spin20 cuda cuda TPX_X_SPIN=20000; tl cuda cuda cuda; tl host host host; } >$OUT/timelines.txt 2>&1
cat $OUT/timelines.txt
tar -C /tmp -cJf $OUT/tlraw.tar.xz tlraw
echo "timelines done at $((SECONDS - t0)) s"
run() { # name cmem smem inflight env...
  local n=$1 cm=$2 sm=$3 inf=$4; shift 4
  local sg=() cg=() port=$((27400 + RANDOM % 500))
  [ $sm = cuda ] && sg=(--gpu 1); [ $cm = cuda ] && cg=(--gpu 0)
  env "$@" taskset -c 0-15 $B/tpx-bench server --host 127.0.0.1 --port $port --mem $sm "${sg[@]}" >/tmp/s.log 2>&1 &
  local sp=$!
  for i in $(seq 60); do grep -q '^\[SERVER\] listening' /tmp/s.log && break; sleep 0.05; done
  env "$@" taskset -c 0-15 timeout 120 $B/tpx-bench client 127.0.0.1 --port $port --mem $cm "${cg[@]}" --size 64M --inflight $inf --iters 30 --progress off >/tmp/c.log 2>&1
  wait $sp
  local v=$(sed -n 's/^\[PERF\].*BW: \([0-9.]*\) GB.*/\1/p' /tmp/c.log | tail -1)
  local cc=$(sed -n 's/^\[CPU\] client: \([0-9.]*\) s user + \([0-9.]*\) s system per GB.*/\1 \2/p' /tmp/c.log | tail -1 | awk '{printf "%.3f",$1+$2}')
  local sc=$(sed -n 's/^\[CPU\] server: \([0-9.]*\) s user + \([0-9.]*\) s system per GB.*/\1 \2/p' /tmp/s.log /tmp/c.log | tail -1 | awk '{printf "%.3f",$1+$2}')
  echo "$n|$v|$cc|$sc"
}
cases=("host x1|host|host|1" "host x4|host|host|4" "host x1 spin20|host|host|1|TPX_X_SPIN=20000" "host x4 spin20|host|host|4|TPX_X_SPIN=20000"
  "cuda x1|cuda|cuda|1" "cuda x4|cuda|cuda|4" "cuda x1 spin20|cuda|cuda|1|TPX_X_SPIN=20000" "cuda x4 spin20|cuda|cuda|4|TPX_X_SPIN=20000" "cuda x1 spin100|cuda|cuda|1|TPX_X_SPIN=100000" "cuda x4 spin100|cuda|cuda|4|TPX_X_SPIN=100000" "host x1 spin100|host|host|1|TPX_X_SPIN=100000" "host x4 spin100|host|host|4|TPX_X_SPIN=100000")
k=${#cases[@]}
: >$OUT/ab.txt
for r in $(seq ${ROUNDS:-7}); do
  [ $((SECONDS - t0)) -gt ${TLIM:-400} ] && break
  for j in $(seq 0 $((k - 1))); do
    c=${cases[$(((j + r) % k))]}
    IFS='|' read -r n cm sm inf e1 <<<"$c"
    ev=(X=1); [ -n "${e1:-}" ] && ev+=("$e1")
    echo "$r|$(run "$n" $cm $sm $inf "${ev[@]}")" >>$OUT/ab.txt
  done
done
python3 - $OUT/ab.txt <<'PY' | tee $OUT/ab_summary.txt
import sys, statistics as st
rows = {}
for l in open(sys.argv[1]):
    r, n, v, cc, sc = l.strip().split("|")
    rows.setdefault(n, []).append((v, cc, sc))
med = {}
for n, vs in rows.items():
    xs = [float(v[0]) for v in vs if v[0]]
    c1 = [float(v[1]) for v in vs if v[1]]; c2 = [float(v[2]) for v in vs if v[2]]
    med[n] = st.median(xs) if xs else 0
    print("%-18s %7.2f  %6.2f-%-6.2f n=%d  %.3f / %.3f" % (n, med[n], min(xs or [0]), max(xs or [0]), len(xs),
          st.median(c1) if c1 else 0, st.median(c2) if c2 else 0))
for n in med:
    p = n.split(); x = p[1]; v = " ".join(p[2:])
    h = ("host %s %s" % (x, v)).strip()
    if n.startswith("cuda") and h in med: print("%s / %s: %.2f" % (n, h, med[n] / med[h]))
PY
echo "A/B done at $((SECONDS - t0)) s"
