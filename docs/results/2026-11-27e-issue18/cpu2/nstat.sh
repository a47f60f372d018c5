#!/bin/bash
B=/work/main/build
snap() { nstat -z 2>/dev/null | awk '/TcpExtTCPRcvCollapsed|TcpExtPruneCalled|TcpExtRcvPruned|TcpExtTCPBacklogCoalesce|TcpExtTCPRcvCoalesce|TcpExtTCPOFOQueue|TcpExtTCPBacklogDrop|TcpExtTCPZeroWindowDrop|TcpExtTCPRcvQDrop|TcpExtTCPWantZeroWindowAdv|TcpExtTCPToZeroWindowAdv|TcpExtTCPFromZeroWindowAdv|TcpExtDelayedACKs|TcpExtTCPHPHits|TcpExtTCPPureAcks|TcpExtTCPHPAcks|TcpExtTCPMemoryPressures/{print $1, $2}'; }
nstat -n >/dev/null 2>&1
$B/tpx-bench server --host 127.0.0.1 --port 29220 --mem host >/tmp/es.log 2>&1 & sp=$!; sleep 0.5
$B/tpx-bench client 127.0.0.1 --port 29220 --mem host --size 64M --inflight 1 --iters 100 --progress off > /tmp/ec.log 2>&1
wait $sp; echo "== engine 6.7 GB: $(grep -o 'BW: [0-9.]*' /tmp/ec.log)"; snap
nstat -n >/dev/null 2>&1
$B/tpx-netbench server --port 29230 --size 64M --inflight 1 --iters 100 >/tmp/rs.log 2>&1 & sp=$!; sleep 0.3
$B/tpx-netbench client 127.0.0.1 --port 29230 --size 64M --inflight 1 --iters 100 > /tmp/rc.log 2>&1; wait $sp
echo "== raw 6.7 GB (+warmup): $(grep -o 'recv_gbps=[0-9.]*' /tmp/rc.log)"; snap
