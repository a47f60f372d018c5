#!/bin/sh
# scripts/launch.sh end to end on one machine: two network namespaces are the
# two nodes, four veth links their four NICs (scripts/netns-4nic.sh), host
# memory, both modes.
#  0. --print in orchestrator mode: one command per side (any user).
#  1. GPUs 0-3 over all four links, one tpx-bench pair per GPU (per-gpu mode):
#     every pair finishes with its data check ok and the table's total.
#  1b. the same GPUs, one process per side driving all four (orchestrator
#     mode, tpx-bench --gpus 0-3): every pair's row ok.
#  2. TPX_GPU_NIC_MAP per side puts GPUs 0-1 on links 1-2: they carry the
#     data, links 3-4 next to nothing.
# Needs root (ip netns); exits 77 (skipped) without it.
# usage: launch_netns.sh SOURCE_DIR TPX_BENCH
set -eu
src=$1
bench=$2
# 0. --print, no root needed, none of LAUNCH_*: orchestrator mode prints one
#    command per side, with every GPU in it.
out=$(env -u LAUNCH_ALLOW_DIAL sh "$src/scripts/launch.sh" --print --mode orchestrator --gpus 0-3 --connect 198.18.1.2 \
  --bench "$bench" nodeA nodeB) || { echo "$out"; echo "launch_netns: --print failed" >&2; exit 1; }
[ "$(echo "$out" | grep -c -- '--gpus 0,1,2,3')" = 2 ] || { echo "$out"; echo "launch_netns: --print: not one --gpus command per side" >&2; exit 1; }
# the builtin profile names no interface of its own: each node detects its own
# (not A3-high's eth1-eth4 on every machine)
echo "$out" | grep -q 'TPX_SOCKET_IFNAME' && { echo "$out"; echo "launch_netns: --print: a default TPX_SOCKET_IFNAME" >&2; exit 1; }
[ "$(id -u)" = 0 ] || { echo "launch_netns: not root: skipped (--print checked)"; exit 77; }
command -v ip >/dev/null 2>&1 || { echo "launch_netns: no iproute2: skipped"; exit 77; }
name=tl$(($$ % 100000))
logs=$(mktemp -d /tmp/tpx-launch-test-XXXXXX)
if ! sh "$src/scripts/netns-4nic.sh" up "$name" 4 >"$logs/netns.log" 2>&1; then
  cat "$logs/netns.log"
  if grep -qi "permission\|not permitted" "$logs/netns.log"; then echo "launch_netns: skipped"; exit 77; fi
  exit 1
fi
trap 'sh "$src/scripts/netns-4nic.sh" down "$name" >/dev/null 2>&1 || true; rm -rf "$logs"' EXIT
fail() { echo "launch_netns: $1" >&2; exit 1; }
# veth carriers come up a moment after the links (bounded: 10 s).
for side in a b; do
  for k in 1 2 3 4; do
    n=0
    until [ "$(ip netns exec "$name-$side" cat "/sys/class/net/$name$side$k/operstate")" = up ]; do
      n=$((n + 1))
      [ "$n" -le 100 ] || fail "link $name$side$k not up after 10 s"
      sleep 0.1
    done
  done
done

run() { # LOGDIR GPUS [MODE], then launch.sh's environment
  export LAUNCH_ALLOW_DIAL=198.18.0.0/15 # the test links: both sides' data NICs
  sh "$src/scripts/launch.sh" --bench "$bench" --gpus "$2" --mode "${3:-per-gpu}" --mem host --connect 198.18.1.2 \
    --logdir "$1" --timeout 120 --port-base 21000 "netns:$name-b" "netns:$name-a" \
    -- --size 4M --iters 3 --warmup 1 --channels 2
}

echo "== 1: GPUs 0-3, every link"
out=$(LAUNCH_IFNAME='^lo' run "$logs/one" 0-3) || { echo "$out"; cat "$logs"/one/*.log; fail "run 1 failed"; }
echo "$out"
for g in 0 1 2 3; do
  echo "$out" | grep -Eq "^$g +[0-9.]+ +ok +0/0\$" || fail "GPU $g's row is not ok"
done
echo "$out" | grep -Eq '^total +[0-9.]+$' || fail "no total"

echo "== 1b: GPUs 0-3, one process per side (orchestrator)"
out=$(LAUNCH_IFNAME='^lo' run "$logs/orch" 0-3 orchestrator) || { echo "$out"; cat "$logs"/orch/*.log; fail "run 1b failed"; }
echo "$out"
for g in 0 1 2 3; do
  echo "$out" | grep -Eq "^$g +[0-9.]+ +ok +0/0\$" || fail "GPU $g's row is not ok (orchestrator)"
done
echo "$out" | grep -Eq '^total +[0-9.]+$' || fail "no total (orchestrator)"
[ "$(ls "$logs/orch" | wc -l)" -eq 2 ] || fail "orchestrator mode ran more than one process per side: $(ls "$logs/orch")"

tx() { # side link: bytes sent on link k of side a
  ip netns exec "$name-a" cat "/sys/class/net/${name}a$1/statistics/tx_bytes"
}
echo "== 2: TPX_GPU_NIC_MAP puts GPUs 0-1 on links 1-2"
b1=$(tx 1) b2=$(tx 2) b3=$(tx 3) b4=$(tx 4)
out=$(LAUNCH_IFNAME='^lo' LAUNCH_MAP_SERVER="0-1:${name}b1,${name}b2;2-3:${name}b3,${name}b4" \
  LAUNCH_MAP_CLIENT="0-1:${name}a1,${name}a2;2-3:${name}a3,${name}a4" run "$logs/two" 0-1) ||
  { echo "$out"; cat "$logs"/two/*.log; fail "run 2 failed"; }
echo "$out"
near=$(( $(tx 1) - b1 + $(tx 2) - b2 )) far=$(( $(tx 3) - b3 + $(tx 4) - b4 ))
echo "bytes sent on links 1-2: $near, on links 3-4: $far"
# 2 GPUs x 4 transfers x 4 MiB = 32 MiB of data from side a.
[ "$near" -ge $((32 * 1048576)) ] || fail "links 1-2 carried $near bytes, less than the data"
[ "$far" -lt 1048576 ] || fail "links 3-4 carried $far bytes: the map was not followed"
echo "launch_netns: ok"
