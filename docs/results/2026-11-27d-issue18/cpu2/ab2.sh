#!/bin/bash
# local 2-core A/B: host 64M x1 engine variants vs raw
B=build; t0=$SECONDS
run() { # name env...
  local n=$1; shift; local port=$((27400 + RANDOM % 500))
  env "$@" $B/tpx-bench server --host 127.0.0.1 --port $port >/tmp/s.log 2>&1 &
  local sp=$!
  for i in $(seq 60); do grep -q '^\[SERVER\] listening' /tmp/s.log && break; sleep 0.05; done
  env "$@" timeout 120 $B/tpx-bench client 127.0.0.1 --port $port --size 64M --inflight ${INF:-1} --iters 20 --progress off >/tmp/c.log 2>&1
  wait $sp
  local v=$(sed -n 's/^\[PERF\].*BW: \([0-9.]*\) GB.*/\1/p' /tmp/c.log | tail -1)
  local cc=$(sed -n 's/^\[CPU\] client: \([0-9.]*\) s user + \([0-9.]*\) s system per GB.*/\1 \2/p' /tmp/c.log | tail -1 | awk '{printf "%.3f",$1+$2}')
  local sc=$(sed -n 's/^\[CPU\] server: \([0-9.]*\) s user + \([0-9.]*\) s system per GB.*/\1 \2/p' /tmp/s.log /tmp/c.log | tail -1 | awk '{printf "%.3f",$1+$2}')
  echo "$n|$v|$cc|$sc"
}
rawrun() {
  local port=$((27400 + RANDOM % 500))
  $B/tpx-netbench server --port $port --size 64M --inflight ${INF:-1} --iters 20 >/tmp/rs.log 2>&1 &
  local sp=$!; sleep 0.3
  timeout 120 $B/tpx-netbench client 127.0.0.1 --port $port --size 64M --inflight ${INF:-1} --iters 20 >/tmp/rc.log 2>&1
  wait $sp
  echo "raw|$(sed -n 's/^RESULT .* recv_gbps=\([0-9.]*\).*/\1/p' /tmp/rc.log /tmp/rs.log | head -1)||"
}
f=${F:-/tmp/ab2.txt}; : >$f
for r in $(seq ${ROUNDS:-5}); do
  for c in "${cases[@]}"; do :; done
  k=${#cases[@]}
  for j in $(seq 0 $((k - 1))); do
    c=${cases[$(((j + r) % k))]}
    IFS='|' read -r n e1 e2 <<<"$c"
    if [ "$n" = raw ]; then echo "$r|$(rawrun)" >>$f; continue; fi
    ev=(X=1); [ -n "${e1:-}" ] && ev+=("$e1"); [ -n "${e2:-}" ] && ev+=("$e2")
    echo "$r|$(run "$n" "${ev[@]}")" >>$f
  done
done
python3 - $f <<'PY'
import sys, statistics as st
rows = {}
for l in open(sys.argv[1]):
    r, n, v, cc, sc = l.strip().split("|")
    rows.setdefault(n, []).append((v, cc, sc))
for n, vs in rows.items():
    xs = [float(v[0]) for v in vs if v[0]]
    c1 = [float(v[1]) for v in vs if v[1]]; c2 = [float(v[2]) for v in vs if v[2]]
    print("%-24s %7.2f  %6.2f-%-6.2f n=%d  %.3f / %.3f" % (n, st.median(xs) if xs else 0, min(xs or [0]), max(xs or [0]), len(xs),
          st.median(c1) if c1 else 0, st.median(c2) if c2 else 0))
PY
