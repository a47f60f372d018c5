#!/bin/bash
# Issue 18 call 2: does the progress thread wait for a CPU? schedstat of every thread; A/B I/O threads reniced / SCHED_BATCH / fewer.
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo
t0=$SECONDS
which nsys ncu > $OUT/tools.txt 2>&1; ls /usr/local/cuda/bin | head -50 >> $OUT/tools.txt; uname -r >> $OUT/tools.txt
cat /sys/kernel/debug/sched/base_slice_ns >> $OUT/tools.txt 2>&1
B=build-g
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench tpx-netbench >/dev/null 2>&1 || { echo build failed; exit 1; }
echo "built at $((SECONDS - t0)) s"
snap() { # pid -> lines "tid name runtime_ns delay_ns"
  for d in /proc/$1/task/*; do echo "$(basename $d) $(tr ' ' _ <$d/comm) $(cut -d' ' -f1,2 $d/schedstat)"; done 2>/dev/null
}
sched() { # name cmem smem inflight env...
  local n=$1 cm=$2 sm=$3 inf=$4; shift 4
  local sg=() cg=(); [ $sm = cuda ] && sg=(--gpu 1); [ $cm = cuda ] && cg=(--gpu 0)
  env "$@" taskset -c 0-15 $B/tpx-bench server --host 127.0.0.1 --port 27300 --mem $sm "${sg[@]}" >/tmp/ss.log 2>&1 &
  local sp=$!
  for i in $(seq 60); do grep -q '^\[SERVER\] listening' /tmp/ss.log && break; sleep 0.05; done
  env "$@" taskset -c 0-15 timeout 60 $B/tpx-bench client 127.0.0.1 --port 27300 --mem $cm "${cg[@]}" --size 64M --inflight $inf --iters 2000 --progress off >/tmp/sc.log 2>&1 &
  local cp=$!
  sleep 2.5
  local c=""; for p in $(pgrep -x tpx-bench); do grep -q client /proc/$p/cmdline && c=$p; done
  snap $c >/tmp/c1; snap $sp >/tmp/s1; sleep 1.5; snap $c >/tmp/c2; snap $sp >/tmp/s2
  wait $cp; wait $sp
  echo "== $n $(sed -n 's/^\[PERF\].*BW: \([0-9.]*\) GB.*/\1/p' /tmp/sc.log | tail -1) GB/s"
  for side in c s; do
    python3 - /tmp/${side}1 /tmp/${side}2 $side <<'PY'
import sys, collections
a = {l.split()[0]: l.split() for l in open(sys.argv[1]) if len(l.split()) == 4}
b = {l.split()[0]: l.split() for l in open(sys.argv[2]) if len(l.split()) == 4}
g = collections.defaultdict(lambda: [0, 0, 0])
for t, v in b.items():
    if t not in a: continue
    name = v[1]
    key = "progress" if "progress" in name else ("io" if name.startswith("tpx-io") else name)
    g[key][0] += (int(v[2]) - int(a[t][2])) / 1.5e9
    g[key][1] += (int(v[3]) - int(a[t][3])) / 1.5e9
    g[key][2] += 1
print(" %s: " % ("client" if sys.argv[3] == "c" else "server") + "; ".join("%s x%d run %.2f wait %.2f CPUs" % (k, v[2], v[0], v[1]) for k, v in sorted(g.items(), key=lambda x: -x[1][0]) if v[0] > 0.01 or v[1] > 0.01))
PY
  done
}
{ sched "host x1" host host 1; sched "cuda x1" cuda cuda 1; sched "cuda x4" cuda cuda 4; sched "cuda x1 ionice5" cuda cuda 1 TPX_X_IONICE=5;
  sched "cuda x1 iobatch" cuda cuda 1 TPX_X_IOBATCH=1; sched "cuda x1 nthreads8" cuda cuda 1 TPX_NTHREADS=8; } > $OUT/sched.txt 2>&1
cat $OUT/sched.txt
echo "sched done at $((SECONDS - t0)) s"
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
cases=("host x1|host|host|1" "host x4|host|host|4" "host x1 ionice5|host|host|1|TPX_X_IONICE=5" "host x4 ionice5|host|host|4|TPX_X_IONICE=5"
  "cuda x1|cuda|cuda|1" "cuda x4|cuda|cuda|4" "cuda x1 ionice5|cuda|cuda|1|TPX_X_IONICE=5" "cuda x4 ionice5|cuda|cuda|4|TPX_X_IONICE=5"
  "cuda x1 iobatch|cuda|cuda|1|TPX_X_IOBATCH=1" "cuda x4 iobatch|cuda|cuda|4|TPX_X_IOBATCH=1"
  "cuda x1 ionice2|cuda|cuda|1|TPX_X_IONICE=2")
k=${#cases[@]}
: >$OUT/ab.txt
for r in $(seq ${ROUNDS:-5}); do
  [ $((SECONDS - t0)) -gt ${TLIM:-480} ] && break
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
    elif n.startswith("cuda"): print("%s / host %s: %.2f" % (n, x, med[n] / med["host " + x]))
PY
echo "A/B done at $((SECONDS - t0)) s"
