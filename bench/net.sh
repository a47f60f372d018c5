#!/usr/bin/env bash
# The network lab (`bench/compare.sh net`): the engine against iperf3 over
# four links that do not behave alike. Two namespaces joined by four veth
# links (scripts/netns-4nic.sh), each shaped to RATE with tbf on the client's
# egress; per case, iperf3 with one stream per link (the sum of the four) and
# then tpx-bench between the namespaces (64 MiB writes, CHANNELS channels,
# one in flight, --keep-going: a failed transfer is counted, not fatal), once
# per TPX_STRIPE value and memory kind. Cases:
#   healthy   all four links at RATE
#   slow      link LINK at SLOW (a tenth of RATE by default)
#   loss      link LINK drops LOSS % of its packets (nftables numgen)
#   down      link LINK down DOWN_AT s into the run, up DOWN_FOR s later
# Each row: GB/s (1e9 B/s: bytes of the transfers that completed / the run's
# whole time, failed transfers' included; a run the peer's failure ended
# counts the case's whole time, failed marked '*'), ratio to iperf3's sum in the same
# case, failed transfers, p99 transfer time, and the MB each link carried
# (client -> server) during the engine's run. The down case adds, from the
# links' byte counters sampled every 0.2 s, the GB/s of iperf3 and of the
# engine while the link was down and how soon it carried data again.
#
# usage: bench/net.sh [BUILD_DIR]    (root; iproute2, nftables, iperf3, python3)
# Settings (environment):
#   RATE=800mbit SLOW=80mbit LOSS=0.1 LINK=2 (the link each case changes)
#   ENGINE_SECONDS=15 IPERF_SECONDS=10 (per case; the down case runs
#   DOWN_AT + DOWN_FOR + 5 s for both)  DOWN_AT=5 DOWN_FOR=10
#   SIZE=64M CHANNELS=8 INFLIGHT=1  STRIPES="fixed adaptive" (TPX_STRIPE
#   values; an engine without the setting ignores it)  MEM=auto|host|cuda|
#   "host cuda" (auto: cuda too when nvidia-smi lists a GPU)
#   ONLY=regex (case names)  NAME=tpxnet (namespaces NAME-a, NAME-b)
#   LOGS=dir (keep logs and results.md there)  PORT_BASE  IPERF3=path
# TPX_* in the environment apply to every engine run (TPX_TIMEOUT_MS: the
# deadline of a transfer that stalls).
set -euo pipefail

build="${1:-build}"
bench_name=net
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

rate="${RATE:-800mbit}" slow="${SLOW:-80mbit}" loss="${LOSS:-0.1}" link="${LINK:-2}"
esecs="${ENGINE_SECONDS:-15}" isecs="${IPERF_SECONDS:-10}" down_at="${DOWN_AT:-5}" down_for="${DOWN_FOR:-10}"
size="${SIZE:-64M}" channels="${CHANNELS:-8}" inflight="${INFLIGHT:-1}"
stripes="${STRIPES-fixed adaptive}" mem="${MEM:-auto}" name="${NAME:-tpxnet}"
port_base="${PORT_BASE:-$((24000 + ($$ % 50) * 20))}"
lab="$root/scripts/netns-4nic.sh"
tb="$build/tpx-bench"

[ "$(id -u)" = 0 ] || die "needs root (network namespaces, tc, nft)"
for t in ip tc nft python3 "$iperf"; do command -v "$t" >/dev/null 2>&1 || die "$t not found (scripts/deps.sh --test)"; done
[ -x "$tb" ] || die "$tb not found; build first"
case "$esecs$isecs$down_at$down_for$channels$inflight$link$port_base" in *[!0-9]*) die "ENGINE_SECONDS, IPERF_SECONDS, DOWN_AT, DOWN_FOR, CHANNELS, INFLIGHT, LINK, PORT_BASE: whole numbers" ;; esac
[ "$link" -ge 1 ] && [ "$link" -le 4 ] || die "LINK: 1..4"
[ "$esecs" -ge 1 ] && [ "$isecs" -ge 1 ] && [ "$down_at" -ge 1 ] && [ "$down_for" -ge 1 ] || die "durations: at least 1 s"
if [ "$mem" = auto ]; then
  mem=host
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU' && mem="host cuda"
fi
for m in $mem; do case $m in host | cuda) ;; *) die "MEM: host, cuda or both" ;; esac; done
[ -n "$stripes" ] || stripes=-

keep="${LOGS:-}"
tmp=${keep:-$(mktemp -d "${TMPDIR:-/tmp}/net.XXXXXX")}
mkdir -p "$tmp"
nsa="$name-a" nsb="$name-b"
ifa="${name}a1,${name}a2,${name}a3,${name}a4" ifb="${name}b1,${name}b2,${name}b3,${name}b4"
cleanup() {
  stop_all
  sh "$lab" down "$name" >/dev/null 2>&1 || true
  [ -n "$keep" ] || rm -rf "$tmp"
}
trap cleanup EXIT
trap 'exit 1' INT TERM

# ---- the lab ----------------------------------------------------------------
sh "$lab" down "$name" >/dev/null 2>&1 || true
sh "$lab" up "$name" 4 >"$tmp/lab.log" 2>&1 || { cat "$tmp/lab.log" >&2; die "the lab did not come up"; }
healthy() { # every link up at RATE, no loss
  sh "$lab" clear "$name" >/dev/null
  for k in 1 2 3 4; do sh "$lab" shape "$name" $k "$rate" >/dev/null; done
}
flap_wait() { # until the scheduled flap has brought its link back (bounded)
  local i=0
  while [ -f "/run/netns-4nic/$name/flap$link.pid" ] && [ $i -lt 600 ]; do sleep 0.1; i=$((i + 1)); done
  sh "$lab" up-link "$name" "$link" >/dev/null
}
tx_bytes() { # the four links' client -> server byte counters, one line
  local k out=""
  for k in 1 2 3 4; do out="$out $(ip netns exec "$nsa" cat "/sys/class/net/${name}a$k/statistics/tx_bytes")"; done
  echo "$out"
}

# The down case, from the links' own byte counters (client side, tx; iperf3 and
# the engine alike): flap_start schedules the flap and samples the four
# counters every 0.2 s into FILE until stopped (in pids; bounded: 10 min);
# down_stats FILE prints the GB/s over every link while LINK was down (its
# first second left out) and how many seconds after LINK came back it carried
# data again (more than 64 KB in a sample; "never" if not in the run).
flap_start() { # FILE
  date +%s.%N >"$tmp/flap.t0"
  sh "$lab" flap "$name" "$link" "$down_at" "$down_for" >/dev/null
  ip netns exec "$nsa" sh -c 'i=0; while [ $i -lt 3000 ]; do
      printf "%s" "$(date +%s.%N)"
      for k in 1 2 3 4; do printf " %s" "$(cat /sys/class/net/$0$k/statistics/tx_bytes)"; done
      echo; sleep 0.2; i=$((i + 1)); done' "${name}a" >"$1" 2>/dev/null &
  pids="$pids $!"
}
down_stats() { # FILE
  python3 - "$1" "$(cat "$tmp/flap.t0")" "$down_at" "$down_for" "$link" <<'PY'
import sys
rows = []
for line in open(sys.argv[1]):
    f = line.split()
    if len(f) == 5:
        rows.append([float(x) for x in f])
t0, at, dur, k = float(sys.argv[2]), float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
td, tu = t0 + at + 1, t0 + at + dur
win = [r for r in rows if td <= r[0] <= tu]
gbps = "-"
if len(win) >= 2 and win[-1][0] > win[0][0]:
    gbps = "%.3f" % ((sum(win[-1][1:]) - sum(win[0][1:])) / (win[-1][0] - win[0][0]) / 1e9)
back = "never"
for a, b in zip(rows, rows[1:]):
    if a[0] >= tu - 0.2 and b[k] - a[k] > 64e3:
        back = "%.1f" % max(0.0, b[0] - tu)
        break
print(gbps, back)
PY
}

# ---- iperf3: one stream per link, the sum ------------------------------------
run_iperf() { # seconds [flap]
  local k p secs=$1 cl=""
  for k in 1 2 3 4; do
    ip netns exec "$nsb" "$iperf" -s -1 -B "198.18.$k.2" -p $((port_base + k)) --forceflush >"$tmp/ips-$k.log" 2>&1 &
    pids="$pids $!"
  done
  k=1
  for p in $pids; do wait_line listening "$tmp/ips-$k.log" "$p" || return 1; k=$((k + 1)); done
  [ "${2:-}" = flap ] && flap_start "$tmp/samples-iperf.txt"
  for k in 1 2 3 4; do
    timeout $((secs + 60)) ip netns exec "$nsa" "$iperf" -c "198.18.$k.2" -B "198.18.$k.1" -p $((port_base + k)) \
      -t "$secs" --json >"$tmp/ipc-$k.log" 2>&1 &
    cl="$cl $!"
  done
  for p in $cl; do wait "$p" || true; done
  stop_all
  idown="- -"
  [ "${2:-}" = flap ] && flap_wait && idown=$(down_stats "$tmp/samples-iperf.txt")
  ival=$(python3 - "$tmp" <<'PY'
import json, sys
tot = 0.0
per = []
for k in range(1, 5):
    try:
        e = json.load(open(f"{sys.argv[1]}/ipc-{k}.log"))["end"]["sum_received"]
        g = e["bytes"] / e["seconds"] / 1e9 if e.get("seconds") else 0.0
    except (OSError, ValueError, KeyError):
        g = 0.0  # that stream failed: it carried nothing countable
    per.append(g)
    tot += g
print("%.3f %s" % (tot, "/".join("%.3f" % g for g in per)))
PY
  )
}

# ---- the engine: tpx-bench between the namespaces ----------------------------
run_engine() { # memory stripe seconds [flap]
  local m=$1 st=$2 secs=$3 s="$tmp/eng-s.log" c="$tmp/eng-c.log" spid envs=() t0 t1
  envs=(TPX_SOCKET_IFNAME="=$ifb" TPX_ALLOW_DIAL=198.18.0.0/15 TPX_LOG="${TPX_LOG:-error}")
  [ "$st" != - ] && envs+=(TPX_STRIPE="$st")
  ip netns exec "$nsb" env "${envs[@]}" "$tb" server --host 198.18.1.2 --port "$port_base" --mem "$m" >"$s" 2>&1 &
  spid=$!
  pids=$spid
  wait_line '^\[SERVER\] listening' "$s" "$spid" || return 1
  envs[0]=TPX_SOCKET_IFNAME="=$ifa"
  t0=$(tx_bytes)
  [ "${4:-}" = flap ] && flap_start "$tmp/samples-engine.txt"
  # --iters: a cap the run's duration reaches first; timeout: the run, a stalled
  # transfer's deadline (TPX_TIMEOUT_MS, 30 s by default) and teardown
  timeout $((secs + 120)) ip netns exec "$nsa" env "${envs[@]}" "$tb" client 198.18.1.2 --port "$port_base" --mem "$m" \
    --size "$size" --channels "$channels" --inflight "$inflight" --iters 100000 --warmup 1 --duration "$secs" \
    --keep-going --progress off >"$c" 2>&1 || true
  t1=$(tx_bytes)
  timeout 30 tail --pid="$spid" -f /dev/null 2>/dev/null || true
  stop_all
  local down="- -"
  [ "${4:-}" = flap ] && flap_wait && down=$(down_stats "$tmp/samples-engine.txt")
  echo "$down" >"$tmp/eng-down.txt"
  python3 - "$c" "$size" "$t0" "$t1" "$secs" <<'PY'
import re, sys
log = open(sys.argv[1], errors="replace").read()
mult = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30}
sz = sys.argv[2]
size = int(sz[:-1]) * mult[sz[-1]] if sz[-1] in mult else int(sz)
mb = "/".join("%.0f" % ((int(b) - int(a)) / 1e6) for a, b in zip(sys.argv[3].split(), sys.argv[4].split()))
# the run ended before its time (the peer failed): its failed count gets a '*'
ended = "*" if re.search(r"^tpx-bench: ", log, re.M) else ""
m = re.search(r"^\[PERF\] Avg \((\d+) iter\):.*p99 ([0-9.]+) ms; (\d+) failed; ([0-9.]+) s in all", log, re.M)
if m:
    ok, p99, failed, wall = int(m[1]), float(m[2]), int(m[3]), float(m[4])
    if ended:  # nothing moved from the end of the run to the end of the case
        wall = max(wall, float(sys.argv[5]))
    print("%.3f %d%s %.1f %s ok" % (ok * size / wall / 1e9 if wall > 0 else 0, failed, ended, p99, mb))
    sys.exit(0)
m = re.search(r"^\[PERF\] .*no transfer completed; (\d+) failed", log, re.M)
if m:
    print("0.000 %s%s - %s ok" % (m[1], ended, mb))
else:  # the client never got to a run (setup failed): say so
    print("0.000 - - %s error" % mb)
PY
}

ratio0() { awk -v a="$1" -v b="$2" 'BEGIN { if (a ~ /^[0-9.]+$/ && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }

# ---- the cases ----------------------------------------------------------------
cases=(healthy slow loss down)
if [ -n "${ONLY:-}" ]; then
  sel=()
  for c in "${cases[@]}"; do [[ $c =~ $ONLY ]] && sel+=("$c"); done
  cases=(${sel[@]+"${sel[@]}"})
fi
[ ${#cases[@]} -gt 0 ] || die "no cases left (ONLY=${ONLY:-})"
setup_case() { # name -> the lab in that state; prints what it is
  healthy
  case $1 in
  healthy) echo "4 links at $rate" ;;
  slow) sh "$lab" shape "$name" "$link" "$slow" >/dev/null && echo "link $link at $slow, 3 at $rate" ;;
  loss) sh "$lab" loss "$name" "$link" "$loss" >/dev/null && echo "link $link drops $loss% (nftables), 4 at $rate" ;;
  down) echo "4 at $rate; link $link down at ${down_at} s, up at $((down_at + down_for)) s" ;;
  esac
}

{
  echo "set:     net (the network lab)"
  echo "machine: $(machine_line)"
  echo "date:    $(date -u +%Y-%m-%dT%H:%MZ)"
  echo "tpx:     $("$tb" --version 2>/dev/null | paste -sd ";" -), commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')"
  echo "iperf3:  $("$iperf" --version | head -n 1)"
  echo "setup:   $nsa <-> $nsb, 4 veth links, tbf $rate on the client's egress; engine: $size writes, --channels $channels, $inflight in flight, --keep-going, ${esecs} s a run; iperf3: one stream per link, ${isecs} s; memory: $mem; TPX_STRIPE: $stripes"
  env | grep -E '^TPX_' | sed 's/^/env:     /' || true
} | tee "$tmp/machine.txt"
res="$tmp/results.md"
{
  echo
  echo "| case | memory | TPX_STRIPE | iperf3 GB/s | engine GB/s | ratio | failed | p99 ms | MB per link (engine) |"
  echo "|---|---|---|---|---|---|---|---|---|"
} | tee "$res"
for c in "${cases[@]}"; do
  what=$(setup_case "$c")
  es=$esecs is=$isecs fl=""
  [ "$c" = down ] && es=$((down_at + down_for + 5)) is=$es fl=flap
  run_iperf "$is" $fl || { stop_all; ival="0 -" idown="- -"; }
  read -r igb iper <<<"$ival"
  echo "$c: $what; iperf3 $igb GB/s (per link $iper)" >>"$tmp/cases.txt"
  for m in $mem; do
    for st in $stripes; do
      setup_case "$c" >/dev/null
      port_base=$((port_base + 10 > 64000 ? 24000 : port_base + 10)) # not in $(...): it must stick
      rm -f "$tmp/eng-down.txt"
      out=$(run_engine "$m" "$st" "$es" $fl) || out="0.000 - - - error"
      read -r egb failed p99 mb status <<<"$out"
      [ "$status" = ok ] || { echo "net: $c $m $st: the engine run failed; its log:" >&2; tail -n 5 "$tmp/eng-c.log" >&2; }
      cp "$tmp/eng-c.log" "$tmp/eng-c-$c-$m-$st.log" 2>/dev/null || true
      echo "| $c | $m | $st | $igb | $egb | $(ratio "$egb" "$igb") | $failed | $p99 | $mb |" | tee -a "$res"
      if [ "$c" = down ]; then
        read -r idg _ <<<"$idown"
        read -r edg eback <<<"$(cat "$tmp/eng-down.txt" 2>/dev/null || echo "- -")"
        echo "| $m | $st | $idg | $edg | $(ratio0 "$edg" "$idg") | $eback |" >>"$tmp/down.md"
      fi
    done
  done
done
if [ -s "$tmp/down.md" ]; then
  {
    echo
    echo "down case, from the links' byte counters (client side): while link $link was down (its first second left out), and when it carried data again"
    echo
    echo "| memory | TPX_STRIPE | iperf3 GB/s while down | engine GB/s while down | ratio | link $link carries again after (s) |"
    echo "|---|---|---|---|---|---|"
    cat "$tmp/down.md"
  } | tee -a "$res"
fi
grep -q '^| .* | [0-9-]*\* |' "$res" && echo "(* the run ended before its time: the peer failed; the client's log says why)"
echo
cat "$tmp/cases.txt"
[ -n "$keep" ] && echo "logs and results.md in $keep"
exit 0
