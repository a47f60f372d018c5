#!/bin/bash
# Issue 18 call 8: a comm with nothing staged starts with a one-chunk copy (staging.c): GPU suite, A/B against the tree before, a timeline.
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo
t0=$SECONDS
B=build-g
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench >/dev/null 2>&1 || { echo build failed; exit 1; }
rm -rf /tmp/old && mkdir -p /tmp/old && cp -r CMakeLists.txt Makefile cmake include src tools bench tests python scripts /tmp/old/ 2>/dev/null; cp -r x/old/src /tmp/old/
(cd /tmp/old && cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build build -j --target tpx-bench >/dev/null 2>&1) || { echo old build failed; exit 1; }
echo "built at $((SECONDS - t0)) s"
STEPS="engine memcheck_engine" BUILD_DIR=$PWD/build-gpu-run OUT=$OUT/suite bash tests/gpu/run.sh >/tmp/suite.log 2>&1
cp $OUT/suite/summary.txt $OUT/gpu_suite_summary.txt; rm -rf $OUT/suite
grep -E '^(PASS|FAIL|SKIP)' $OUT/gpu_suite_summary.txt
echo "suite done at $((SECONDS - t0)) s"
run() { # name bench cmem smem inflight
  local n=$1 tb=$2 cm=$3 sm=$4 inf=$5
  local sg=() cg=() port=$((27400 + RANDOM % 500))
  [ $sm = cuda ] && sg=(--gpu 1); [ $cm = cuda ] && cg=(--gpu 0)
  taskset -c 0-15 $tb server --host 127.0.0.1 --port $port --mem $sm "${sg[@]}" >/tmp/s.log 2>&1 &
  local sp=$!
  for i in $(seq 60); do grep -q '^\[SERVER\] listening' /tmp/s.log && break; sleep 0.05; done
  taskset -c 0-15 timeout 120 $tb client 127.0.0.1 --port $port --mem $cm "${cg[@]}" --size 64M --inflight $inf --iters 30 --progress off $CHK >/tmp/c.log 2>&1
  wait $sp
  local v=$(sed -n 's/^\[PERF\].*BW: \([0-9.]*\) GB.*/\1/p' /tmp/c.log | tail -1)
  [ -n "$CHK" ] && ! grep -q '^\[CHECK\] server: ok' /tmp/s.log /tmp/c.log && v=FAIL
  local cc=$(sed -n 's/^\[CPU\] client: \([0-9.]*\) s user + \([0-9.]*\) s system per GB.*/\1 \2/p' /tmp/c.log | tail -1 | awk '{printf "%.3f",$1+$2}')
  local sc=$(sed -n 's/^\[CPU\] server: \([0-9.]*\) s user + \([0-9.]*\) s system per GB.*/\1 \2/p' /tmp/s.log /tmp/c.log | tail -1 | awk '{printf "%.3f",$1+$2}')
  echo "$n|$v|$cc|$sc"
}
N=$PWD/$B/tpx-bench O=/tmp/old/build/tpx-bench
CHK=--check
for inf in 1 4; do echo "check|$(run "staging x$inf new" $N cuda cuda $inf)" >>$OUT/ab.txt; done
CHK=
cases=("host x1|$N|host|host|1" "host x4|$N|host|host|4"
  "staging x1 old|$O|cuda|cuda|1" "staging x1 new|$N|cuda|cuda|1" "staging x4 old|$O|cuda|cuda|4" "staging x4 new|$N|cuda|cuda|4"
  "sender x1 old|$O|cuda|host|1" "sender x1 new|$N|cuda|host|1")
k=${#cases[@]}
for r in $(seq ${ROUNDS:-9}); do
  [ $((SECONDS - t0)) -gt ${TLIM:-230} ] && break
  for j in $(seq 0 $((k - 1))); do
    c=${cases[$(((j + r) % k))]}
    IFS='|' read -r n tb cm sm inf <<<"$c"
    echo "$r|$(run "$n" $tb $cm $sm $inf)" >>$OUT/ab.txt
  done
done
grep '^check' $OUT/ab.txt
python3 - $OUT/ab.txt <<'PY' | tee $OUT/ab_summary.txt
import sys, statistics as st
rows = {}
for l in open(sys.argv[1]):
    r, n, v, cc, sc = l.strip().split("|")
    if r == "check": continue
    rows.setdefault(n, []).append((v, cc, sc))
med = {}
for n, vs in rows.items():
    xs = [float(v[0]) for v in vs if v[0] not in ("", "FAIL")]
    c1 = [float(v[1]) for v in vs if v[1]]; c2 = [float(v[2]) for v in vs if v[2]]
    med[n] = st.median(xs) if xs else 0
    print("%-16s %7.2f  %6.2f-%-6.2f n=%d  %.3f / %.3f" % (n, med[n], min(xs or [0]), max(xs or [0]), len(xs),
          st.median(c1) if c1 else 0, st.median(c2) if c2 else 0))
for n in med:
    if not n.startswith("host"): print("%s / host %s: %.2f" % (n, n.split()[1], med[n] / med["host " + n.split()[1]]))
PY
echo "A/B done at $((SECONDS - t0)) s"
T=/tmp/tl; rm -rf $T; mkdir -p $T
for v in new old; do
  tb=$N; [ $v = old ] && tb=$O
  TPX_TIMELINE=$T/$v taskset -c 0-15 $tb server --host 127.0.0.1 --port 27900 --mem cuda --gpu 1 >$T/s.log 2>&1 &
  for i in $(seq 60); do grep -q '^\[SERVER\] listening' $T/s.log && break; sleep 0.05; done
  TPX_TIMELINE=$T/$v taskset -c 0-15 timeout 60 $tb client 127.0.0.1 --port 27900 --mem cuda --gpu 0 --size 64M --inflight 1 --iters 20 --progress off >$T/c.log 2>&1
  wait
  echo "== $v"; python3 bench/timeline.py $T/$v.* --wake | grep -E "^write|^median|kicks"
done > $OUT/timelines.txt 2>&1
cat $OUT/timelines.txt
echo "timelines done at $((SECONDS - t0)) s"
