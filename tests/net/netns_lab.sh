#!/bin/sh
# The network lab checks its own effects, then carries a checked transfer:
#  1. scripts/netns-4nic.sh up: two namespaces, four links, carriers up.
#  2. shape: a tbf qdisc at that rate on that link's egress; loss: the
#     nftables numgen drop rule for 0.1% (1000 per million); delay: a netem
#     qdisc, or "skipped" with the reason where the kernel has no netem;
#     bad values refused, naming what exists.
#  3. down-link / up-link: the carrier goes and comes back; flap: down, then
#     up again by itself, both logged.
#  4. tpx-bench between the namespaces over all four links, one of them
#     shaped: --check, every byte verified (client and server say so), no
#     failed transfer.
#  5. bench/net.sh, one short case (iperf3 present): its table row.
#  6. clear, then down: no qdisc or rule left, namespaces and state gone.
# Root only (ip netns); exits 77 (skipped) with the reason otherwise.
# usage: netns_lab.sh SOURCE_DIR TPX_BENCH
set -eu
src=$1
bench=$2
lab="$src/scripts/netns-4nic.sh"
skip() {
  echo "netns_lab: skipped: $1"
  exit 77
}
[ "$(id -u)" = 0 ] || skip "not root (network namespaces need it)"
command -v ip >/dev/null 2>&1 || skip "no iproute2 'ip'"
command -v tc >/dev/null 2>&1 || skip "no 'tc' (iproute2)"
command -v nft >/dev/null 2>&1 || skip "no 'nft' (nftables: scripts/deps.sh --test)"
ip netns list >/dev/null 2>&1 || skip "'ip netns' does not work here"

name=tpxl$(($$ % 100000))
a="$name-a" b="$name-b"
logs=$(mktemp -d /tmp/tpx-netns-lab-XXXXXX)
spid=""
cleanup() {
  [ -n "$spid" ] && kill "$spid" 2>/dev/null
  sh "$lab" down "$name" >/dev/null 2>&1 || true
  rm -rf "$logs"
}
trap cleanup EXIT
trap 'exit 1' INT TERM
fail() {
  echo "netns_lab: FAIL: $1" >&2
  for f in "$logs"/*.log; do [ -f "$f" ] && { echo "--- $f" >&2; tail -n 15 "$f" >&2; }; done
  exit 1
}
run() { # the lab script; its output in $logs/lab.log, and its exit status
  sh "$lab" "$@" >"$logs/lab.log" 2>&1
}
carrier() { # NS DEV -> 1 when the link has its carrier (LOWER_UP)
  ip -n "$1" -o link show dev "$2" | grep -q 'LOWER_UP' && echo 1 || echo 0
}
wait_carrier() { # NS DEV WANT(0|1), bounded: 10 s
  n=0
  until [ "$(carrier "$1" "$2")" = "$3" ]; do
    n=$((n + 1))
    [ $n -le 100 ] || fail "$2 in $1: carrier not $3 after 10 s"
    sleep 0.1
  done
}

# 1. up
if ! run up "$name" 4; then
  grep -qi "permission\|not permitted" "$logs/lab.log" && skip "$(head -n 1 "$logs/lab.log")"
  fail "up"
fi
for k in 1 2 3 4; do wait_carrier "$a" "${name}a$k" 1; wait_carrier "$b" "${name}b$k" 1; done

# 2. shape, loss, delay
run shape "$name" 1 80mbit || fail "shape"
tc -n "$a" qdisc show dev "${name}a1" | grep -q 'tbf .*rate 80Mbit' || fail "shape: no tbf at 80Mbit on ${name}a1"
run shape "$name" 3 800mbit b || fail "shape b"
tc -n "$b" qdisc show dev "${name}b3" | grep -q 'tbf .*rate 800Mbit' || fail "shape b: no tbf on ${name}b3"
run loss "$name" 2 0.1 || fail "loss"
ip netns exec "$a" nft list ruleset | grep -q "oifname \"${name}a2\" numgen random mod 1000000 < 1000 .*drop" ||
  fail "loss: no numgen drop rule for ${name}a2 at 1000 per million"
run delay "$name" 4 5 || fail "delay"
if grep -q skipped "$logs/lab.log"; then
  grep -q 'netem' "$logs/lab.log" || fail "delay skipped without saying why"
  tc -n "$a" qdisc show dev "${name}a4" | grep -q netem && fail "delay: skipped, yet a netem qdisc"
  echo "netns_lab: $(cat "$logs/lab.log")"
else
  tc -n "$a" qdisc show dev "${name}a4" | grep -q 'netem .*delay 5ms' || fail "delay: no netem qdisc of 5 ms on ${name}a4"
fi
run shape "$name" 1 fast && fail "shape 'fast' accepted"
run loss "$name" 2 0.12345 && fail "loss 0.12345 accepted"
run shape "$name" 9 80mbit && fail "link 9 accepted"
grep -q "${name}a4" "$logs/lab.log" || fail "link 9: the message does not name the links there are"

# 3. down-link, up-link, flap
run down-link "$name" 4 || fail "down-link"
wait_carrier "$b" "${name}b4" 0
run up-link "$name" 4 || fail "up-link"
wait_carrier "$b" "${name}b4" 1
run flap "$name" 4 1 1 || fail "flap"
n=0
until grep -q "up at" "/run/netns-4nic/$name/flap4.log" 2>/dev/null; do
  n=$((n + 1))
  [ $n -le 100 ] || fail "flap: link 4 not back up after 10 s"
  sleep 0.1
done
grep -q "down at" "/run/netns-4nic/$name/flap4.log" || fail "flap: no 'down at' in its log"
wait_carrier "$b" "${name}b4" 1

# 4. tpx-bench over the four links, link 1 shaped, every byte checked
run loss "$name" 2 0 || fail "loss 0"
ip netns exec "$a" nft list ruleset | grep -q numgen && fail "loss 0 left a rule"
ip netns exec "$b" env TPX_SOCKET_IFNAME="=${name}b1,${name}b2,${name}b3,${name}b4" TPX_ALLOW_DIAL=198.18.0.0/15 \
  "$bench" server --host 198.18.1.2 --port 23456 >"$logs/server.log" 2>&1 &
spid=$!
n=0
until grep -q '^\[SERVER\] listening' "$logs/server.log"; do
  n=$((n + 1))
  { [ $n -le 100 ] && kill -0 "$spid" 2>/dev/null; } || fail "the server did not start"
  sleep 0.1
done
timeout 120 ip netns exec "$a" env TPX_SOCKET_IFNAME="=${name}a1,${name}a2,${name}a3,${name}a4" \
  TPX_ALLOW_DIAL=198.18.0.0/15 "$bench" client 198.18.1.2 --port 23456 --size 4M --iters 5 --channels 4 --check \
  --keep-going --progress off >"$logs/client.log" 2>&1 || fail "tpx-bench client"
timeout 30 tail --pid="$spid" -f /dev/null || fail "the server did not end"
wait "$spid" || fail "tpx-bench server"
spid=""
grep -q '^\[CHECK\] client: ok, write 4194304 x 1: every byte of 5 transfer' "$logs/client.log" || fail "no client check line"
grep -q '^\[CHECK\] server: ok, write 4194304 x 1' "$logs/server.log" || fail "no server check line"
grep -q '^\[SUMMARY\] 1 run(s), 5 transfer(s) ok, 0 failed; bytes checked: every byte' "$logs/client.log" ||
  fail "summary: not 5 ok, 0 failed, checked"

# 5. the benchmark set, one short case (iperf3 needed)
if command -v iperf3 >/dev/null 2>&1; then
  NAME="${name}n" ONLY='^healthy$' STRIPES=fixed ENGINE_SECONDS=2 IPERF_SECONDS=1 SIZE=4M RATE=400mbit \
    timeout 120 bash "$src/bench/net.sh" "$(dirname "$bench")" >"$logs/net.log" 2>&1 || fail "bench/net.sh"
  grep -Eq '^\| healthy \| host \| fixed \| [0-9.]+ \| [0-9.]+ \| [0-9.]+ \| 0 \| [0-9.]+ \| [0-9]+/[0-9]+/[0-9]+/[0-9]+ \|$' \
    "$logs/net.log" || fail "bench/net.sh: no healthy row with figures and 0 failed"
  ip netns list | grep -q "^${name}n-" && fail "bench/net.sh left its namespaces"
else
  echo "netns_lab: iperf3 not installed: bench/net.sh not run (scripts/deps.sh --test)"
fi

# 6. clear, down
run clear "$name" || fail "clear"
for k in 1 2 3 4; do
  tc -n "$a" qdisc show dev "${name}a$k" | grep -Eq 'tbf|netem' && fail "clear left a qdisc on ${name}a$k"
done
tc -n "$b" qdisc show dev "${name}b3" | grep -q tbf && fail "clear left the tbf on ${name}b3"
run down "$name" || fail "down"
ip netns list | grep -q "^$name-" && fail "down left a namespace"
[ -e "/run/netns-4nic/$name" ] && fail "down left its state folder"
echo "netns_lab: shape, loss, delay, down/up, flap and a checked transfer over four links: ok"
