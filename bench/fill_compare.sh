#!/usr/bin/env bash
# Issue 18: does one transfer fill the machine? In one alternating loop
# (ROUNDS, default 5, the order rotating each round so load from other users
# spreads over all of them), over 127.0.0.1 (nothing else is dialled):
#   iperf3    8 iperf3 server/client pairs, one stream each, at once,
#             IPERF_SECONDS (3) s: the loopback ceiling (GB/s received, total)
#   raw       the built-in transport alone, one comm (tpx-netbench), 64 MiB,
#             1 and 4 messages in flight
#   engine    tpx-bench write, two processes, 64 and 256 MiB, 1 and 4 in
#             flight, host memory; GPU memory too when the machine has a GPU:
#             staging (the default transport) and unpack mode
#             (TPX_SOCK_UNPACK=1, 64 and 256 MiB), and GPU memory on one side
#             only (the sender's, the receiver's: what each of two hosts
#             would pay)
#   cold      the 64 MiB engine cases again with tpx-bench --regions
#             REGIONS (4): each transfer takes the next of REGIONS copies
#             of its buffers on both sides, so with REGIONS x 64 MiB per
#             side beyond the last-level cache (300 MiB on the 2x H200) no
#             host-memory transfer finds its bytes cached, as a real KV
#             cache's would not (the plain cases reuse one 64 MiB buffer,
#             which stays cached there). COLD=0 leaves them out.
# Every engine case is timed the same way, host or GPU memory. CHECK=once
# (default): timed runs without --check, and each GPU case's bytes verified
# by a short --check run of its own (3 transfers, round 1, not timed): with
# --check tpx-bench verifies the destination between transfers at one in
# flight, and that pause slows the next transfer (host memory 64 MiB x1:
# 0.56x on 2x H200, docs/BENCHMARKS.md), so checking only the GPU cases
# biased their ratios. CHECK=every: every engine case timed with --check
# (transfers with a pause between them, host memory included).
# Reports per case the median, the spread (min-max) and CPU seconds per GB
# of each side (tpx-bench [CPU] lines: user + system of the whole process),
# then the issue's ratios of medians:
#   engine 64 MiB 1 in flight / iperf3 >= 0.7; 4 in flight >= 0.85
#   GPU memory (staging, unpack) / host memory at the same settings >= 0.9
# and a Markdown table for docs/BENCHMARKS.md. A measurement that fails is
# retried twice on other ports, saying so; a case that fails three times
# stops the run (exit 1).
#
# usage: bench/fill_compare.sh [BUILD_DIR]   (default ./build; needs
#        BUILD_DIR/tpx-bench and tpx-netbench, python3, iperf3)
#   ROUNDS=5  ITERS64=30  ITERS256=10  IPERF_SECONDS=3  GPU=auto|0|1
#   COLD=1  REGIONS=4 (2..16)
#   IPERF3=path (default: iperf3 on PATH; none: leave it out)
#   PORT_BASE (default: from this process id)   LOGS=dir (logs kept there; default a temp dir, removed)
#   CLIENT_GPU, SERVER_GPU: the GPU of each side's GPU memory (tpx-bench
#   --gpu; default tpx-bench's own, 0): CLIENT_GPU=0 SERVER_GPU=1 on a
#   machine with two GPUs puts each process on its own GPU, as on two hosts
#   MPS=1: run every process under a CUDA MPS daemon of this run's own
#   (nvidia-cuda-mps-control, private pipe and log directories, stopped at
#   exit). Two processes on ONE GPU, the stand-in for two hosts, otherwise
#   take turns on it: CUDA time-slices the kernels of different processes,
#   so one side's staging copies wait while the other side's run, which two
#   hosts never do. Needs GPU cases (GPU=1 or a GPU found) and the GPU's
#   compute mode Default; MPS=0 (default) leaves CUDA as it is.
#   `taskset -c 0-15 bench/fill_compare.sh` confines every process, iperf3
#   included, to 16 CPUs; the engine sizes its defaults by the CPUs it may use.
#   CLIENT_CPUS, SERVER_CPUS: a CPU list (taskset -c) for each side's
#   processes (iperf3 and raw too): CLIENT_CPUS=0-15 SERVER_CPUS=16-31 gives
#   each end 16 CPUs of its own, as two hosts would have.
# Settings in the environment (TPX_*) apply to every engine run.
set -euo pipefail

build="${1:-build}"
rounds="${ROUNDS:-5}"
it64="${ITERS64:-30}"
it256="${ITERS256:-10}"
secs="${IPERF_SECONDS:-3}"
gpu="${GPU:-auto}"
chkmode="${CHECK:-once}"
cgpu="${CLIENT_GPU:-}"
sgpu="${SERVER_GPU:-}"
ccpus="${CLIENT_CPUS:-}"
scpus="${SERVER_CPUS:-}"
iperf="${IPERF3:-iperf3}"
cold="${COLD:-1}"
regions="${REGIONS:-4}"
mps="${MPS:-0}"
base="${PORT_BASE:-$((26000 + ($$ % 50) * 100))}"
tb="$build/tpx-bench"
nb="$build/tpx-netbench"
die() { echo "fill_compare: $*" >&2; exit 2; }
[ -x "$tb" ] && [ -x "$nb" ] || die "$tb or $nb not found; build first"
command -v python3 >/dev/null 2>&1 || die "python3 not installed"
if [ "$iperf" != none ] && ! command -v "$iperf" >/dev/null 2>&1; then
  die "$iperf not found (scripts/deps.sh --bench; IPERF3=path, or IPERF3=none)"
fi
case "$rounds$it64$it256$secs$base$cgpu$sgpu" in *[!0-9]*) die "ROUNDS, ITERS64, ITERS256, IPERF_SECONDS, PORT_BASE, CLIENT_GPU, SERVER_GPU: numbers" ;; esac
[ "$rounds" -ge 1 ] || die "ROUNDS >= 1"
case "$cold" in 0 | 1) ;; *) die "COLD: 0 or 1" ;; esac
case "$regions" in [2-9] | 1[0-6]) ;; *) die "REGIONS: 2..16 (copies of each buffer the cold cases rotate over)" ;; esac
case "$mps" in 0 | 1) ;; *) die "MPS: 0 or 1" ;; esac
case "$ccpus$scpus" in *[!0-9,-]*) die "CLIENT_CPUS, SERVER_CPUS: CPU lists as taskset -c takes them (0-15,32)" ;; esac
cpre=() spre=()
if [ -n "$ccpus$scpus" ]; then
  command -v taskset >/dev/null 2>&1 || die "CLIENT_CPUS / SERVER_CPUS need taskset (util-linux)"
  [ -n "$ccpus" ] && { taskset -c "$ccpus" true 2>/dev/null || die "CLIENT_CPUS=$ccpus: not CPUs this run may use"; cpre=(taskset -c "$ccpus"); }
  [ -n "$scpus" ] && { taskset -c "$scpus" true 2>/dev/null || die "SERVER_CPUS=$scpus: not CPUs this run may use"; spre=(taskset -c "$scpus"); }
fi
case $chkmode in once | every) ;; *) die "CHECK: once or every" ;; esac
if [ "$gpu" = auto ]; then
  gpu=0
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU' && gpu=1
fi
export TPX_SOCKET_IFNAME="${TPX_SOCKET_IFNAME:-lo}"
keep="${LOGS:-}"
tmp=${keep:-$(mktemp -d "${TMPDIR:-/tmp}/fillcmp.XXXXXX")}
mkdir -p "$tmp"
bench_name=fill_compare
# shellcheck source=bench/procs.sh
. "$(dirname "$0")/procs.sh"
mps_stop() {
  if [ "$mps" = 1 ] && [ -e "$tmp/mps-pipe/control" ]; then echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true; fi
}
trap 'stop_all; mps_stop; [ -n "$keep" ] || rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
if [ "$mps" = 1 ]; then
  [ "$gpu" = 1 ] || die "MPS=1: no GPU cases in this run (GPU=0, or no GPU found)"
  command -v nvidia-cuda-mps-control >/dev/null 2>&1 || die "MPS=1: nvidia-cuda-mps-control not found"
  export CUDA_MPS_PIPE_DIRECTORY="$tmp/mps-pipe" CUDA_MPS_LOG_DIRECTORY="$tmp/mps-log"
  mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
  nvidia-cuda-mps-control -d || die "MPS=1: the MPS control daemon did not start ($CUDA_MPS_LOG_DIRECTORY)"
  i=0
  until [ -e "$CUDA_MPS_PIPE_DIRECTORY/control" ]; do
    i=$((i + 1))
    [ $i -le 50 ] || die "MPS=1: no control pipe after 5 s ($CUDA_MPS_LOG_DIRECTORY)"
    sleep 0.1
  done
fi

# Cases: name | kind | memory | environment | size | in flight [| regions]
cases=(
  "iperf3|iperf|-|-|-|-"
  "raw 64M x1|raw|host|-|64M|1"
  "raw 64M x4|raw|host|-|64M|4"
  "host 64M x1|eng|host|-|64M|1"
  "host 64M x4|eng|host|-|64M|4"
  "host 256M x1|eng|host|-|256M|1"
  "host 256M x4|eng|host|-|256M|4"
)
if [ "$gpu" = 1 ]; then
  cases+=(
    "staging 64M x1|eng|cuda|-|64M|1"
    "staging 64M x4|eng|cuda|-|64M|4"
    "staging 256M x1|eng|cuda|-|256M|1"
    "staging 256M x4|eng|cuda|-|256M|4"
    "unpack 64M x1|eng|cuda|TPX_SOCK_UNPACK=1|64M|1"
    "unpack 64M x4|eng|cuda|TPX_SOCK_UNPACK=1|64M|4"
    "unpack 256M x1|eng|cuda|TPX_SOCK_UNPACK=1|256M|1"
    "unpack 256M x4|eng|cuda|TPX_SOCK_UNPACK=1|256M|4"
    "GPU sender 64M x1|eng|cuda/host|-|64M|1"
    "GPU sender 64M x4|eng|cuda/host|-|64M|4"
    "GPU receiver 64M x1|eng|host/cuda|-|64M|1"
    "GPU receiver 64M x4|eng|host/cuda|-|64M|4"
  )
fi
if [ "$cold" = 1 ]; then
  cases+=("host 64M x1 cold|eng|host|-|64M|1|$regions" "host 64M x4 cold|eng|host|-|64M|4|$regions")
  [ "$gpu" = 1 ] && cases+=(
    "staging 64M x1 cold|eng|cuda|-|64M|1|$regions"
    "staging 64M x4 cold|eng|cuda|-|64M|4|$regions"
    "unpack 64M x1 cold|eng|cuda|TPX_SOCK_UNPACK=1|64M|1|$regions"
    "unpack 64M x4 cold|eng|cuda|TPX_SOCK_UNPACK=1|64M|4|$regions"
  )
fi
[ "$iperf" = none ] && cases=("${cases[@]:1}")

# Each run_* sets val (GB/s) and cpu ("client server" CPU s per GB) or returns 1.
run_iperf() {
  local i p
  for i in 0 1 2 3 4 5 6 7; do
    "${spre[@]}" "$iperf" -s -1 -B 127.0.0.1 -p $((base + i)) --forceflush >"$tmp/ips-$i.log" 2>&1 &
    pids="$pids $!"
  done
  i=0
  for p in $pids; do wait_line listening "$tmp/ips-$i.log" "$p" || return 1; i=$((i + 1)); done
  local cl=""
  for i in 0 1 2 3 4 5 6 7; do
    "${cpre[@]}" "$iperf" -c 127.0.0.1 -p $((base + i)) -t "$secs" --json >"$tmp/ipc-$i.log" 2>&1 &
    cl="$cl $!"
  done
  for p in $cl; do wait "$p" || { bad "an iperf3 client failed" "$tmp"/ipc-*.log; return 1; }; done
  stop_all
  val=$(python3 - "$tmp" <<'PY'
import json, sys
print("%.3f" % (sum(json.load(open(f"{sys.argv[1]}/ipc-{i}.log"))["end"]["sum_received"]["bits_per_second"]
                    for i in range(8)) / 8 / 1e9))
PY
  ) || { bad "iperf3 output unreadable" "$tmp"/ipc-0.log; return 1; }
  cpu="- -"
}

run_raw() { # size inflight
  local s="$tmp/raw-s.log" c="$tmp/raw-c.log" spid
  "${spre[@]}" "$nb" server --port "$base" --size "$1" --inflight "$2" --iters "$it64" >"$s" 2>&1 &
  spid=$!
  pids=$spid
  sleep 0.3
  timeout 300 "${cpre[@]}" "$nb" client 127.0.0.1 --port "$base" --size "$1" --inflight "$2" --iters "$it64" >"$c" 2>&1 ||
    { bad "raw client failed" "$c" "$s"; return 1; }
  wait "$spid" || { bad "raw server failed" "$s"; return 1; }
  pids=""
  val=$(sed -n 's/^RESULT .* recv_gbps=\([0-9.]*\).*/\1/p' "$c" "$s" | head -n 1)
  [ -n "$val" ] || { bad "no RESULT line" "$c"; return 1; }
  cpu="- -"
}

# One tpx-bench pair; sets val and cpu. eng_pair memory environment size
# inflight iters check(0/1) regions
eng_pair() {
  local s="$tmp/eng-s.log" c="$tmp/eng-c.log" spid chk=() reg=() cm=${1%/*} sm=${1#*/}
  [ "$6" = 1 ] && chk=(--check)
  [ "$7" -gt 1 ] && reg=(--regions "$7")
  local envs=() cg=() sg=()
  [ "$2" != - ] && envs=("$2")
  [ "$cm" = cuda ] && [ -n "$cgpu" ] && cg=(--gpu "$cgpu")
  [ "$sm" = cuda ] && [ -n "$sgpu" ] && sg=(--gpu "$sgpu")
  env "${envs[@]}" "${spre[@]}" "$tb" server --host 127.0.0.1 --port "$base" --mem "$sm" "${sg[@]}" >"$s" 2>&1 &
  spid=$!
  pids=$spid
  wait_line '^\[SERVER\] listening' "$s" "$spid" || return 1
  timeout 300 env "${envs[@]}" "${cpre[@]}" "$tb" client 127.0.0.1 --port "$base" --mem "$cm" "${cg[@]}" --size "$3" --inflight "$4" \
    --iters "$5" --progress off "${chk[@]}" "${reg[@]}" >"$c" 2>&1 || { bad "tpx-bench client failed" "$c" "$s"; return 1; }
  wait "$spid" || { bad "tpx-bench server failed" "$s"; return 1; }
  pids=""
  if [ ${#chk[@]} -gt 0 ] && ! grep -q '^\[CHECK\] server: ok' "$s" "$c"; then bad "bytes not verified" "$s" "$c"; return 1; fi
  val=$(sed -n 's/^\[PERF\].*BW: \([0-9.]*\) GB.*/\1/p' "$c" | tail -n 1)
  [ -n "$val" ] || { bad "no [PERF] line" "$c"; return 1; }
  local cc sc
  cc=$(sed -n 's/^\[CPU\] client: \([0-9.]*\) s user + \([0-9.]*\) s system per GB.*/\1 \2/p' "$c" | tail -n 1 | awk '{ printf "%.3f", $1 + $2 }')
  sc=$(sed -n 's/^\[CPU\] server: \([0-9.]*\) s user + \([0-9.]*\) s system per GB.*/\1 \2/p' "$s" "$c" | tail -n 1 | awk '{ printf "%.3f", $1 + $2 }')
  cpu="${cc:--} ${sc:--}"
}

# memory (both sides, or client/server) environment size inflight regions;
# reads the round ($r) and measure's case name ($name) for the once-per-case
# check
run_eng() {
  local its="$it64" reg="$5"
  [ "$3" = 256M ] && its="$it256"
  if [ "$chkmode" = every ]; then
    eng_pair "$1" "$2" "$3" "$4" "$its" 1 "$reg"
    return
  fi
  case $1 in *cuda*)
    if [ "$r" = 1 ]; then # this case's bytes, verified once (a cold case: every region)
      local nv=$((3 > reg ? 3 : reg))
      eng_pair "$1" "$2" "$3" "$4" $nv 1 "$reg" || return 1
      echo "verified: $name ($nv transfers, --check$([ "$reg" -gt 1 ] && echo " --regions $reg"))" >>"$tmp/verified.txt"
    fi ;;
  esac
  eng_pair "$1" "$2" "$3" "$4" "$its" 0 "$reg"
}

measure() { # case line
  local name kind mem envs size inf reg try
  IFS='|' read -r name kind mem envs size inf reg <<<"$1"
  for try in 1 2 3; do
    case $kind in
    iperf) run_iperf && return 0 ;;
    raw) run_raw "$size" "$inf" && return 0 ;;
    eng) run_eng "$mem" "$envs" "$size" "$inf" "${reg:-1}" && return 0 ;;
    esac
    base=$((base + 100 > 32600 ? 26000 : base + 100))
    echo "fill_compare: $name failed (try $try); again on ports from $base" >&2
  done
  echo "fill_compare: $name failed three times" >&2
  exit 1
}

date=$(date -u +%Y-%m-%dT%H:%MZ)
echo "machine: $(hostname), $(nproc) CPUs ($(sed -n 's/^model name[[:space:]]*: //p' /proc/cpuinfo | head -n 1)), load $(cut -d' ' -f1-3 /proc/loadavg)"
echo "date:    $date"
echo "tpx:     $("$tb" --version 2>/dev/null | head -n 1)"
[ "$iperf" != none ] && echo "iperf3:  $("$iperf" --version | head -n 1)"
echo "setup:   $rounds rounds; 64 MiB x $it64, 256 MiB x $it256 per run; GPU cases: $([ "$gpu" = 1 ] && echo "yes (client GPU ${cgpu:-0}, server GPU ${sgpu:-0})" || echo no); CPUs this run may use: $(nproc)$([ -n "$ccpus$scpus" ] && echo "; client CPUs ${ccpus:-all}, server CPUs ${scpus:-all}")$([ "$cold" = 1 ] && echo "; cold cases: --regions $regions")$([ "$mps" = 1 ] && echo "; CUDA MPS on")"
echo "checks:  $([ "$chkmode" = every ] && echo "every engine run timed with --check" || echo "timed runs without --check; each GPU case verified once (--check, 3 transfers, round 1)")"
: >"$tmp/results.txt"
: >"$tmp/verified.txt"
k=${#cases[@]}
for r in $(seq 1 "$rounds"); do
  for j in $(seq 0 $((k - 1))); do
    c=${cases[$(((j + r - 1) % k))]}
    measure "$c"
    echo "${c%%|*}|$val|$cpu" >>"$tmp/results.txt"
    printf 'round %d: %-20s %8s GB/s   CPU s/GB client/server %s\n' "$r" "${c%%|*}" "$val" "$cpu"
  done
done
[ -s "$tmp/verified.txt" ] && { echo; cat "$tmp/verified.txt"; }
python3 - "$tmp/results.txt" "$date" "$(hostname)" "$(nproc)" <<'PY'
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
print("\nmedians (GB/s = 1e9 B/s, per GPU; spread = min-max over the rounds):")
print("  %-20s %8s %15s %18s" % ("case", "median", "spread", "CPU s/GB cl / sv"))
for k, vs in rows.items():
    xs = [v[0] for v in vs]
    print("  %-20s %8.2f %7.2f-%-7.2f %8s / %-8s" % (k, med[k], min(xs), max(xs), cpu_med(vs, 1), cpu_med(vs, 2)))
def ratio(a, b):
    return "%.2f" % (med[a] / med[b]) if a in med and b in med and med[b] > 0 else "-"
checks = [("host 64M x1", "iperf3", 0.7), ("host 64M x4", "iperf3", 0.85),
          ("staging 64M x1", "iperf3", 0.7), ("staging 64M x4", "iperf3", 0.85),
          ("staging 64M x1", "host 64M x1", 0.9), ("staging 64M x4", "host 64M x4", 0.9),
          ("unpack 64M x1", "host 64M x1", 0.9), ("unpack 64M x4", "host 64M x4", 0.9),
          ("host 64M x1", "raw 64M x1", None),
          # no transfer's bytes in the caches (--regions): what a KV cache's transfers meet
          ("host 64M x1 cold", "iperf3", 0.7), ("host 64M x4 cold", "iperf3", 0.85),
          ("staging 64M x1 cold", "host 64M x1 cold", 0.9), ("staging 64M x4 cold", "host 64M x4 cold", 0.9),
          ("unpack 64M x1 cold", "host 64M x1 cold", 0.9), ("unpack 64M x4 cold", "host 64M x4 cold", 0.9),
          ("host 64M x1 cold", "host 64M x1", None), ("staging 64M x1 cold", "staging 64M x1", None),
          # 256 MiB: the host buffers no longer fit the last-level cache either (bench/copy_cost.sh)
          ("staging 256M x1", "host 256M x1", None), ("staging 256M x4", "host 256M x4", None),
          ("unpack 256M x1", "host 256M x1", None), ("unpack 256M x4", "host 256M x4", None),
          # one side's GPU memory alone: what each host pays when the two ends are two hosts
          ("GPU sender 64M x1", "host 64M x1", None), ("GPU sender 64M x4", "host 64M x4", None),
          ("GPU receiver 64M x1", "host 64M x1", None), ("GPU receiver 64M x4", "host 64M x4", None)]
print("\nratios of medians (issue 18's targets where given):")
md = []
for a, b, t in checks:
    r = ratio(a, b)
    if r == "-":
        continue
    mark = "" if t is None else ("  (target >= %.2f: %s)" % (t, "met" if float(r) >= t else "MISSED"))
    print("  %-34s %5s%s" % (a + " / " + b, r, mark))
    md.append((a + " / " + b, r, "" if t is None else ">= %.2f" % t))
print("\nMarkdown (docs/BENCHMARKS.md): %s, %s (%s CPUs)" % (sys.argv[2], sys.argv[3], sys.argv[4]))
print("| case | median GB/s | spread | CPU s/GB client / server |\n|---|---|---|---|")
for k, vs in rows.items():
    xs = [v[0] for v in vs]
    print("| %s | %.2f | %.2f-%.2f | %s / %s |" % (k, med[k], min(xs), max(xs), cpu_med(vs, 1), cpu_med(vs, 2)))
print("\n| ratio | value | target |\n|---|---|---|")
for a, r, t in md:
    print("| %s | %s | %s |" % (a, r, t))
PY
