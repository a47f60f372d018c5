#!/bin/sh
# Two network namespaces joined by N veth links (default 4), each link one
# "NIC" of the built-in transport: the topology of tests/engine/test_engine_netns.c,
# kept up by hand for benchmarks. Needs root and iproute2.
#
#   scripts/netns-4nic.sh up     [NAME] [N]   create NAME-a / NAME-b and N links
#   scripts/netns-4nic.sh down   [NAME]       delete both namespaces (and the links)
#   scripts/netns-4nic.sh status [NAME]       links, addresses, byte counters
#
# NAME defaults to tpxb (at most 10 characters: interface names are
# NAME a|b k, at most 15). Link k (1..N) joins NAMEa<k> 198.18.<k>.1/24 in
# NAME-a with NAMEb<k> 198.18.<k>.2/24 in NAME-b (198.18.0.0/15 is reserved for
# benchmarking, RFC 2544). MTU=9000 in the environment sets the links' MTU.
#
# After `up` it prints the tpx-bench commands that use all links.
set -eu

cmd="${1:-}"
name="${2:-tpxb}"
n="${3:-4}"
nsa="$name-a"
nsb="$name-b"

die() {
  echo "netns-4nic: $*" >&2
  exit 1
}

[ ${#name} -le 10 ] || die "NAME '$name' is longer than 10 characters"
case "$name" in *[!A-Za-z0-9_]*) die "NAME '$name': letters, digits and _ only" ;; esac
case "$n" in '' | *[!0-9]*) die "N '$n' is not a number" ;; esac
if [ "$n" -lt 1 ] || [ "$n" -gt 8 ]; then die "N must be 1..8"; fi
command -v ip >/dev/null 2>&1 || die "iproute2 'ip' not found"

exists() { ip netns list | awk '{print $1}' | grep -qx "$1"; }

iflist() { # comma-separated interface names of one side (a or b)
  side="$1"
  out=""
  k=1
  while [ "$k" -le "$2" ]; do
    out="$out${out:+,}$name$side$k"
    k=$((k + 1))
  done
  echo "$out"
}

links_of() { # number of links present in a namespace
  ip -n "$1" -o link show 2>/dev/null | awk -F': ' '{print $2}' | sed 's/@.*//' |
    grep -c "^${name}[ab][0-9]*\$" || true
}

down() {
  for ns in "$nsa" "$nsb"; do
    if exists "$ns"; then
      ip netns del "$ns" && echo "deleted $ns"
    fi
  done
}

up() {
  if exists "$nsa" || exists "$nsb"; then
    die "$nsa or $nsb exists already: '$0 down $name' first"
  fi
  # On any failure, remove what was made.
  trap 'down >/dev/null 2>&1' EXIT
  ip netns add "$nsa"
  ip netns add "$nsb"
  ip -n "$nsa" link set lo up
  ip -n "$nsb" link set lo up
  k=1
  while [ "$k" -le "$n" ]; do
    ip link add "${name}a$k" netns "$nsa" type veth peer name "${name}b$k" netns "$nsb"
    ip -n "$nsa" addr add "198.18.$k.1/24" dev "${name}a$k"
    ip -n "$nsb" addr add "198.18.$k.2/24" dev "${name}b$k"
    if [ -n "${MTU:-}" ]; then
      ip -n "$nsa" link set "${name}a$k" mtu "$MTU"
      ip -n "$nsb" link set "${name}b$k" mtu "$MTU"
    fi
    ip -n "$nsa" link set "${name}a$k" up
    ip -n "$nsb" link set "${name}b$k" up
    k=$((k + 1))
  done
  trap - EXIT
  ifa=$(iflist a "$n")
  ifb=$(iflist b "$n")
  echo "up: $nsa ($ifa) <-> $nsb ($ifb), 198.18.1..$n.0/24"
  echo
  echo "benchmark over all $n links (channels spread round robin over the links):"
  echo "  ip netns exec $nsb env TPX_SOCKET_IFNAME==$ifb TPX_ALLOW_DIAL=198.18.0.0/15 build/tpx-bench server --host 198.18.1.2 &"
  echo "  ip netns exec $nsa env TPX_SOCKET_IFNAME==$ifa TPX_ALLOW_DIAL=198.18.0.0/15 build/tpx-bench client 198.18.1.2 --channels $((2 * n))"
  echo "counters: $0 status $name     teardown: $0 down $name"
}

status() {
  for ns in "$nsa" "$nsb"; do
    if ! exists "$ns"; then
      echo "$ns: absent"
      continue
    fi
    echo "$ns: $(links_of "$ns") link(s)"
    ip -n "$ns" -o -4 addr show | awk '$2 != "lo" {print "  " $2 " " $4}'
    for dev in $(ip -n "$ns" -o link show | awk -F': ' '{print $2}' | sed 's/@.*//' | grep "^${name}[ab][0-9]*\$"); do
      rx=$(ip netns exec "$ns" cat "/sys/class/net/$dev/statistics/rx_bytes")
      tx=$(ip netns exec "$ns" cat "/sys/class/net/$dev/statistics/tx_bytes")
      state=$(ip netns exec "$ns" cat "/sys/class/net/$dev/operstate")
      echo "  $dev $state rx_bytes $rx tx_bytes $tx"
    done
  done
}

case "$cmd" in
up) up ;;
down) down ;;
status) status ;;
*)
  sed -n '2,/^set/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'
  exit 2
  ;;
esac
