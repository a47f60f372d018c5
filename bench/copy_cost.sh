#!/usr/bin/env bash
# Where the CPU of a transfer goes, per byte: for each case, a
# long tpx-bench write between two processes over 127.0.0.1, and while it
# runs, `perf record` of both processes for SECONDS; the bytes moved in that
# window are read from the loopback device's counters. Prints per case the
# GB/s of the window and the CPU milliseconds per GB of both processes
# together: the kernel's socket copies (copy_to/from iter or user), the rest
# of the kernel, and user space. The cases alternate over ROUNDS.
#
# Why: it tells a byte that costs more to copy (memory that is not in the
# caches) from a transfer that waits. A 64 MiB host buffer that every
# iteration reuses stays in a large last-level cache; GPU staging memory is
# written or read by DMA every time (docs/notes/gpu-vs-host-memory.md).
#
# usage: bench/copy_cost.sh [BUILD_DIR]    (default ./build; needs tpx-bench,
#        perf with permission to profile these processes, python3)
#   CASES="host:64M:4 cuda:64M:4 ..."  (memory:size:in flight; default: host
#        and cuda (if a GPU), 64M and 256M, 4 in flight, then 64M 1 in flight)
#   ROUNDS=2  SECONDS_PER=3  PERF=perf  FREQ=999  PORT=(from this pid)
# Settings in the environment (TPX_*) apply to every run.
set -euo pipefail

build="${1:-build}"
tb="$build/tpx-bench"
perf="${PERF:-perf}"
rounds="${ROUNDS:-2}"
secs="${SECONDS_PER:-3}"
freq="${FREQ:-999}"
port="${PORT:-$((27000 + ($$ % 50) * 10))}"
bench_name=copy_cost
# shellcheck source=bench/lib.sh
. "$(dirname "$0")/lib.sh"
[ -x "$tb" ] || die "$tb not found; build first"
command -v "$perf" >/dev/null 2>&1 || die "$perf not found (PERF=path)"
command -v python3 >/dev/null 2>&1 || die "python3 not installed"
case "$rounds$secs$freq$port" in *[!0-9]*) die "ROUNDS, SECONDS_PER, FREQ, PORT: numbers" ;; esac
gpu=0
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU' && gpu=1
if [ -z "${CASES:-}" ]; then
  CASES="host:64M:4 host:256M:4 host:64M:1"
  [ "$gpu" = 1 ] && CASES="host:64M:4 cuda:64M:4 host:256M:4 cuda:256M:4 host:64M:1 cuda:64M:1"
fi
export TPX_SOCKET_IFNAME="${TPX_SOCKET_IFNAME:-lo}"
tmp=$(mktemp -d "${TMPDIR:-/tmp}/copycost.XXXXXX")
trap 'stop_all; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM

one() { # memory size inflight -> a line "case|GB|copy|kernel|user" in results
  local mem=$1 size=$2 n=$3 s="$tmp/s.log" c="$tmp/c.log" spid cpid b0 b1
  "$tb" server --host 127.0.0.1 --port "$port" --mem "$mem" >"$s" 2>&1 &
  spid=$!
  pids=$spid
  wait_line '^\[SERVER\] listening' "$s" "$spid" || return 1
  # No `timeout` wrapper: perf must see the client itself; it is stopped below.
  "$tb" client 127.0.0.1 --port "$port" --mem "$mem" --size "$size" --inflight "$n" \
    --iters 100000 --progress off >"$c" 2>&1 &
  cpid=$!
  pids="$spid $cpid"
  sleep 2 # connected, warmed up
  kill -0 "$cpid" 2>/dev/null || { bad "client ended early" "$c" "$s"; return 1; }
  # The bytes are counted inside perf's own window (its workload), not around
  # perf, whose start and end take a second or more.
  "$perf" record -q -F "$freq" -p "$spid,$cpid" -o "$tmp/p.data" -- \
    sh -c "awk '\$1 == \"lo:\" { print \$2 }' /proc/net/dev >'$tmp/b0'; sleep $secs;
           awk '\$1 == \"lo:\" { print \$2 }' /proc/net/dev >'$tmp/b1'" >"$tmp/rec.log" 2>&1 ||
    { bad "perf record failed" "$tmp/rec.log"; return 1; }
  b0=$(cat "$tmp/b0") b1=$(cat "$tmp/b1")
  stop_all
  # The client's own figure over its whole run (it reports when stopped): a cross-check of the window's.
  own=$(sed -n 's/^\[PERF\].*BW: \([0-9.]*\) GB.*/\1/p' "$c" | tail -n 1)
  "$perf" report -i "$tmp/p.data" --stdio -n --sort sym 2>/dev/null >"$tmp/rep.txt" ||
    { bad "perf report failed" "$tmp/rep.txt"; return 1; }
  python3 - "$tmp/rep.txt" "$b0" "$b1" "$freq" "$mem $size x$n" "${own:--}" >>"$tmp/results.txt" <<'PY'
import re, sys
rep, b0, b1, freq, name, own = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6]
copy = kern = user = 0
for line in open(rep):
    m = re.match(r"\s*[\d.]+%\s+(\d+)\s+\[(.)\]\s+(\S+)", line)
    if not m:
        continue
    n, where, sym = int(m.group(1)), m.group(2), m.group(3)
    if where == "k" and re.search(r"copy_(to|from)_(iter|user)|rep_movs|copy_user", sym):
        copy += n
    elif where == "k":
        kern += n
    else:
        user += n
gb = (b1 - b0) / 1e9
ms = lambda k: 1000.0 * k / freq / gb if gb > 0 else float("nan")
print("%s|%.3f|%.1f|%.1f|%.1f|%s" % (name, gb, ms(copy), ms(kern), ms(user), own))
PY
}

echo "machine: $(hostname), $(nproc) CPUs, $(date -u +%Y-%m-%dT%H:%MZ); $rounds rounds x ${secs} s per case, perf at $freq Hz"
: >"$tmp/results.txt"
for r in $(seq 1 "$rounds"); do
  for c in $CASES; do
    IFS=: read -r mem size n <<<"$c"
    [ "$mem" = cuda ] && [ "$gpu" = 0 ] && die "case $c: no GPU here"
    ok=0
    for try in 1 2; do
      if one "$mem" "$size" "$n"; then ok=1; break; fi
      port=$((port + 10))
      echo "copy_cost: $c failed (try $try)" >&2
    done
    [ "$ok" = 1 ] || exit 1
    tail -n 1 "$tmp/results.txt" | awk -F'|' -v r="$r" -v s="$secs" \
      '{ printf "round %d: %-16s %6.2f GB/s (client: %s)   CPU ms per GB: socket copies %6.1f  other kernel %6.1f  user %6.1f\n", r, $1, $2 / s, $6, $3, $4, $5 }'
  done
done
python3 - "$tmp/results.txt" "$secs" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, gb, c, k, u, _ = line.strip().split("|")
    rows.setdefault(name, []).append((float(gb) / float(sys.argv[2]), float(c), float(k), float(u)))
print("\nmedians over the rounds (CPU ms per GB of both processes together):")
print("| case | GB/s | socket copies | other kernel | user | total |\n|---|---|---|---|---|---|")
for name, vs in rows.items():
    m = [statistics.median(v[i] for v in vs) for i in range(4)]
    print("| %s | %.2f | %.0f | %.0f | %.0f | %.0f |" % (name, m[0], m[1], m[2], m[3], m[1] + m[2] + m[3]))
PY
