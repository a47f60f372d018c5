export TPX_SOCKET_IFNAME=lo
lat() {
  local b=$1 port=$((28000 + RANDOM % 1000))
  $b/tpx-bench server --host 127.0.0.1 --port $port >/tmp/s4.log 2>&1 &
  local sp=$!
  for i in $(seq 60); do grep -q '^\[SERVER\] listening' /tmp/s4.log && break; sleep 0.05; done
  timeout 60 $b/tpx-bench client 127.0.0.1 --port $port --latency --iters 3000 --progress off >/tmp/c4.log 2>&1
  wait $sp
  awk '/^ +4096 /{print $4, $9}' /tmp/c4.log | tail -1
}
for r in 1 2 3 4 5 6 7; do
  if [ $((r % 2)) = 1 ]; then o=(old new); else o=(new old); fi
  for v in "${o[@]}"; do b=/work/main/build; [ $v = old ] && b=/tmp/old/build; echo "$r $v $(lat $b)"; done
done
