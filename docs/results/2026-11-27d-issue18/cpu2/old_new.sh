# old (c02b019) vs new tree, alternating: 4 KiB latency (write ping-pong) and 64 MiB x1 / x4
lat() { # bin
  local port=$((27400 + RANDOM % 500))
  $1 server --host 127.0.0.1 --port $port >/tmp/s.log 2>&1 &
  local sp=$!
  for i in $(seq 60); do grep -q '^\[SERVER\] listening' /tmp/s.log && break; sleep 0.05; done
  $1 client 127.0.0.1 --port $port $2 --progress off --json /tmp/l.json >/tmp/c.log 2>&1
  wait $sp
  python3 -c "
import json; r = json.load(open('/tmp/l.json'))['runs'][0]
print('%.2f %.2f %s' % (r['time_us'], r['latency_us']['p99'], r['gbps_per_gpu']))"
}
for r in $(seq ${ROUNDS:-7}); do
  for t in old new; do
    b=/tmp/oldtree/build/tpx-bench; [ $t = new ] && b=build/tpx-bench
    echo "$r $t lat4K $(lat $b '--latency --size 4K --iters 2000')"
    echo "$r $t bw64M $(lat $b '--size 64M --iters 20')"
    echo "$r $t bw64Mx4 $(lat $b '--size 64M --iters 20 --inflight 4')"
  done
done
