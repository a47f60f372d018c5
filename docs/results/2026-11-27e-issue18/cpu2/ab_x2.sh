#!/bin/bash
B=/work/main/build; R=${R:-10}
eng() { $B/tpx-bench server --host 127.0.0.1 --port 29130 --mem host >/tmp/abs.log 2>&1 & local sp=$!
  for i in $(seq 50); do grep -q listening /tmp/abs.log && break; sleep 0.05; done
  $B/tpx-bench client 127.0.0.1 --port 29130 --mem host --size 64M --inflight $1 --iters 30 --progress off 2>&1 | sed -n 's/.*BW: \([0-9.]*\) GB.*/\1/p'; wait $sp; }
raw() { $B/tpx-netbench server --port 29140 --size 64M --inflight 1 --iters 30 >/tmp/rbs.log 2>&1 & local sp=$!; sleep 0.3
  $B/tpx-netbench client 127.0.0.1 --port 29140 --size 64M --inflight 1 --iters 30 2>&1 | sed -n 's/^RESULT .* recv_gbps=\([0-9.]*\).*/\1/p'; wait $sp; }
for r in $(seq $R); do
  echo "$r eng1 $(eng 1)"; echo "$r eng2 $(eng 2)"; echo "$r raw $(raw)"
done
