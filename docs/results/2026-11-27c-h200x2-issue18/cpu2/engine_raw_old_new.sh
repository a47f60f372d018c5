export TPX_SOCKET_IFNAME=lo
eng() { # build extra-args
  local b=$1; shift; local port=$((28000 + RANDOM % 1000))
  $b/tpx-bench server --host 127.0.0.1 --port $port >/tmp/s2.log 2>&1 &
  local sp=$!
  for i in $(seq 60); do grep -q '^\[SERVER\] listening' /tmp/s2.log && break; sleep 0.05; done
  timeout 60 $b/tpx-bench client 127.0.0.1 --port $port --size 64M --iters 20 --progress off "$@" >/tmp/c2.log 2>&1
  wait $sp
  sed -n 's/^\[PERF\].*BW: \([0-9.]*\) GB.*/\1/p' /tmp/c2.log | tail -1
}
raw() {
  local b=$1 port=$((29000 + RANDOM % 1000))
  $b/tpx-netbench server --port $port --size 64M --inflight 1 --iters 20 >/tmp/s3.log 2>&1 &
  local sp=$!; sleep 0.3
  timeout 60 $b/tpx-netbench client 127.0.0.1 --port $port --size 64M --inflight 1 --iters 20 >/tmp/c3.log 2>&1
  wait $sp
  sed -n "s/^RESULT .* recv_gbps=\([0-9.]*\).*/\1/p" /tmp/c3.log /tmp/s3.log | head -n 1
}
for r in 1 2 3 4 5 6 7; do
  if [ $((r % 2)) = 1 ]; then o=(old new); else o=(new old); fi
  for v in "${o[@]}"; do
    b=/work/main/build; [ $v = old ] && b=/tmp/old/build
    echo "$r $v eng $(eng $b)"; echo "$r $v raw $(raw $b)"
  done
done
