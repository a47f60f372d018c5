#!/bin/sh
# Raw transport vs iperf3, back to back on this machine, over 127.0.0.1:
#   1. iperf3, one TCP stream, 5 s (server bound to 127.0.0.1 on a free port)
#   2. tpx-netbench loopback: one comm, 64 MiB messages (host memory)
# and prints both in GB/s (1e9 bytes/s), the ratio tpx / iperf3, the date,
# uname -a and nproc, plus a Markdown row for docs/BENCHMARKS.md.
#
# usage: bench/raw_vs_iperf3.sh [BUILD_DIR] [extra tpx-netbench options...]
#   BUILD_DIR defaults to ./build (needs BUILD_DIR/tpx-netbench)
#   ROUNDS=N repeats the pair N times (default 1); IPERF_SECONDS (default 5)
# Figures from a shared or busy machine are indicative only.
set -eu

build="${1:-build}"
[ $# -gt 0 ] && shift
nb="$build/tpx-netbench"
rounds="${ROUNDS:-1}"
secs="${IPERF_SECONDS:-5}"
if [ ! -x "$nb" ]; then
  echo "raw_vs_iperf3: $nb not found; build first (make build)" >&2
  exit 2
fi
if ! command -v iperf3 >/dev/null 2>&1; then
  echo "raw_vs_iperf3: iperf3 not installed (scripts/deps.sh --test)" >&2
  exit 2
fi
export TPX_SOCKET_IFNAME="${TPX_SOCKET_IFNAME:-lo}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/rawbench.XXXXXX")
spid=""
cleanup() {
  if [ -n "$spid" ]; then kill "$spid" 2>/dev/null || true; wait "$spid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT INT TERM

free_port() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1]); s.close()'
  else
    echo $((20000 + $$ % 30000))
  fi
}

# iperf3 bits/s of the receiver, from its --json output.
parse_iperf() {
  if command -v python3 >/dev/null 2>&1; then
    python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["end"]["sum_received"]["bits_per_second"])' "$1"
  else
    # fallback: the bits_per_second that follows "sum_received"
    tr -d '\n' <"$1" | sed 's/.*"sum_received"[^}]*"bits_per_second":[ ]*\([0-9.e+]*\).*/\1/'
  fi
}

run_iperf() {
  tries=0
  while :; do
    tries=$((tries + 1))
    port=$(free_port)
    iperf3 -s -1 -B 127.0.0.1 -p "$port" --forceflush >"$tmp/iperf-server.log" 2>&1 &
    spid=$!
    # wait (bounded) until the server listens
    i=0
    while [ $i -lt 50 ] && ! grep -q "listening" "$tmp/iperf-server.log" 2>/dev/null; do
      kill -0 "$spid" 2>/dev/null || break
      sleep 0.1
      i=$((i + 1))
    done
    if grep -q "listening" "$tmp/iperf-server.log" 2>/dev/null; then break; fi
    kill "$spid" 2>/dev/null || true
    wait "$spid" 2>/dev/null || true
    spid=""
    if [ $tries -ge 5 ]; then
      echo "raw_vs_iperf3: iperf3 server did not start:" >&2
      cat "$tmp/iperf-server.log" >&2
      exit 1
    fi
  done
  iperf3 -c 127.0.0.1 -p "$port" -t "$secs" --json >"$tmp/iperf.json"
  wait "$spid" 2>/dev/null || true
  spid=""
  IPERF_CMD="iperf3 -s -1 -B 127.0.0.1 -p $port; iperf3 -c 127.0.0.1 -p $port -t $secs --json"
  parse_iperf "$tmp/iperf.json"
}

run_tpx() {
  "$nb" --size 64M --iters 20 --warmup 3 "$@" >"$tmp/tpx.log" 2>&1 || {
    echo "raw_vs_iperf3: tpx-netbench failed:" >&2
    cat "$tmp/tpx.log" >&2
    exit 1
  }
  sed -n 's/^RESULT bw_.* recv_gbps=\([0-9.]*\).*/\1/p' "$tmp/tpx.log"
}

date_now=$(date -u '+%Y-%m-%d %H:%M:%S UTC')
echo "# raw transport vs iperf3, $date_now"
echo "uname -a: $(uname -a)"
echo "nproc:    $(nproc)"
echo "iperf3:   $(iperf3 --version 2>/dev/null | head -n 1)"
echo "tpx:      $nb --size 64M --iters 20 --warmup 3 $* (TPX_SOCKET_IFNAME=$TPX_SOCKET_IFNAME)"
echo

r=1
rows=""
while [ $r -le "$rounds" ]; do
  bits=$(run_iperf)
  tpx=$(run_tpx "$@")
  if [ -z "$bits" ] || [ -z "$tpx" ]; then
    echo "raw_vs_iperf3: could not parse a result (iperf3 '$bits', tpx '$tpx')" >&2
    exit 1
  fi
  line=$(awk -v b="$bits" -v t="$tpx" 'BEGIN { i = b / 8 / 1e9; printf "%.2f %.2f %.2f", i, t, t / i }')
  ig=$(echo "$line" | cut -d' ' -f1)
  tg=$(echo "$line" | cut -d' ' -f2)
  ratio=$(echo "$line" | cut -d' ' -f3)
  echo "round $r: iperf3 1 stream: $ig GB/s | tpx-netbench 1 comm 64 MiB: $tg GB/s | ratio tpx/iperf3: $ratio"
  transport=$(sed -n "s/^tpx-netbench: transport '\([^']*\)'.*/\1/p" "$tmp/tpx.log")
  rows="$rows| $date_now | $(nproc) cpus, $(uname -r) | $ig | $tg ($transport) | $ratio |
"
  r=$((r + 1))
done
echo
echo "Markdown rows (date | machine | iperf3 1 stream GB/s | tpx-netbench 1 comm 64 MiB GB/s | ratio):"
printf '%s' "$rows"
