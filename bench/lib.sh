# shellcheck shell=bash disable=SC2034,SC2154
# What the bench/ shell scripts share, sourced (bash). A script sets
# `bench_name` (its name, for messages) before sourcing, and `tmp` (a folder
# for logs) before it measures.
#
# Processes: every background process a measurement starts goes into `pids`.
#   stop_all                 kill and reap every process in pids
#   bad WHAT LOG...          one measurement failed: say so with the logs'
#                            tails, stop its processes; returns 1 (the caller
#                            retries or gives up)
#   wait_line PATTERN FILE PID
#                            until FILE has the line (bounded: 30 s, and
#                            only while PID lives)
#   die MESSAGE              a bad setting or a missing tool: exit 2
# Reference: iperf3 over 127.0.0.1 (nothing else is dialled).
#   iperf_pairs N SECONDS [LEN] [PORT]
#                            N server/client pairs at once, one stream each
#                            (-l LEN when given); sets val (total GB/s
#                            received) and cpu (iperf3's own CPU seconds per
#                            GB, both ends, and "-")
# Parsing tpx-bench and tpx-netbench output:
#   perf_gbps LOG  perf_p50 LOG  perf_total LOG  cpu_per_gb client|server LOG...
#   raw_gbps LOG   raw_latency LOG
# Summaries:
#   summarize RESULTS RATIOS  medians, spreads (min-max), CPU per GB per side,
#                            then the ratios of medians with their verdicts
#   machine_line             the machine, its CPUs and load, one line
#   median / ratio           of numbers on stdin / of two numbers
pids=""
: "${bench_name:=bench}"

die() {
  echo "$bench_name: $*" >&2
  exit 2
}
stop_all() {
  for p in $pids; do kill "$p" 2>/dev/null || true; done
  for p in $pids; do wait "$p" 2>/dev/null || true; done
  pids=""
}
bad() {
  echo "$bench_name: $1" >&2
  shift
  for f in "$@"; do [ -f "$f" ] && tail -n 8 "$f" >&2; done
  stop_all
  return 1
}
wait_line() {
  local i=0
  until grep -q "$1" "$2" 2>/dev/null; do
    i=$((i + 1))
    { kill -0 "$3" 2>/dev/null && [ $i -le 300 ]; } || { bad "no '$1' in $2" "$2"; return 1; }
    sleep 0.1
  done
}

# iperf3 may be replaced (IPERF3=path) or left out (IPERF3=none) by the caller.
: "${iperf:=${IPERF3:-iperf3}}"
# spre / cpre: arrays the caller may set, prefixes of the server and client
# sides' commands (e.g. taskset -c 0-15).
[ -n "${spre+x}" ] || spre=()
[ -n "${cpre+x}" ] || cpre=()
iperf_pairs() {
  local n=$1 secs=$2 len=${3:--} base=${4:-${port_base:-27000}} i p cl="" lopt=()
  [ "$len" != - ] && lopt=(-l "$len")
  for i in $(seq 0 $((n - 1))); do
    "${spre[@]}" "$iperf" -s -1 -B 127.0.0.1 -p $((base + i)) --forceflush >"$tmp/ips-$i.log" 2>&1 &
    pids="$pids $!"
  done
  i=0
  for p in $pids; do wait_line listening "$tmp/ips-$i.log" "$p" || return 1; i=$((i + 1)); done
  for i in $(seq 0 $((n - 1))); do
    "${cpre[@]}" "$iperf" -c 127.0.0.1 -p $((base + i)) -t "$secs" "${lopt[@]}" --json >"$tmp/ipc-$i.log" 2>&1 &
    cl="$cl $!"
  done
  for p in $cl; do wait "$p" || { bad "an iperf3 client failed" "$tmp"/ipc-*.log; return 1; }; done
  stop_all
  local out
  out=$(python3 - "$tmp" "$n" <<'PY'
import json, sys
gbs = busy = moved = 0.0
for i in range(int(sys.argv[2])):
    e = json.load(open(f"{sys.argv[1]}/ipc-{i}.log"))["end"]
    r = e["sum_received"]
    gbs += r["bits_per_second"] / 8 / 1e9
    u = e.get("cpu_utilization_percent", {})
    busy += (u.get("host_total", 0) + u.get("remote_total", 0)) / 100 * r["seconds"]
    moved += r["bytes"] / 1e9
print("%.3f %.3f" % (gbs, busy / moved if moved else 0))
PY
  ) || { bad "iperf3 output unreadable" "$tmp"/ipc-0.log; return 1; }
  read -r val cpu <<<"$out"
  cpu="$cpu -"
}

perf_gbps() { sed -n 's/^\[PERF\] Avg .*BW: \([0-9.]*\) GB\/s.*/\1/p' "$1" | tail -n 1; }
perf_total() { sed -n 's/^\[PERF\] Avg .* \([0-9.]*\) GB\/s total.*/\1/p' "$1" | tail -n 1; }
perf_p50() { sed -n 's/^\[PERF\] Latency .* p50 \([0-9.]*\) us.*/\1/p' "$1" | tail -n 1; }
cpu_per_gb() { # client|server LOG...: user + system CPU seconds per GB of that side
  local side=$1
  shift
  sed -n "s/^\[CPU\] $side: \([0-9.]*\) s user + \([0-9.]*\) s system per GB.*/\1 \2/p" "$@" | tail -n 1 |
    awk '{ printf "%.3f", $1 + $2 }'
}
raw_gbps() { sed -n 's/^RESULT bw_.* recv_gbps=\([0-9.]*\).*/\1/p' "$@" | head -n 1; }
raw_latency() { sed -n 's/^RESULT latency_bytes=.* median_us=\([0-9.]*\).*/\1/p' "$@" | head -n 1; }

median() { tr ' ' '\n' | { grep -v '^$' || true; } | sort -g | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2); else print "-" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }
machine_line() {
  echo "$(hostname), $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), $(uname -r), load $(cut -d' ' -f1-3 /proc/loadavg)"
}

# RESULTS: lines "case|value|cpu_client cpu_server" ("-" where not measured),
# one per case and round. RATIOS: lines "A|B|TARGET" (TARGET ">= 0.9",
# "<= 1.5" or empty); a ratio whose cases were not measured is left out.
# Also writes RESULTS.csv: case,median,min,max,cpu_client,cpu_server.
summarize() {
  python3 - "$1" "$2" <<'PY'
import statistics, sys
rows = {}
for line in open(sys.argv[1]):
    name, val, cpu = line.rstrip("\n").split("|")
    cc, sc = cpu.split()
    rows.setdefault(name, []).append((float(val), cc, sc))
med = {k: statistics.median(v[0] for v in vs) for k, vs in rows.items()}
def cpu_med(vs, i):
    xs = [float(v[i]) for v in vs if v[i] != "-"]
    return "%.3f" % statistics.median(xs) if xs else "-"
print("\nmedians (GB/s = 1e9 B/s, latency in us; spread = min-max over the rounds):")
print("  %-34s %8s %15s %18s" % ("case", "median", "spread", "CPU s/GB cl / sv"))
with open(sys.argv[1] + ".csv", "w") as csv:
    csv.write("case,median,min,max,cpu_client,cpu_server\n")
    for k, vs in rows.items():
        xs = [v[0] for v in vs]
        print("  %-34s %8.2f %7.2f-%-7.2f %8s / %-8s" % (k, med[k], min(xs), max(xs), cpu_med(vs, 1), cpu_med(vs, 2)))
        csv.write("%s,%.3f,%.3f,%.3f,%s,%s\n" % (k, med[k], min(xs), max(xs), cpu_med(vs, 1), cpu_med(vs, 2)))
out = []
for line in open(sys.argv[2]):
    a, b, t = (line.rstrip("\n").split("|") + [""])[:3]
    if a not in med or b not in med or med[b] <= 0:
        continue
    r = med[a] / med[b]
    mark = ""
    if t:
        op, lim = t.split()
        ok = r >= float(lim) if op == ">=" else r <= float(lim)
        mark = "  (target %s: %s)" % (t, "met" if ok else "MISSED")
    out.append("  %-44s %5.2f%s" % (a + " / " + b, r, mark))
if out:
    print("\nratios of medians:")
    print("\n".join(out))
PY
}
