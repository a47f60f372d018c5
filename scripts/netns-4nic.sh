#!/bin/sh
# Two network namespaces joined by N veth links (default 4), each link one
# "NIC" of the built-in transport: the topology of tests/engine/test_engine_netns.c,
# kept up by hand for benchmarks, with each link's rate, loss, delay and
# state set on its own (the network lab of bench/net.sh). Needs root,
# iproute2 (ip, tc) and, for loss, nftables (nft).
#
#   scripts/netns-4nic.sh up     [NAME] [N]   create NAME-a / NAME-b and N links
#   scripts/netns-4nic.sh down   [NAME]       delete both namespaces (the links,
#                                             qdiscs, nft rules with them) and
#                                             stop NAME's scheduled flaps
#   scripts/netns-4nic.sh status [NAME]       links, state, addresses, byte
#                                             counters, qdiscs, loss rules
#   scripts/netns-4nic.sh shape     NAME LINK RATE [SIDE]   tbf RATE (800mbit,
#                                   80mbit, 1gbit..., or off) on SIDE's egress
#   scripts/netns-4nic.sh loss      NAME LINK PERCENT [SIDE]  drop PERCENT (0.1,
#                                   1, 0 = off; at most 4 decimals) of SIDE's
#                                   egress packets at random (nftables numgen)
#   scripts/netns-4nic.sh delay     NAME LINK MS [SIDE]   netem delay (0 = off)
#                                   where the kernel has sch_netem; else says
#                                   it is skipped and why (exit 0)
#   scripts/netns-4nic.sh down-link NAME LINK   carrier off (both ends)
#   scripts/netns-4nic.sh up-link   NAME LINK   carrier on again
#   scripts/netns-4nic.sh flap      NAME LINK AT [FOR]   in the background:
#                                   down-link AT s from now, up-link FOR s
#                                   (default 10) later; prints its pid, logs
#                                   the times (UTC, ms) to the state folder
#   scripts/netns-4nic.sh clear     NAME [LINK]  no shaping, loss or delay;
#                                   links up (LINK: that link only)
#
# NAME defaults to tpxb (at most 10 characters: interface names are
# NAME a|b k, at most 15). Link k (1..N) joins NAMEa<k> 198.18.<k>.1/24 in
# NAME-a with NAMEb<k> 198.18.<k>.2/24 in NAME-b (198.18.0.0/15 is reserved for
# benchmarking, RFC 2544). MTU=9000 in the environment sets the links' MTU.
# SIDE is a (default: NAME-a's egress, the client's in the commands `up`
# prints, so the data the client writes) or b. A link's rate and delay
# compose (netem, then tbf under it); each command replaces that setting only.
# State (rates, delays, flap logs and pids): /run/netns-4nic/NAME (STATE_DIR).
#
# After `up` it prints the tpx-bench commands that use all links.
set -eu

cmd="${1:-}"
name="${2:-tpxb}"
nsa="$name-a"
nsb="$name-b"
state="${STATE_DIR:-/run/netns-4nic}/$name"
nft_table=netns4nic

die() {
  echo "netns-4nic: $*" >&2
  exit 1
}
usage() {
  sed -n '2,/^set/p' "$0" | grep '^#' | sed 's/^# \{0,1\}//'
  exit 2
}

[ ${#name} -le 10 ] || die "NAME '$name' is longer than 10 characters"
case "$name" in *[!A-Za-z0-9_]*) die "NAME '$name': letters, digits and _ only" ;; esac
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

stop_flaps() {
  [ -d "$state" ] || return 0
  for f in "$state"/flap*.pid; do
    [ -f "$f" ] || continue
    p=$(cat "$f")
    # only our own flap: its command line names this script and NAME
    if [ -n "$p" ] && tr '\0' ' ' <"/proc/$p/cmdline" 2>/dev/null | grep -q "netns-4nic.*flap-run $name "; then
      kill "$p" 2>/dev/null || true
    fi
    rm -f "$f"
  done
}

down() {
  stop_flaps
  for ns in "$nsa" "$nsb"; do
    if exists "$ns"; then
      ip netns del "$ns" && echo "deleted $ns"
    fi
  done
  rm -rf "$state"
}

up() {
  n="${3:-4}"
  case "$n" in '' | *[!0-9]*) die "N '$n' is not a number" ;; esac
  if [ "$n" -lt 1 ] || [ "$n" -gt 8 ]; then die "N must be 1..8"; fi
  if exists "$nsa" || exists "$nsb"; then
    die "$nsa or $nsb exists already: '$0 down $name' first"
  fi
  # On any failure, remove what was made.
  trap 'down >/dev/null 2>&1' EXIT
  rm -rf "$state"
  mkdir -p "$state"
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
  echo "shape a link: $0 shape $name 1 800mbit     loss: $0 loss $name 2 0.1     flap: $0 flap $name 3 5 10"
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
      st=$(ip netns exec "$ns" cat "/sys/class/net/$dev/operstate")
      echo "  $dev $st rx_bytes $rx tx_bytes $tx"
      tc -n "$ns" qdisc show dev "$dev" | { grep -E 'tbf|netem' || true; } | sed 's/^/    qdisc: /'
    done
    if command -v nft >/dev/null 2>&1 && ip netns exec "$ns" nft list table inet "$nft_table" >/dev/null 2>&1; then
      ip netns exec "$ns" nft list table inet "$nft_table" | grep 'numgen' | sed 's/^[[:space:]]*/    nft: /'
    fi
  done
  for f in "$state"/flap*.log; do [ -f "$f" ] && sed "s/^/  $(basename "$f" .log): /" "$f"; done
  return 0
}

# ---- per-link settings ----------------------------------------------------

# LINK [SIDE] -> ns, dev (checked: the namespaces are up and have that link)
link_of() {
  case "$1" in '' | *[!0-9]*) die "LINK '$1': a link number (1..8)" ;; esac
  side="${2:-a}"
  case "$side" in a) ns=$nsa ;; b) ns=$nsb ;; *) die "SIDE '$side': a or b" ;; esac
  exists "$ns" || die "$ns does not exist: '$0 up $name' first"
  dev="$name$side$1"
  ip -n "$ns" link show dev "$dev" >/dev/null 2>&1 ||
    die "link $1: no $dev in $ns (links: $(iflist "$side" "$(links_of "$ns")"))"
}

rate_bits() { # 800mbit -> 800000000; empty when not a rate tc takes
  echo "$1" | awk '{
    if (match($0, /^[0-9]+(\.[0-9]+)?/) == 0) exit
    v = substr($0, 1, RLENGTH); u = substr($0, RLENGTH + 1)
    m = u == "bit" ? 1 : u == "kbit" ? 1e3 : u == "mbit" ? 1e6 : u == "gbit" ? 1e9 : 0
    if (m == 0 || v * m < 8000) exit
    printf "%.0f\n", v * m
  }'
}

netem_ok() { # 0 when this kernel has netem (a trial qdisc on a veth of our own)
  [ -f "$state/netem" ] && { [ "$(cat "$state/netem")" = yes ]; return; }
  # on a veth pair of its own: the links' qdiscs stay as they are
  ip -n "$nsa" link add "${name}n0" type veth peer name "${name}n1"
  if tc -n "$nsa" qdisc add dev "${name}n0" root netem delay 1ms 2>"$state/netem.why"; then
    ip -n "$nsa" link del "${name}n0"
    echo yes >"$state/netem"
  else
    ip -n "$nsa" link del "${name}n0"
    why=$(cat "$state/netem.why")
    if command -v modinfo >/dev/null 2>&1 && ! modinfo sch_netem >/dev/null 2>&1; then why="$why; modinfo: no sch_netem module"; fi
    if [ -r /proc/config.gz ] && zcat /proc/config.gz 2>/dev/null | grep -q '^# CONFIG_NET_SCH_NETEM is not set'; then
      why="$why; the kernel is built without it (CONFIG_NET_SCH_NETEM is not set)"
    fi
    echo "$why" >"$state/netem.why"
    echo no >"$state/netem"
    return 1
  fi
}

# The qdiscs of one link side from its state: netem (delay) at the root and
# tbf (rate) under it, either alone, or none.
apply_qdisc() { # ns dev key
  rate=$(cat "$state/$3.rate" 2>/dev/null || true)
  delay=$(cat "$state/$3.delay" 2>/dev/null || true)
  tc -n "$1" qdisc del dev "$2" root 2>/dev/null || true
  parent="root"
  if [ -n "$delay" ]; then
    tc -n "$1" qdisc add dev "$2" root handle 1: netem delay "${delay}ms" limit 100000
    parent="parent 1:1"
  fi
  if [ -n "$rate" ]; then
    bits=$(rate_bits "$rate")
    # burst: 10 ms at the rate (at least 32 KiB, over one timer tick at HZ
    # 1000); queue: 50 ms of it
    burst=$((bits / 8 / 100))
    [ "$burst" -ge 32768 ] || burst=32768
    # shellcheck disable=SC2086
    tc -n "$1" qdisc add dev "$2" $parent handle 2: tbf rate "$rate" burst "$burst" latency 50ms
  fi
}

shape() { # LINK RATE [SIDE]
  [ $# -ge 2 ] || usage
  link_of "$1" "${3:-}"
  key="$1${side}"
  if [ "$2" = off ] || [ "$2" = 0 ]; then
    rm -f "$state/$key.rate"
  else
    [ -n "$(rate_bits "$2")" ] || die "RATE '$2': a rate such as 800mbit, 80mbit, 1gbit (at least 8kbit), or off"
    mkdir -p "$state"
    echo "$2" >"$state/$key.rate"
  fi
  apply_qdisc "$ns" "$dev" "$key"
  echo "link $1 ($dev, $ns egress): rate ${2}"
}

delay() { # LINK MS [SIDE]
  [ $# -ge 2 ] || usage
  link_of "$1" "${3:-}"
  key="$1${side}"
  case "$2" in '' | *[!0-9]*) die "MS '$2': whole milliseconds (0 = off)" ;; esac
  [ "$2" -le 10000 ] || die "MS '$2': at most 10000"
  mkdir -p "$state"
  if [ "$2" = 0 ]; then
    rm -f "$state/$key.delay"
  elif ! netem_ok; then
    echo "link $1: delay ${2} ms skipped: netem is not available here ($(cat "$state/netem.why"))"
    return 0
  else
    echo "$2" >"$state/$key.delay"
  fi
  apply_qdisc "$ns" "$dev" "$key"
  echo "link $1 ($dev, $ns egress): delay ${2} ms"
}

loss() { # LINK PERCENT [SIDE]
  [ $# -ge 2 ] || usage
  link_of "$1" "${3:-}"
  command -v nft >/dev/null 2>&1 || die "loss needs nftables ('nft' not found; scripts/deps.sh --test)"
  # per million, from a percentage with at most 4 decimals (0.1 -> 1000)
  ppm=""
  case "$2" in
  '' | *[!0-9.]* | .* | *. | *.*.* | *.?????*) ;;
  *) ppm=$(awk -v p="$2" 'BEGIN { if (p <= 100) printf "%.0f\n", p * 10000 }') ;;
  esac
  [ -n "$ppm" ] || die "PERCENT '$2': a percentage in [0, 100] with at most 4 decimals (0.1 drops one packet in 1000)"
  chain="loss_$dev"
  ip netns exec "$ns" nft add table inet "$nft_table"
  if ip netns exec "$ns" nft list chain inet "$nft_table" "$chain" >/dev/null 2>&1; then
    ip netns exec "$ns" nft delete chain inet "$nft_table" "$chain"
  fi
  if [ "$ppm" -gt 0 ]; then
    ip netns exec "$ns" nft add chain inet "$nft_table" "$chain" '{ type filter hook output priority 0; policy accept; }'
    ip netns exec "$ns" nft add rule inet "$nft_table" "$chain" oifname "$dev" numgen random mod 1000000 lt "$ppm" \
      counter drop comment "\"netns-4nic loss $2%\""
  fi
  echo "link $1 ($dev, $ns egress): loss $2% ($ppm per million packets)"
}

set_link() { # LINK up|down
  link_of "$1"
  ip -n "$ns" link set "$dev" "$2"
  echo "link $1 ($dev): $2 at $(date -u +%H:%M:%S.%3N)"
}

flap() { # LINK AT [FOR]
  [ $# -ge 2 ] || usage
  link_of "$1"
  for v in "$2" "${3:-10}"; do
    case "$v" in '' | *[!0-9.]* | *.*.*) die "AT / FOR '$v': seconds (0 < s <= 600)" ;; esac
    awk -v s="$v" 'BEGIN { exit !(s > 0 && s <= 600) }' || die "AT / FOR '$v': seconds (0 < s <= 600)"
  done
  mkdir -p "$state"
  log="$state/flap$1.log"
  : >"$log"
  # setsid: the flap outlives this command but not `down` (stop_flaps)
  setsid sh "$0" flap-run "$name" "$1" "$2" "${3:-10}" >>"$log" 2>&1 </dev/null &
  echo $! >"$state/flap$1.pid"
  echo "link $1 ($dev): down in $2 s, up ${3:-10} s later (pid $!, log $log)"
}

flap_run() { # LINK AT FOR: the background part of flap
  sleep "$2"
  set_link "$1" down
  sleep "$3"
  set_link "$1" up
  rm -f "$state/flap$1.pid"
}

clear_links() { # [LINK]
  for ns in "$nsa" "$nsb"; do exists "$ns" || die "$ns does not exist"; done
  n=$(links_of "$nsa")
  k=1
  while [ "$k" -le "$n" ]; do
    if [ -z "${1:-}" ] || [ "$1" = "$k" ]; then
      for side in a b; do
        rm -f "$state/$k$side.rate" "$state/$k$side.delay"
        ns=$([ $side = a ] && echo "$nsa" || echo "$nsb")
        tc -n "$ns" qdisc del dev "$name$side$k" root 2>/dev/null || true
        ip netns exec "$ns" nft delete chain inet "$nft_table" "loss_$name$side$k" 2>/dev/null || true
        ip -n "$ns" link set "$name$side$k" up
      done
    fi
    k=$((k + 1))
  done
  echo "cleared ${1:+link $1 of }$name"
}

[ $# -ge 1 ] && shift
[ $# -ge 1 ] && shift
case "$cmd" in
up) up "" "" "$@" ;;
down) down ;;
status) status ;;
shape) shape "$@" ;;
loss) loss "$@" ;;
delay) delay "$@" ;;
down-link) [ $# -ge 1 ] || usage; set_link "$1" down ;;
up-link) [ $# -ge 1 ] || usage; set_link "$1" up ;;
flap) flap "$@" ;;
flap-run) flap_run "$@" ;;
clear) clear_links "${1:-}" ;;
*) usage ;;
esac
