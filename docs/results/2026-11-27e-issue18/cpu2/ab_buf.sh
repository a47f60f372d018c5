#!/bin/bash
# alternating: engine default / engine with X_RCVBUF / raw default / raw X_RCVBUF
B=/work/main/build; R=${R:-6}; SZ=${SZ:-64M}; INF=${INF:-1}; IT=${IT:-30}
one() { env "$@" $B/tpx-bench server --host 127.0.0.1 --port 29130 --mem host >/tmp/abs.log 2>&1 & local sp=$!
  for i in $(seq 50); do grep -q listening /tmp/abs.log && break; sleep 0.05; done
  env "$@" $B/tpx-bench client 127.0.0.1 --port 29130 --mem host --size $SZ --inflight $INF --iters $IT --progress off 2>&1 | sed -n 's/.*BW: \([0-9.]*\) GB.*/\1/p'; wait $sp; }
raw() { env "$@" $B/tpx-netbench server --port 29140 --size $SZ --inflight 1 --iters $IT >/tmp/rbs.log 2>&1 & local sp=$!; sleep 0.3
  env "$@" $B/tpx-netbench client 127.0.0.1 --port 29140 --size $SZ --inflight 1 --iters $IT 2>&1 | sed -n 's/^RESULT .* recv_gbps=\([0-9.]*\).*/\1/p'; wait $sp; }
for r in $(seq $R); do
  echo "$r eng $(one X_=1)"; echo "$r eng_nt $(one X_NOTIFY=1)"; echo "$r raw $(raw X_=1)"
done
