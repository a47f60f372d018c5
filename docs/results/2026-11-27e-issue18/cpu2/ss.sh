#!/bin/bash
# sample receive-queue bytes (Recv-Q) of loopback data sockets during engine / raw runs
B=/work/main/build
samp() { for i in $(seq 200); do ss -tnH state established | awk '$1>100000||$2>100000{q+=$1; s+=$2} END{print q+0, s+0}'; sleep 0.01; done | awk '{q+=$1; s+=$2; n++} END{printf "mean recvq %.1f MB sendq %.1f MB\n", q/n/1e6, s/n/1e6}'; }
$B/tpx-bench server --host 127.0.0.1 --port 29200 --mem host >/tmp/es.log 2>&1 & sp=$!; sleep 0.5
$B/tpx-bench client 127.0.0.1 --port 29200 --mem host --size 64M --inflight 1 --iters 200 --progress off > /tmp/ec.log 2>&1 & cp=$!
sleep 1; echo "eng $(samp)"; wait $cp $sp; grep PERF /tmp/ec.log | sed 's/.*BW/BW/'
$B/tpx-netbench server --port 29210 --size 64M --inflight 1 --iters 300 >/tmp/rs.log 2>&1 & sp=$!; sleep 0.3
$B/tpx-netbench client 127.0.0.1 --port 29210 --size 64M --inflight 1 --iters 300 > /tmp/rc.log 2>&1 & cp=$!
sleep 1; echo "raw $(samp)"; wait $cp $sp; grep RESULT /tmp/rc.log
