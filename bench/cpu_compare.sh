#!/usr/bin/env bash
# The CPU-machine performance targets of issues 2 and 3, side by side in one
# run, over 127.0.0.1:
#   iperf3   one TCP stream, IPERF_SECONDS (5) s, server bound to 127.0.0.1 on a free port
#   raw      tpx-netbench loopback: one comm, 64 MiB messages (built-in
#            transport), 2 in flight (its default) and 1 in flight
#   engine   tpx-bench loopback: 64 MiB writes through the engine (its
#            defaults: 512 KiB chunks, default channels), 1 in flight and 2
#            (--inflight 2), and 64 MiB sends
#   latency  4 KiB one-way (round trip / 2): tpx-netbench --latency (median) and
#            tpx-bench --latency (write ping-pong, p50)
# The measurements alternate, ROUNDS times (default 3), so load from other
# users of the machine spreads over all of them; medians are reported, with
# the four ratios and their targets:
#   issue 2:  raw / iperf3                >= 0.90
#   issue 3:  engine write / raw          >= 0.90  (at the same depth: 1 in
#                                                  flight each, and 2 each)
#             engine write / iperf3       >= 0.85
#             engine latency / raw latency <= 1.50
# Secondary metric, steadier than GB/s on a busy machine: CPU seconds per GB
# moved (iperf3: its own CPU figures for both ends; raw: the whole tpx-netbench
# process, warm-up and setup included; engine: the timed loop, tpx-bench's
# [CPU] line). Ends with Markdown rows for docs/BENCHMARKS.md.
#
# usage: bench/cpu_compare.sh [BUILD_DIR]     (default ./build; needs
#        BUILD_DIR/tpx-netbench and BUILD_DIR/tpx-bench, iperf3, python3)
#   ROUNDS=N  IPERF_SECONDS=S  ITERS=N (64 MiB messages per bandwidth run, 50)
#   LAT_ITERS=N (ping-pongs per latency run, 2000)
# Figures from a shared or busy machine are indicative only.
set -euo pipefail

build="${1:-build}"
rounds="${ROUNDS:-3}"
secs="${IPERF_SECONDS:-5}"
iters="${ITERS:-50}"
lat_iters="${LAT_ITERS:-2000}"
nb="$build/tpx-netbench"
tb="$build/tpx-bench"
for t in "$nb" "$tb"; do
  if [ ! -x "$t" ]; then
    echo "cpu_compare: $t not found; build first (make build)" >&2
    exit 2
  fi
done
for c in iperf3 python3; do
  if ! command -v "$c" >/dev/null 2>&1; then
    echo "cpu_compare: $c not installed (scripts/deps.sh --test)" >&2
    exit 2
  fi
done
export TPX_SOCKET_IFNAME="${TPX_SOCKET_IFNAME:-lo}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/cpucmp.XXXXXX")
spid=""
cleanup() {
  if [ -n "$spid" ]; then
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
  fi
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

fail() {
  echo "cpu_compare: $1" >&2
  [ -n "${2:-}" ] && [ -f "$2" ] && cat "$2" >&2
  exit 1
}

free_port() {
  python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
}

# Run a command, its stdout to $1, and its user+system CPU seconds to $1.cpu.
timed() {
  local out="$1"
  shift
  local TIMEFORMAT='%U %S'
  { time "$@" >"$out" 2>&1; } 2>"$out.time" || fail "$* failed:" "$out"
  awk '{ printf "%.3f\n", $1 + $2 }' "$out.time" >"$out.cpu"
}

# iperf3, one stream: "GB/s cpu_s_per_GB" into $tmp/iperf.res
run_iperf() {
  local tries=0 port i
  while :; do
    tries=$((tries + 1))
    port=$(free_port)
    iperf3 -s -1 -B 127.0.0.1 -p "$port" --forceflush >"$tmp/iperf-server.log" 2>&1 &
    spid=$!
    i=0
    while [ $i -lt 50 ] && ! grep -q "listening" "$tmp/iperf-server.log" 2>/dev/null; do
      kill -0 "$spid" 2>/dev/null || break
      sleep 0.1
      i=$((i + 1))
    done
    grep -q "listening" "$tmp/iperf-server.log" 2>/dev/null && break
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    spid=""
    [ $tries -ge 5 ] && fail "iperf3 server did not start:" "$tmp/iperf-server.log"
  done
  if ! iperf3 -c 127.0.0.1 -p "$port" -t "$secs" --json >"$tmp/iperf.json"; then
    kill "$spid" 2>/dev/null || true
    fail "iperf3 client failed:" "$tmp/iperf.json"
  fi
  wait "$spid" 2>/dev/null || true
  spid=""
  python3 - "$tmp/iperf.json" >"$tmp/iperf.res" <<'EOF'
import json, sys
e = json.load(open(sys.argv[1]))["end"]
r = e["sum_received"]
gbs = r["bits_per_second"] / 8 / 1e9
cpu = e.get("cpu_utilization_percent", {})
busy = (cpu.get("host_total", 0) + cpu.get("remote_total", 0)) / 100 * r["seconds"]
print("%.3f %.3f" % (gbs, busy / (r["bytes"] / 1e9)))
EOF
}

# raw transport, one comm, 64 MiB, $1 in flight: "GB/s cpu_s_per_GB"
run_raw() {
  timed "$tmp/raw.log" "$nb" --size 64M --iters "$iters" --warmup 3 --inflight "$1"
  local bw cpu
  bw=$(sed -n 's/^RESULT bw_.* recv_gbps=\([0-9.]*\).*/\1/p' "$tmp/raw.log")
  cpu=$(cat "$tmp/raw.log.cpu")
  [ -n "$bw" ] || fail "cannot parse tpx-netbench output:" "$tmp/raw.log"
  awk -v b="$bw" -v c="$cpu" -v n="$iters" 'BEGIN { printf "%.3f %.3f\n", b, c / ((n + 3) * 67108864 / 1e9) }'
}

# engine, 64 MiB, op $1, ${2:-1} in flight: "GB/s cpu_s_per_GB"
run_engine() {
  local depth=()
  [ "${2:-1}" -gt 1 ] && depth=(--inflight "$2")
  "$tb" loopback --op "$1" --size 64M --iters "$iters" "${depth[@]}" >"$tmp/eng-$1.log" 2>&1 ||
    fail "tpx-bench loopback --op $1 failed:" "$tmp/eng-$1.log"
  local bw cpu
  bw=$(sed -n 's/^\[PERF\] Avg .*BW: \([0-9.]*\) GB\/s.*/\1/p' "$tmp/eng-$1.log")
  cpu=$(sed -n 's/^\[CPU\] client: \([0-9.]*\) s user + \([0-9.]*\) s system per GB.*/\1 \2/p' "$tmp/eng-$1.log" |
    awk '{ printf "%.3f", $1 + $2 }')
  [ -n "$bw" ] || fail "cannot parse tpx-bench output:" "$tmp/eng-$1.log"
  echo "$bw ${cpu:-nan}"
}

run_raw_lat() {
  "$nb" --size 4K --iters 1 --warmup 1 --latency --lat-iters "$lat_iters" >"$tmp/rawlat.log" 2>&1 ||
    fail "tpx-netbench --latency failed:" "$tmp/rawlat.log"
  local v
  v=$(sed -n 's/^RESULT latency_bytes=.* median_us=\([0-9.]*\).*/\1/p' "$tmp/rawlat.log")
  [ -n "$v" ] || fail "cannot parse tpx-netbench latency:" "$tmp/rawlat.log"
  echo "$v"
}

# The timed runs go back to back; their correctness is checked once, here:
# every byte of every iteration of a few transfers of each op.
check_engine() {
  "$tb" loopback --op write,read,send --size 64M --iters 3 --check --progress off >"$tmp/eng-check.log" 2>&1 ||
    fail "tpx-bench loopback --check failed:" "$tmp/eng-check.log"
}

run_eng_lat() {
  "$tb" loopback --latency --iters "$lat_iters" >"$tmp/englat.log" 2>&1 ||
    fail "tpx-bench --latency failed:" "$tmp/englat.log"
  local v
  v=$(sed -n 's/^\[PERF\] Latency .* p50 \([0-9.]*\) us.*/\1/p' "$tmp/englat.log")
  [ -n "$v" ] || fail "cannot parse tpx-bench latency:" "$tmp/englat.log"
  echo "$v"
}

median() { tr ' ' '\n' | grep -v '^$' | sort -g | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2) }'; }

date_now=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
echo "# CPU-machine targets (issues 2 and 3), $date_now"
echo "uname -a: $(uname -a)"
echo "nproc:    $(nproc)"
echo "load:     $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min, at start)"
echo "iperf3:   $(iperf3 --version 2>/dev/null | head -n 1)"
echo "raw:      $nb --size 64M --iters $iters --warmup 3 --inflight 2|1   (one comm)"
echo "engine:   $tb loopback --op write|send --size 64M --iters $iters [--inflight 2]   (defaults)"
echo "latency:  $nb --size 4K --iters 1 --latency --lat-iters $lat_iters ; $tb loopback --latency --iters $lat_iters"
echo "env:      TPX_SOCKET_IFNAME=$TPX_SOCKET_IFNAME$(env | grep -E '^(TPX|UCCL_TCPX)_' | grep -v '^TPX_SOCKET_IFNAME=' | sed 's/^/ /' | tr -d '\n')"
echo "rounds:   $rounds (alternating; medians below)"
echo

check_engine
echo "engine --check (write, read, send; 64 MiB x 3, every byte): ok"
I_BW="" I_CPU="" R_BW="" R_CPU="" W_BW="" W_CPU="" S_BW="" S_CPU="" R_LAT="" E_LAT="" R1_BW="" W2_BW=""
printf '%-6s %9s %9s %9s %9s %9s %9s %9s %9s | %-26s\n' round iperf3 raw2 raw1 write1 write2 send rawlat englat \
  "CPU s/GB iperf3 raw2 write1"
for r in $(seq 1 "$rounds"); do
  run_iperf
  read -r ib ic <"$tmp/iperf.res"
  v=$(run_raw 2)
  read -r rb rc <<<"$v"
  v=$(run_engine write)
  read -r wb wc <<<"$v"
  v=$(run_raw 1)
  read -r r1b _ <<<"$v"
  v=$(run_engine write 2)
  read -r w2b _ <<<"$v"
  v=$(run_engine send)
  read -r sb sc <<<"$v"
  rl=$(run_raw_lat)
  el=$(run_eng_lat)
  I_BW="$I_BW $ib" I_CPU="$I_CPU $ic" R_BW="$R_BW $rb" R_CPU="$R_CPU $rc"
  W_BW="$W_BW $wb" W_CPU="$W_CPU $wc" S_BW="$S_BW $sb" S_CPU="$S_CPU $sc"
  R_LAT="$R_LAT $rl" E_LAT="$E_LAT $el" R1_BW="$R1_BW $r1b" W2_BW="$W2_BW $w2b"
  printf '%-6s %9s %9s %9s %9s %9s %9s %9s %9s | %s %s %s\n' "$r" "$ib" "$rb" "$r1b" "$wb" "$w2b" "$sb" "$rl" "$el" \
    "$ic" "$rc" "$wc"
done
echo "(GB/s = 1e9 B/s at the receiver; latency in us, one-way)"

mi=$(echo "$I_BW" | median) mr=$(echo "$R_BW" | median) mw=$(echo "$W_BW" | median) ms=$(echo "$S_BW" | median)
mic=$(echo "$I_CPU" | median) mrc=$(echo "$R_CPU" | median) mwc=$(echo "$W_CPU" | median) msc=$(echo "$S_CPU" | median)
mrl=$(echo "$R_LAT" | median) mel=$(echo "$E_LAT" | median)
mr1=$(echo "$R1_BW" | median) mw2=$(echo "$W2_BW" | median)

verdict() { awk -v v="$1" -v t="$2" -v op="$3" 'BEGIN { ok = op == ">=" ? v >= t : v <= t; print ok ? "MET" : "NOT MET" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.2f", (b > 0 ? a / b : 0) }'; }
r_raw_ip=$(ratio "$mr" "$mi")
r_w_raw=$(ratio "$mw" "$mr1")
r_w2_raw=$(ratio "$mw2" "$mr")
r_w_ip=$(ratio "$mw" "$mi")
r_s_raw=$(ratio "$ms" "$mr1")
r_lat=$(ratio "$mel" "$mrl")

echo
echo "medians over $rounds rounds:"
printf '  %-44s %7s GB/s   CPU %s s/GB\n' "iperf3, 1 stream" "$mi" "$mic"
printf '  %-44s %7s GB/s   CPU %s s/GB\n' "raw transport, 1 comm, 64 MiB, 2 in flight" "$mr" "$mrc"
printf '  %-44s %7s GB/s\n' "raw transport, 1 comm, 64 MiB, 1 in flight" "$mr1"
printf '  %-44s %7s GB/s   CPU %s s/GB\n' "engine write 64 MiB (defaults), 1 in flight" "$mw" "$mwc"
printf '  %-44s %7s GB/s\n' "engine write 64 MiB (defaults), 2 in flight" "$mw2"
printf '  %-44s %7s GB/s   CPU %s s/GB\n' "engine send 64 MiB (defaults)" "$ms" "$msc"
printf '  %-44s %7s us\n' "raw 4 KiB one-way latency (median)" "$mrl"
printf '  %-44s %7s us\n' "engine 4 KiB one-way latency (write, p50)" "$mel"
echo
echo "ratios (of the medians):"
printf '  issue 2  raw / iperf3                  %5s  target >= 0.90  %s\n' "$r_raw_ip" "$(verdict "$r_raw_ip" 0.90 ">=")"
printf '  issue 3  engine write / raw, 1 in flight each  %5s  target >= 0.90  %s\n' "$r_w_raw" "$(verdict "$r_w_raw" 0.90 ">=")"
printf '  issue 3  engine write / raw, 2 in flight each  %5s  target >= 0.90  %s\n' "$r_w2_raw" "$(verdict "$r_w2_raw" 0.90 ">=")"
printf '  issue 3  engine write / iperf3         %5s  target >= 0.85  %s\n' "$r_w_ip" "$(verdict "$r_w_ip" 0.85 ">=")"
printf '  issue 3  engine latency / raw latency  %5s  target <= 1.50  %s\n' "$r_lat" "$(verdict "$r_lat" 1.50 "<=")"
printf '  (engine send / raw, 1 in flight each   %5s)\n' "$r_s_raw"
echo
echo "Markdown rows for docs/BENCHMARKS.md:"
echo "| date | machine | iperf3 1 stream | raw 64 MiB, 2 / 1 in flight | engine write 64 MiB, 1 / 2 in flight | engine send 64 MiB | raw/iperf3 | write/raw (1; 2 in flight) | write/iperf3 | 4 KiB latency raw / engine (us) | latency ratio |"
echo "|---|---|---|---|---|---|---|---|---|---|---|"
echo "| $date_now | $(nproc) cpus, $(uname -r), $rounds rounds | $mi | $mr / $mr1 | $mw / $mw2 | $ms | $r_raw_ip | $r_w_raw; $r_w2_raw | $r_w_ip | $mrl / $mel | $r_lat |"
echo "| (CPU s per GB) | | $mic | $mrc | $mwc | $msc | | | | | |"
