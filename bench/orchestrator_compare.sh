#!/usr/bin/env bash
# Issue 12's performance targets, side by side in one run, host memory over
# 127.0.0.1 (nothing else is dialled):
#   orch     one tpx-bench process driving N endpoints (--gpus 0..N-1) against
#            one process with N more: 64 MiB writes, every pair at once; the
#            client's total GB/s (the sum of its pairs' rates)
#   orch-eq  the same with the built-in transport's I/O thread pool as large
#            as the N processes' pools together (TPX_NTHREADS = N x the
#            default that tpx-info prints, at most 64): one process shares one
#            pool per device among its endpoints, N processes have N pools, and
#            on a busy machine threads are a share of the CPUs (ORCH_EQ=0: off)
#   procs    N tpx-bench server/client process pairs, one endpoint each (--gpu
#            i, the per-GPU mode), all started at once; the sum of the N
#            clients' GB/s
#   iperf3   N iperf3 server/client process pairs, one stream each, at once,
#            IPERF_SECONDS (5) s; the sum of their received GB/s
# They alternate, ROUNDS times (default 3), the order rotating each round, so
# load from other users of the machine spreads over all of them; medians are
# reported with the ratios and the issue's targets:
#   orch / iperf3 (N = 8) >= 0.7      orch / procs >= 0.9   (orch-eq / procs shown too)
# procs is measured without a common start (each process's rate is its own
# transfers' time): a skewed start shows as a higher procs figure, so the
# orch / procs ratio errs low, never high. A measurement that fails (a port
# taken meanwhile, say) is retried twice on other ports, saying so. Ends with
# a Markdown row for docs/BENCHMARKS.md.
#
# usage: bench/orchestrator_compare.sh [BUILD_DIR]   (default ./build; needs
#        BUILD_DIR/tpx-bench and tpx-info, python3, iperf3)
#   N=8 (endpoints / processes)  ROUNDS=3  ITERS=20 (64 MiB writes per pair per
#   run)  SIZE=64M  IPERF_SECONDS=5  ORCH_EQ=1  PORT_BASE (default: from this
#   process id, below the ephemeral range)  IPERF3=path (default: iperf3 on
#   PATH; IPERF3=none: no iperf3 measurement, e.g. a machine without it)
# GPU indexes 0..N-1 only place the endpoints (NUMA node of each GPU, when the
# machine has GPUs); the memory is host memory, so any machine runs it.
# Figures from a shared or busy machine are indicative only.
set -euo pipefail

build="${1:-build}"
n="${N:-8}"
rounds="${ROUNDS:-3}"
iters="${ITERS:-20}"
size="${SIZE:-64M}"
secs="${IPERF_SECONDS:-5}"
base="${PORT_BASE:-$((22000 + ($$ % 100) * 100))}"
iperf="${IPERF3:-iperf3}"
tb="$build/tpx-bench"
die() { echo "orchestrator_compare: $*" >&2; exit 2; }
[ -x "$tb" ] || die "$tb not found; build first"
command -v python3 >/dev/null 2>&1 || die "python3 not installed"
if [ "$iperf" != none ] && ! command -v "$iperf" >/dev/null 2>&1; then
  die "$iperf not found (scripts/deps.sh --test; IPERF3=path, or IPERF3=none to leave iperf3 out)"
fi
case "$n$rounds$iters$secs$base" in *[!0-9]*) die "N, ROUNDS, ITERS, IPERF_SECONDS, PORT_BASE: numbers" ;; esac
[ "$n" -ge 1 ] && [ "$n" -le 64 ] || die "N in [1, 64]"
export TPX_SOCKET_IFNAME="${TPX_SOCKET_IFNAME:-lo}"

tmp=$(mktemp -d "${TMPDIR:-/tmp}/orchcmp.XXXXXX")
bench_name=orchestrator_compare
# shellcheck source=bench/procs.sh
. "$(dirname "$0")/procs.sh"
trap 'stop_all; rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
last=$((n - 1))
gpus=$(seq -s, 0 "$last")
bench_args=(--size "$size" --iters "$iters" --warmup 2 --op write --progress off)

# spawn NAME CMD...: N copies at once, CMD's "@I" replaced by 0..N-1 and "@P"
# by PORT_BASE + that, logs $tmp/NAME-I.log, their pids added to pids
spawn() {
  local name=$1 i a
  shift
  for i in $(seq 0 "$last"); do
    local args=()
    for a in "$@"; do
      a=${a//@P/$((base + i))}
      args+=("${a//@I/$i}")
    done
    "${args[@]}" >"$tmp/$name-$i.log" 2>&1 &
    pids="$pids $!"
  done
}

# start_servers NAME PATTERN CMD...: spawned; returns once each log has PATTERN
start_servers() {
  local name=$1 listen=$2 i=0 p
  shift 2
  spawn "$name" "$@"
  for p in $pids; do
    wait_line "$listen" "$tmp/$name-$i.log" "$p" || return 1
    i=$((i + 1))
  done
}

# Each run_* sets val (GB/s) or returns 1.
# orch: one process per side, N endpoints each -> total GB/s (args: KEY=VALUE
# settings for both processes, or none)
run_orch_with() {
  local s="$tmp/orch-server.log" c="$tmp/orch-client.log" spid
  env "$@" "$tb" server --host 127.0.0.1 --port "$base" --gpus "$gpus" >"$s" 2>&1 &
  spid=$!
  pids=$spid
  wait_line '^\[SERVER\] listening' "$s" "$spid" || return 1
  timeout 600 env "$@" "$tb" client 127.0.0.1 --port "$base" --gpus "$gpus" "${bench_args[@]}" >"$c" 2>&1 ||
    { bad "orch client failed" "$c" "$s"; return 1; }
  wait "$spid" || { bad "orch server failed" "$s"; return 1; }
  pids=""
  val=$(sed -n 's/^\[PERF\] .* \([0-9.]*\) GB\/s total.*/\1/p' "$c" | tail -n 1)
  [ -n "$val" ] || bad "no total in $c" "$c"
}
run_orch() { run_orch_with; }
run_orcheq() { run_orch_with "TPX_NTHREADS=$eq_threads"; }

# clients NAME CMD...: spawned, then every process of pids waited for
clients() {
  local name=$1 p
  shift
  spawn "$name" "$@"
  for p in $pids; do wait "$p" || { bad "a $name process failed" "$tmp/$name"-*.log; return 1; }; done
  pids=""
}

# procs: N process pairs, one endpoint each -> the sum of their GB/s
run_procs() {
  local i bw
  val=0
  start_servers proc-server '^\[SERVER\] listening' "$tb" server --host 127.0.0.1 --port @P --gpu @I || return 1
  clients proc-client timeout 600 "$tb" client 127.0.0.1 --port @P --gpu @I "${bench_args[@]}" || return 1
  for i in $(seq 0 "$last"); do
    bw=$(sed -n 's/^\[PERF\] .*BW: \([0-9.]*\) GB\/s.*/\1/p' "$tmp/proc-client-$i.log" | tail -n 1)
    [ -n "$bw" ] || { bad "no figure from client $i" "$tmp/proc-client-$i.log"; return 1; }
    val=$(awk -v a="$val" -v b="$bw" 'BEGIN { printf "%.3f", a + b }')
  done
}

# iperf3: N process pairs, one stream each, at once -> the sum of their GB/s
run_iperf() {
  start_servers iperf-server listening "$iperf" -s -1 -B 127.0.0.1 -p @P --forceflush || return 1
  clients iperf-client "$iperf" -c 127.0.0.1 -p @P -t "$secs" --json || return 1
  val=$(python3 - "$tmp" "$n" <<'PY'
import json, sys
t = sum(json.load(open(f"{sys.argv[1]}/iperf-client-{i}.log"))["end"]["sum_received"]["bits_per_second"]
        for i in range(int(sys.argv[2])))
print("%.3f" % (t / 8 / 1e9))
PY
  ) || { bad "iperf3 output unreadable" "$tmp"/iperf-client-0.log; return 1; }
}

# measure M: run_M, retried twice on other ports
measure() {
  local try
  for try in 1 2 3; do
    "run_$1" && return 0
    base=$((base + 100 > 32600 ? 22000 : base + 100))
    echo "orchestrator_compare: $1 failed (try $try); again on ports from $base" >&2
  done
  die "$1 failed three times"
}

# orch-eq's pool: N x the default, as tpx-info reports it (at most 64)
eq_threads=0
if [ "${ORCH_EQ:-1}" = 1 ]; then
  d=$("$build/tpx-info" 2>/dev/null | awk '$1 == "TPX_NTHREADS" { print $2 }')
  [ -n "$d" ] || die "ORCH_EQ: cannot read TPX_NTHREADS from $build/tpx-info (ORCH_EQ=0 skips orch-eq)"
  eq_threads=$((d * n > 64 ? 64 : d * n))
fi

median() { tr ' ' '\n' | { grep -v '^$' || true; } | sort -g | awk '{ a[NR] = $1 } END { if (NR) print (NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2); else print "-" }'; }
ratio() { awk -v a="$1" -v b="$2" 'BEGIN { if (a + 0 > 0 && b + 0 > 0) printf "%.2f", a / b; else print "-" }'; }

date=$(date -u +%Y-%m-%dT%H:%MZ)
cpus=$(nproc)
model=$(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)
echo "machine: $(hostname), $cpus CPUs ($model), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date:    $date"
echo "tpx:     $("$tb" --version 2>/dev/null | head -n 1), commit $(git -C "$(dirname "$0")" rev-parse --short HEAD 2>/dev/null || echo '?')"
[ "$iperf" != none ] && echo "iperf3:  $("$iperf" --version | head -n 1)"
echo "setup:   N=$n, $size writes, $iters per pair per run (+2 warm-up), host memory, 127.0.0.1; iperf3 $secs s; $rounds rounds"
[ "$eq_threads" -gt 0 ] && echo "orch-eq: TPX_NTHREADS=$eq_threads"
declare -A got=([orch]="" [orcheq]="" [procs]="" [iperf]="")
measures="orch"
[ "$eq_threads" -gt 0 ] && measures="$measures orcheq"
measures="$measures procs"
[ "$iperf" != none ] && measures="$measures iperf"
read -r -a ms <<<"$measures"
k=${#ms[@]}
for r in $(seq 1 "$rounds"); do
  line="round $r:"
  for j in $(seq 0 $((k - 1))); do # the order rotates by one each round
    m=${ms[$(((j + r - 1) % k))]}
    measure "$m"
    got[$m]="${got[$m]} $val"
    line="$line $m $val GB/s,"
  done
  echo "${line%,}"
done
mo=$(echo "${got[orch]}" | median) me=$(echo "${got[orcheq]}" | median)
mp=$(echo "${got[procs]}" | median) mi=$(echo "${got[iperf]}" | median)
echo "medians over $rounds rounds (GB/s, totals of N=$n):"
printf '  %-58s %8s\n' "one process, $n endpoints (tpx-bench --gpus)" "$mo" \
  "the same, TPX_NTHREADS=$eq_threads (orch-eq)" "$me" \
  "$n processes, one endpoint each (tpx-bench --gpu)" "$mp" "$n iperf3 processes, one stream each" "$mi"
echo "ratios (of the medians):"
printf '  %-58s %6s  (target >= 0.7 at N = 8)\n' "one process / $n iperf3" "$(ratio "$mo" "$mi")"
printf '  %-58s %6s  (target >= 0.9)\n' "one process, $n endpoints / $n processes" "$(ratio "$mo" "$mp")"
printf '  %-58s %6s\n' "orch-eq / $n processes" "$(ratio "$me" "$mp")"
echo
echo "Markdown row (docs/BENCHMARKS.md): date, machine, N, one process, orch-eq, N processes, N iperf3, ratios"
echo "| $date | $(hostname) ($cpus CPUs) | $n | $mo | $me | $mp | $mi | $(ratio "$mo" "$mi") | $(ratio "$mo" "$mp") | $(ratio "$me" "$mp") |"
