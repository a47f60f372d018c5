#!/usr/bin/env bash
# The loopback comparisons: the engine against the raw transport and iperf3
# (and GPU memory against host memory), side by side in one run over
# 127.0.0.1. A SET names the cases; every case is one line of the table
# below, so adding a case is adding a line. The cases alternate ROUNDS times,
# the order rotating each round so load from other users of the machine
# spreads over all of them; then each case's median, spread (min-max) and CPU
# seconds per GB of each side, and the set's ratios of medians with their
# targets.
#
# usage: bench/compare.sh SET [BUILD_DIR]     (default ./build; needs
#        BUILD_DIR/tpx-bench and tpx-netbench, python3, iperf3)
# SETs (what each answers):
#   fill      does one transfer fill the machine? 8 iperf3 pairs (the
#             loopback ceiling), the raw transport (one comm, 64 MiB, 1 and
#             4 in flight), engine writes of host memory at 64 / 256 MiB, 1
#             and 4 in flight, the 64 MiB cases again "cold" (--regions: no
#             transfer finds its bytes cached, as a real KV cache's would
#             not), and with a GPU: GPU memory by staging and by unpack mode
#             (TPX_SOCK_UNPACK=1), and on one side only (what each of two
#             hosts pays)
#   cpu       the small-machine view: one iperf3 stream, the raw transport
#             at 1 and 2 in flight, engine write and send of 64 MiB, 4 KiB
#             one-way latency of both
#   kv        nixlbench's KV-cache pattern against contiguous writes: 1000 x
#             64 KiB, 256 x 16 KiB, 1000 x 4 KiB in one vectored request,
#             and one request per block (TPX_PACK_BYTES=0)
#   orch      one process driving N endpoints (tpx-bench --gpus) against N
#             processes with one each and N iperf3 pairs (N=8)
#   progress  the progress thread's idle policy: napping (the default)
#             against spinning TPX_PROGRESS_SPIN_US, GPU memory in unpack mode
#             (MEM=host for a machine without a GPU)
#   sweep     bandwidth by size (MIN..MAX, x2): engine write / read / send,
#             the raw transport and one iperf3 stream per size, and the KV
#             pattern by block size (4K..KV_MAX) x batch; bench/plot.py draws
#             LOGS/results.txt.csv
#   mem       is host memory what limits GPU memory on one host? host copy
#             bandwidth by threads (bench/membw.c), pinned GPU copies
#             (bench/gpu_copy.py, PyTorch), 8 iperf3 pairs, each alone and
#             while another runs
#   tcpx      Google's real GPUDirect-TCPX plugin with the RxDM and devmem
#             stand-ins (run it under tests/tcpx/with_real_plugin.sh, which
#             starts them; bench/tcpx_compare.sh does): the engine GPU
#             memory -> GPU memory over the plugin, write at 1 and 4 in
#             flight and send, against PyTorch's NCCL send/recv over the same
#             plugin and stand-ins (bench/nccl_with_tpx.py, NCCL's defaults
#             and Google's A3-high tuning), and against the emulation of the
#             plugin (the built-in transport's unpack mode, TPX_SOCK_UNPACK=1);
#             2 GPUs (CLIENT_GPU=0, SERVER_GPU=1 unless set), PyTorch
#   integrity what checking every chunk costs (TPX_INTEGRITY=1, the default,
#             against 0): engine writes of host memory, 64 MiB at 1 and 4 in
#             flight, cold (--regions), 4 KiB latency, a KV batch of 1000 x
#             4 KiB (the packed path), and with a GPU GPU memory by staging
#             and by unpack mode
#   encrypt   TPX_ENCRYPT=1 against 0 (both with the same TPX_AUTH_KEY, so
#             the only difference is the record layer): engine writes of host
#             memory, 64 MiB at 1 and 4 in flight, and 4 KiB one-way latency
#   net       the network lab, not loopback (bench/net.sh, its header lists
#             its settings; root): four veth links between two namespaces
#             shaped with tbf, iperf3 one stream per link against the engine
#             (TPX_STRIPE=fixed and adaptive) with all links healthy, one at a
#             tenth, one losing 0.1%, one down for 10 s mid-run
# Settings (environment):
#   ROUNDS=5  ITERS64=30  ITERS256=10 (transfers per engine or raw run; other
#   sizes take ITERS64)  IPERF_SECONDS=3  IPERF3=path|none
#   OLD=BUILD_DIR: every case also with that build, alternating, and the
#   ratio new / old of each case (before / after a change)
#   CASES="name|kind|fields;...": more cases, as in the table below
#   ONLY=regex: only the cases whose name matches
#   GPU=auto|0|1 (GPU cases of fill)  COLD=1  REGIONS=4 (2..16)  MPS=0|1
#   CHECK=once|every: timed runs without --check, each GPU case's bytes
#   verified once by a short --check run in round 1 (default); or every
#   engine run timed with --check (a pause between transfers at one in
#   flight, host memory included: compare checked runs with checked runs)
#   CLIENT_GPU, SERVER_GPU: each side's GPU (CLIENT_GPU=0 SERVER_GPU=1: each
#   process its own GPU, as on two hosts)
#   CLIENT_CPUS, SERVER_CPUS: a CPU list (taskset -c) for each side's
#   processes, iperf3 and raw included (0-15 and 16-31: each end 16 CPUs of
#   its own); `taskset -c 0-15 bench/compare.sh ...` confines the whole run
#   MPS=1: every process under a CUDA MPS daemon of this run's own (two
#   processes on ONE GPU otherwise take turns on it, which two hosts never do)
#   N=8 (orch)  MIN=4K MAX=64M KV_MAX=1M (sweep)  SPINS="50 200 1000" MEM
#   (progress)  NCCL_VARIANTS="tcpx tcpx-a3" (tcpx)  PYTHON (tcpx: one with
#   torch)  PORT_BASE (default from this process id)
#   LOGS=dir: keep the logs and results.txt there (default: a temp dir)
# Settings TPX_* in the environment apply to every engine run. A measurement
# that fails is retried twice on other ports, saying so; a case that fails
# three times stops the run (exit 1); a bad setting exits 2 before anything
# runs.
set -euo pipefail

set_name="${1:-}"
build="${2:-build}"
bench_name=compare
here=$(cd "$(dirname "$0")" && pwd)
# shellcheck source=bench/lib.sh
. "$here/lib.sh"

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
cold="${COLD:-1}"
regions="${REGIONS:-4}"
mps="${MPS:-0}"
old="${OLD:-}"
n="${N:-8}"
port_base="${PORT_BASE:-$((26000 + ($$ % 50) * 100))}"

case "$set_name" in fill | cpu | kv | orch | progress | sweep | mem | tcpx | integrity | encrypt) ;;
net) exec bash "$here/net.sh" "$build" ;; # its own runner: namespaces, not 127.0.0.1
*) die "usage: bench/compare.sh fill|cpu|kv|orch|progress|sweep|mem|tcpx|integrity|encrypt|net [BUILD_DIR] (see the header)" ;; esac
for b in "$build" ${old:+"$old"}; do
  [ -x "$b/tpx-bench" ] && [ -x "$b/tpx-netbench" ] || die "$b/tpx-bench or tpx-netbench not found; build first"
done
command -v python3 >/dev/null 2>&1 || die "python3 not installed"
if [ "$iperf" != none ] && ! command -v "$iperf" >/dev/null 2>&1; then
  die "$iperf not found (scripts/deps.sh --test; IPERF3=path, or IPERF3=none)"
fi
case "$rounds$it64$it256$secs$port_base$cgpu$sgpu$n" in *[!0-9]*) die "ROUNDS, ITERS64, ITERS256, IPERF_SECONDS, PORT_BASE, CLIENT_GPU, SERVER_GPU, N: numbers" ;; esac
[ "$rounds" -ge 1 ] || die "ROUNDS >= 1"
[ "$n" -ge 1 ] && [ "$n" -le 64 ] || die "N in [1, 64]"
case "$cold" in 0 | 1) ;; *) die "COLD: 0 or 1" ;; esac
case "$regions" in [2-9] | 1[0-6]) ;; *) die "REGIONS: 2..16 (copies of each buffer the cold cases rotate over)" ;; esac
case "$mps" in 0 | 1) ;; *) die "MPS: 0 or 1" ;; esac
case $chkmode in once | every) ;; *) die "CHECK: once or every" ;; esac
case "$ccpus$scpus" in *[!0-9,-]*) die "CLIENT_CPUS, SERVER_CPUS: CPU lists as taskset -c takes them (0-15,32)" ;; esac
if [ -n "$ccpus$scpus" ]; then
  command -v taskset >/dev/null 2>&1 || die "CLIENT_CPUS / SERVER_CPUS need taskset (util-linux)"
  [ -n "$ccpus" ] && { taskset -c "$ccpus" true 2>/dev/null || die "CLIENT_CPUS=$ccpus: not CPUs this run may use"; cpre=(taskset -c "$ccpus"); }
  [ -n "$scpus" ] && { taskset -c "$scpus" true 2>/dev/null || die "SERVER_CPUS=$scpus: not CPUs this run may use"; spre=(taskset -c "$scpus"); }
fi
if [ "$gpu" = auto ]; then
  gpu=0
  command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU' && gpu=1
fi
export TPX_SOCKET_IFNAME="${TPX_SOCKET_IFNAME:-lo}" TPX_LOG="${TPX_LOG:-error}"
keep="${LOGS:-}"
tmp=${keep:-$(mktemp -d "${TMPDIR:-/tmp}/compare.XXXXXX")}
mkdir -p "$tmp"
mps_stop() {
  if [ "$mps" = 1 ] && [ -e "$tmp/mps-pipe/control" ]; then echo quit | nvidia-cuda-mps-control >/dev/null 2>&1 || true; fi
}
trap 'stop_all; mps_stop; [ -n "$keep" ] || rm -rf "$tmp"' EXIT
trap 'exit 1' INT TERM
[ "$mps" = 1 ] && [ "$gpu" != 1 ] && die "MPS=1: no GPU cases in this run (GPU=0, or no GPU found)"

# ---- the sets ------------------------------------------------------------------
# A case: name|kind|fields. Kinds and their fields:
#   iperf|PAIRS|LEN            iperf3 pairs at once (-l LEN, or -), total GB/s
#   raw|SIZE|INFLIGHT          tpx-netbench, one comm, two processes
#   rawlat|SIZE                tpx-netbench --latency, two processes: one-way
#                              us (median)
#   eng|MEM|ENV|SIZE|INFLIGHT|REGIONS|OPTS
#                              a tpx-bench server and client: MEM host, cuda
#                              or client/server; ENV VAR=value ... or -; SIZE
#                              or - (OPTS give it); OPTS more client options
#                              (--latency: one-way p50 us instead of GB/s)
#   orch|ENV                   one tpx-bench process per side driving N
#                              endpoints (--gpus 0..N-1), total GB/s
#   procs                      N tpx-bench process pairs at once, total GB/s
#   membw|THREADS              host memory copy GB/s (bench/membw.c)
#   gpucopy|DIR                pinned GPU copies, d2h or h2d (bench/gpu_copy.py)
#   nccl|TRANSPORT|SIZE|INFLIGHT
#                              PyTorch's NCCL send/recv GPU $CLIENT_GPU -> GPU
#                              $SERVER_GPU (bench/nccl_with_tpx.py --transport
#                              TRANSPORT), GB/s per GPU; a round's cases of one
#                              transport share one run
#   while|LOAD|KIND|fields     the case KIND while LOAD runs beside it
#                              (LOAD: "membw T", "gpucopy DIR" or "iperf N")
# A ratio: A|B|TARGET (">= 0.9", "<= 1.5" or empty).
cases=() ratios=()
ratio_of() { ratios+=("$1|$2|${3:-}"); }
fill_set() {
  cases=("iperf3|iperf|8|-" "raw 64M x1|raw|64M|1" "raw 64M x4|raw|64M|4"
    "host 64M x1|eng|host|-|64M|1|1|" "host 64M x4|eng|host|-|64M|4|1|"
    "host 256M x1|eng|host|-|256M|1|1|" "host 256M x4|eng|host|-|256M|4|1|")
  local m e
  if [ "$gpu" = 1 ]; then
    for m in "staging|-" "unpack|TPX_SOCK_UNPACK=1"; do
      for s in 64M 256M; do for i in 1 4; do cases+=("${m%|*} $s x$i|eng|cuda|${m#*|}|$s|$i|1|"); done; done
    done
    for i in 1 4; do cases+=("GPU sender 64M x$i|eng|cuda/host|-|64M|$i|1|" "GPU receiver 64M x$i|eng|host/cuda|-|64M|$i|1|"); done
  fi
  if [ "$cold" = 1 ]; then
    cases+=("host 64M x1 cold|eng|host|-|64M|1|$regions|" "host 64M x4 cold|eng|host|-|64M|4|$regions|")
    [ "$gpu" = 1 ] && for m in "staging|-" "unpack|TPX_SOCK_UNPACK=1"; do
      for i in 1 4; do cases+=("${m%|*} 64M x$i cold|eng|cuda|${m#*|}|64M|$i|$regions|"); done
    done
  fi
  for i in 1 4; do
    e=$([ $i = 1 ] && echo 0.70 || echo 0.85)
    ratio_of "host 64M x$i" iperf3 ">= $e"
    ratio_of "staging 64M x$i" iperf3 ">= $e"
  done
  for m in staging unpack; do for i in 1 4; do ratio_of "$m 64M x$i" "host 64M x$i" ">= 0.9"; done; done
  ratio_of "host 64M x1" "raw 64M x1"
  # no transfer's bytes in the caches (--regions): what a KV cache's transfers meet
  ratio_of "host 64M x1 cold" iperf3 ">= 0.70"
  ratio_of "host 64M x4 cold" iperf3 ">= 0.85"
  for m in staging unpack; do for i in 1 4; do ratio_of "$m 64M x$i cold" "host 64M x$i cold" ">= 0.9"; done; done
  ratio_of "host 64M x1 cold" "host 64M x1"
  ratio_of "staging 64M x1 cold" "staging 64M x1"
  # 256 MiB: the host buffers no longer fit the last-level cache either
  for m in staging unpack; do for i in 1 4; do ratio_of "$m 256M x$i" "host 256M x$i"; done; done
  # one side's GPU memory alone: what each host pays when the two ends are two hosts
  for m in sender receiver; do for i in 1 4; do ratio_of "GPU $m 64M x$i" "host 64M x$i"; done; done
}
cpu_set() {
  cases=("iperf3 1 stream|iperf|1|-" "raw 64M x1|raw|64M|1" "raw 64M x2|raw|64M|2"
    "write 64M x1|eng|host|-|64M|1|1|" "write 64M x2|eng|host|-|64M|2|1|" "send 64M|eng|host|-|64M|1|1|--op send"
    "raw 4K latency|rawlat|4K" "write 4K latency|eng|host|-|4K|1|1|--latency")
  ratio_of "raw 64M x2" "iperf3 1 stream" ">= 0.9"
  ratio_of "write 64M x1" "raw 64M x1" ">= 0.9"
  ratio_of "write 64M x2" "raw 64M x2" ">= 0.9"
  ratio_of "write 64M x2" "raw 64M x1"
  ratio_of "write 64M x1" "iperf3 1 stream" ">= 0.85"
  ratio_of "send 64M" "raw 64M x1"
  ratio_of "write 4K latency" "raw 4K latency" "<= 1.5"
}
encrypt_set() {
  # A bench key (not a secret): both cases authenticate, one also encrypts.
  local k="TPX_AUTH_KEY=tpx-bench-encrypt-comparison-key" e
  e="$k TPX_ENCRYPT=1"
  cases=("plain 64M x1|eng|host|$k|64M|1|1|" "encrypted 64M x1|eng|host|$e|64M|1|1|"
    "plain 64M x4|eng|host|$k|64M|4|1|" "encrypted 64M x4|eng|host|$e|64M|4|1|"
    "plain 4K latency|eng|host|$k|4K|1|1|--latency" "encrypted 4K latency|eng|host|$e|4K|1|1|--latency")
  ratio_of "encrypted 64M x1" "plain 64M x1"
  ratio_of "encrypted 64M x4" "plain 64M x4" ">= 0.5"
  ratio_of "encrypted 4K latency" "plain 4K latency"
}
kv_set() {
  cases=("contig 64M|eng|host|-|64M|1|1|" "contig 4M|eng|host|-|4M|1|1|"
    "kv 1000x64K|eng|host|-|-|1|1|--block-size 64K --batch 1000"
    "kv 1000x64K one request per block|eng|host|TPX_PACK_BYTES=0|-|1|1|--block-size 64K --batch 1000"
    "kv 256x16K|eng|host|-|-|1|1|--block-size 16K --batch 256"
    "kv 256x16K one request per block|eng|host|TPX_PACK_BYTES=0|-|1|1|--block-size 16K --batch 256"
    "kv 1000x4K|eng|host|-|-|1|1|--block-size 4K --batch 1000"
    "kv 1000x4K read|eng|host|-|-|1|1|--block-size 4K --batch 1000 --op read")
  ratio_of "kv 1000x64K" "contig 64M" ">= 0.8"
  ratio_of "kv 256x16K" "contig 64M" ">= 0.6"
  ratio_of "kv 256x16K" "contig 4M"
  ratio_of "kv 1000x4K" "contig 64M"
  ratio_of "kv 1000x64K" "kv 1000x64K one request per block"
  ratio_of "kv 256x16K" "kv 256x16K one request per block"
}
orch_set() {
  local d eq
  d=$("$build/tpx-info" 2>/dev/null | awk '$1 == "TPX_NTHREADS" { print $2 }')
  [ -n "$d" ] || die "orch: cannot read TPX_NTHREADS from $build/tpx-info"
  eq=$((d * n > 64 ? 64 : d * n))
  # one process shares one I/O pool per device among its endpoints; N
  # processes have N pools: the second case gives the one process as many
  cases=("one process|orch|-" "one process, N pools' threads|orch|TPX_NTHREADS=$eq" "N processes|procs"
    "iperf3 x N|iperf|$n|-")
  ratio_of "one process" "iperf3 x N" ">= 0.7"
  ratio_of "one process" "N processes" ">= 0.9"
  ratio_of "one process, N pools' threads" "N processes"
}
progress_set() {
  local m=${MEM:-cuda} s
  [ "$m" = cuda ] || m=host
  cases=("nap (default)|eng|$m|TPX_SOCK_UNPACK=1 TPX_PROGRESS_SPIN_US=0|64M|2|1|")
  for s in ${SPINS:-50 200 1000}; do
    cases+=("spin $s us|eng|$m|TPX_SOCK_UNPACK=1 TPX_PROGRESS_SPIN_US=$s|64M|2|1|")
    ratio_of "spin $s us" "nap (default)"
  done
}
sweep_set() {
  local s op max b
  s=$(bytes "${MIN:-4K}") max=$(bytes "${MAX:-64M}")
  while [ "$s" -le "$max" ]; do
    for op in write read send; do cases+=("$op $s|eng|host|-|$s|1|1|--op $op"); done
    cases+=("raw $s|raw|$s|1" "iperf3 $s|iperf|1|$((s > 1048576 ? 1048576 : s))")
    ratio_of "write $s" "raw $s"
    s=$((s * 2))
  done
  s=4096 max=$(bytes "${KV_MAX:-1M}")
  while [ "$s" -le "$max" ]; do
    for b in 1 16 64 256 1000; do cases+=("kv ${s}x$b|eng|host|-|-|1|1|--block-size $s --batch $b"); done
    s=$((s * 4))
  done
}
integrity_set() {
  local c m i t
  c=("64M x1|host|-|64M|1|1|" "64M x4|host|-|64M|4|1|" "64M x4 cold|host|-|64M|4|$regions|"
    "4K latency|host|-|4K|1|1|--latency" "kv 1000x4K|host|-|-|1|1|--block-size 4K --batch 1000")
  if [ "$gpu" = 1 ]; then
    for m in "staging|-" "unpack|TPX_SOCK_UNPACK=1"; do
      for i in 1 4; do c+=("${m%|*} 64M x$i|cuda|${m#*|}|64M|$i|1|"); done
    done
  fi
  for i in "${c[@]}"; do
    IFS='|' read -r n m e rest <<<"$i"
    [ "$e" = - ] && e=
    cases+=("$n on|eng|$m|${e:+$e }TPX_INTEGRITY=1|$rest" "$n off|eng|$m|${e:+$e }TPX_INTEGRITY=0|$rest")
    case "$n" in *latency) t="<= 1.1" ;; unpack*) t=">= 0.95" ;; *) t=">= 0.9" ;; esac
    ratio_of "$n on" "$n off" "$t"
  done
}
mem_set() {
  local t
  for t in 1 4 8 16; do cases+=("copy, $t threads|membw|$t"); done
  cases+=("D2H|gpucopy|d2h" "H2D|gpucopy|h2d" "iperf3 x 8|iperf|8|-"
    "D2H while 16 threads copy|while|membw 16|gpucopy|d2h" "copy, 8 threads, while iperf3 x 8|while|iperf 8|membw|8"
    "iperf3 x 8 while D2H|while|gpucopy d2h|iperf|8|-" "iperf3 x 8 while H2D|while|gpucopy h2d|iperf|8|-")
  ratio_of "D2H while 16 threads copy" D2H
  ratio_of "copy, 8 threads, while iperf3 x 8" "copy, 8 threads"
  ratio_of "iperf3 x 8 while D2H" "iperf3 x 8"
  ratio_of "iperf3 x 8 while H2D" "iperf3 x 8"
}
tcpx_set() {
  # Under with_real_plugin.sh: the plugin it names and the stand-ins it started.
  tcpx_plugin=${TPX_NET_PLUGIN:-}
  [ -n "$tcpx_plugin" ] && [ -f "$tcpx_plugin" ] && [ -n "${NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX:-}" ] ||
    die "tcpx: run under tests/tcpx/with_real_plugin.sh (bench/tcpx_compare.sh does): TPX_NET_PLUGIN and the RxDM stand-in's prefix are not set"
  tcpx_devmem=${TPX_DEVMEM_STANDIN:-$build/tests/fakes/devmem/libtpx-devmem-standin.so}
  [ -f "$tcpx_devmem" ] || die "tcpx: the devmem stand-in $tcpx_devmem is not built"
  # GPU=1 without a GPU: the CUDA test doubles' "GPU" memory (a dry run of the set).
  [ "$gpu" = 1 ] || die "tcpx: needs GPUs (or GPU=1 over the CUDA test doubles)"
  tcpx_py=${PYTHON:-python3}
  [ -z "${NCCL_VARIANTS-x}" ] || "$tcpx_py" -c 'import torch' 2>/dev/null ||
    die "tcpx: $tcpx_py has no torch (PYTHON=..., or NCCL_VARIANTS= for no NCCL cases)"
  # Only the cases that name it use the plugin; the emulation's use the built-in transport.
  unset TPX_NET_PLUGIN
  [ -n "$cgpu" ] || cgpu=0
  [ -n "$sgpu" ] || sgpu=1
  local real="TPX_NET_PLUGIN=$tcpx_plugin LD_PRELOAD=$tcpx_devmem" i v e
  for i in 1 4; do
    cases+=("real plugin 64M x$i|eng|cuda|$real|64M|$i|1|" "emulation 64M x$i|eng|cuda|TPX_SOCK_UNPACK=1|64M|$i|1|")
    for v in ${NCCL_VARIANTS-tcpx tcpx-a3}; do cases+=("NCCL $v 64M x$i|nccl|$v|64M|$i"); done
  done
  cases+=("real plugin send 64M x1|eng|cuda|$real|64M|1|1|--op send")
  for i in 1 4; do
    e=$([ $i = 1 ] && echo 1.2 || echo 1.3)
    for v in ${NCCL_VARIANTS-tcpx tcpx-a3}; do ratio_of "real plugin 64M x$i" "NCCL $v 64M x$i" ">= $e"; done
    ratio_of "real plugin 64M x$i" "emulation 64M x$i" ">= 0.8"
  done
  for v in ${NCCL_VARIANTS-tcpx tcpx-a3}; do ratio_of "real plugin send 64M x1" "NCCL $v 64M x1"; done
}
bytes() { # 4K -> 4096
  case $1 in *K) echo $((${1%K} << 10)) ;; *M) echo $((${1%M} << 20)) ;; *G) echo $((${1%G} << 30)) ;; *) echo "$1" ;; esac
}

"${set_name}_set"
if [ -n "${CASES:-}" ]; then IFS=';' read -r -a more <<<"$CASES"; cases+=("${more[@]}"); fi
if [ -n "${ONLY:-}" ]; then
  keep_cases=()
  for c in "${cases[@]}"; do [[ ${c%%|*} =~ $ONLY ]] && keep_cases+=("$c"); done
  cases=("${keep_cases[@]}")
fi
if [ "$iperf" = none ]; then
  keep_cases=()
  for c in "${cases[@]}"; do case $c in *"|iperf|"* | *"|while|iperf"*) ;; *) keep_cases+=("$c") ;; esac; done
  cases=("${keep_cases[@]}")
fi
[ ${#cases[@]} -gt 0 ] || die "no cases left (ONLY=${ONLY:-})"
if [ -n "$old" ]; then # each case with both builds, side by side
  both=()
  for c in "${cases[@]}"; do both+=("${c%%|*} [old]|${c#*|}" "${c%%|*} [new]|${c#*|}"); done
  cases=("${both[@]}")
  rs=()
  for r in "${ratios[@]}"; do
    IFS='|' read -r a b t <<<"$r"
    rs+=("$a [old]|$b [old]|$t" "$a [new]|$b [new]|$t")
  done
  for c in "${cases[@]}"; do case ${c%%|*} in *" [new]") rs+=("${c%%|*}|${c%% \[new\]|*} [old]|") ;; esac; done
  ratios=("${rs[@]}")
fi
if [ "$mps" = 1 ]; then
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

# ---- the kinds: each run_* sets val and cpu ("client server" CPU s per GB) or returns 1
iters_for() { case $1 in 256M) echo "$it256" ;; *) echo "$it64" ;; esac; }
run_iperf() { iperf_pairs "$1" "$secs" "$2" "$port_base"; }

# A tpx-netbench server and client: size inflight [more options]; logs in
# $tmp/raw-s.log and raw-c.log
raw_pair() {
  local s="$tmp/raw-s.log" c="$tmp/raw-c.log" spid its size=$1 inf=$2
  shift 2
  its=$(iters_for "$size")
  "${spre[@]}" "$nb" server --port "$port_base" --size "$size" --inflight "$inf" --iters "$its" "$@" >"$s" 2>&1 &
  spid=$!
  pids=$spid
  sleep 0.3
  timeout 300 "${cpre[@]}" "$nb" client 127.0.0.1 --port "$port_base" --size "$size" --inflight "$inf" --iters "$its" \
    "$@" >"$c" 2>&1 || { bad "raw client failed" "$c" "$s"; return 1; }
  wait "$spid" || { bad "raw server failed" "$s"; return 1; }
  pids=""
  cpu="- -"
}
run_raw() { # size inflight
  raw_pair "$1" "$2" || return 1
  val=$(raw_gbps "$tmp/raw-c.log" "$tmp/raw-s.log")
  [ -n "$val" ] || { bad "no RESULT line" "$tmp/raw-c.log"; return 1; }
}
run_rawlat() { # size: one-way latency, median of 2000 ping-pongs
  raw_pair "$1" 1 --latency --lat-size "$1" --lat-iters 2000 || return 1
  val=$(raw_latency "$tmp/raw-c.log" "$tmp/raw-s.log")
  [ -n "$val" ] || { bad "no latency RESULT line" "$tmp/raw-c.log"; return 1; }
}

# One tpx-bench pair: memory environment size inflight iters check(0/1) regions opts
eng_pair() {
  local s="$tmp/eng-s.log" c="$tmp/eng-c.log" spid chk=() regopt=() sz=() cm=${1%/*} sm=${1#*/} envs=() cg=() sg=() opts=()
  [ "$6" = 1 ] && chk=(--check)
  [ "$7" -gt 1 ] && regopt=(--regions "$7")
  [ "$3" != - ] && sz=(--size "$3")
  [ "$2" != - ] && read -r -a envs <<<"$2"
  read -r -a opts <<<"$8"
  [ "$cm" = cuda ] && [ -n "$cgpu" ] && cg=(--gpu "$cgpu")
  [ "$sm" = cuda ] && [ -n "$sgpu" ] && sg=(--gpu "$sgpu")
  env "${envs[@]}" "${spre[@]}" "$tb" server --host 127.0.0.1 --port "$port_base" --mem "$sm" "${sg[@]}" >"$s" 2>&1 &
  spid=$!
  pids=$spid
  wait_line '^\[SERVER\] listening' "$s" "$spid" || return 1
  timeout 300 env "${envs[@]}" "${cpre[@]}" "$tb" client 127.0.0.1 --port "$port_base" --mem "$cm" "${cg[@]}" "${sz[@]}" \
    --inflight "$4" --iters "$5" --progress off "${chk[@]}" "${regopt[@]}" "${opts[@]}" >"$c" 2>&1 ||
    { bad "tpx-bench client failed" "$c" "$s"; return 1; }
  wait "$spid" || { bad "tpx-bench server failed" "$s"; return 1; }
  pids=""
  if [ ${#chk[@]} -gt 0 ] && ! grep -q '^\[CHECK\] \(server\|client\): ok' "$s" "$c"; then bad "bytes not verified" "$s" "$c"; return 1; fi
  case " $8 " in *" --latency "*) val=$(perf_p50 "$c") ;; *) val=$(perf_gbps "$c") ;; esac
  [ -n "$val" ] || { bad "no [PERF] line" "$c"; return 1; }
  local cc sc
  cc=$(cpu_per_gb client "$c")
  sc=$(cpu_per_gb server "$s" "$c")
  cpu="${cc:--} ${sc:--}"
}

# memory environment size inflight regions opts; reads the round ($r) and
# the case name ($name) for the once-per-case check
run_eng() {
  local its reg="$5"
  its=$(iters_for "$3")
  case " $6 " in *" --latency "*) its=2000 ;; esac
  if [ "$chkmode" = every ]; then
    eng_pair "$1" "$2" "$3" "$4" "$its" 1 "$reg" "$6"
    return
  fi
  case $1 in *cuda*)
    if [ "$r" = 1 ]; then # this case's bytes, verified once (a cold case: every region)
      local nv=$((3 > reg ? 3 : reg))
      eng_pair "$1" "$2" "$3" "$4" $nv 1 "$reg" "$6" || return 1
      echo "verified: $name ($nv transfers, --check$([ "$reg" -gt 1 ] && echo " --regions $reg"))" >>"$tmp/verified.txt"
    fi ;;
  esac
  eng_pair "$1" "$2" "$3" "$4" "$its" 0 "$reg" "$6"
}

# orch: one process per side, N endpoints each -> total GB/s
run_orch() {
  local s="$tmp/orch-s.log" c="$tmp/orch-c.log" spid envs=() gpus
  gpus=$(seq -s, 0 $((n - 1)))
  [ "$1" != - ] && read -r -a envs <<<"$1"
  env "${envs[@]}" "${spre[@]}" "$tb" server --host 127.0.0.1 --port "$port_base" --gpus "$gpus" >"$s" 2>&1 &
  spid=$!
  pids=$spid
  wait_line '^\[SERVER\] listening' "$s" "$spid" || return 1
  timeout 600 env "${envs[@]}" "${cpre[@]}" "$tb" client 127.0.0.1 --port "$port_base" --gpus "$gpus" --size 64M \
    --iters "$it64" --op write --progress off >"$c" 2>&1 || { bad "one-process client failed" "$c" "$s"; return 1; }
  wait "$spid" || { bad "one-process server failed" "$s"; return 1; }
  pids=""
  val=$(perf_total "$c")
  [ -n "$val" ] || { bad "no total in $c" "$c"; return 1; }
  cpu="- -"
}

# procs: N process pairs, one endpoint each, started at once -> the sum of
# their GB/s (no common start: a skewed start raises it, so one process /
# N processes errs low, never high)
run_procs() {
  local i p bw cl=""
  val=0
  for i in $(seq 0 $((n - 1))); do
    "${spre[@]}" "$tb" server --host 127.0.0.1 --port $((port_base + i)) --gpu "$i" >"$tmp/ps-$i.log" 2>&1 &
    pids="$pids $!"
  done
  i=0
  for p in $pids; do wait_line '^\[SERVER\] listening' "$tmp/ps-$i.log" "$p" || return 1; i=$((i + 1)); done
  for i in $(seq 0 $((n - 1))); do
    timeout 600 "${cpre[@]}" "$tb" client 127.0.0.1 --port $((port_base + i)) --gpu "$i" --size 64M --iters "$it64" \
      --op write --progress off >"$tmp/pc-$i.log" 2>&1 &
    cl="$cl $!"
  done
  for p in $cl; do wait "$p" || { bad "a client failed" "$tmp"/pc-*.log; return 1; }; done
  stop_all
  for i in $(seq 0 $((n - 1))); do
    bw=$(perf_gbps "$tmp/pc-$i.log")
    [ -n "$bw" ] || { bad "no figure from client $i" "$tmp/pc-$i.log"; return 1; }
    val=$(awk -v a="$val" -v b="$bw" 'BEGIN { printf "%.3f", a + b }')
  done
  cpu="- -"
}

# nccl: TRANSPORT SIZE INFLIGHT -> GB/s per GPU. One run times every in-flight
# count the set has for TRANSPORT (PyTorch and NCCL start in seconds, a
# transfer in milliseconds); the round's other cases of TRANSPORT take theirs
# from it. The run checks the bytes received and its log must show NCCL's
# channels going through the plugin.
declare -A nccl_got=()
run_nccl() {
  local tr=$1 size=$2 inf=$3 log="$tmp/nccl.log" infs="" c its
  if [ -z "${nccl_got[$r|$tr|$size|$inf]:-}" ]; then
    for c in "${cases[@]}"; do
      case $c in *"|nccl|$tr|$size|"*) infs="$infs,${c##*|}" ;; esac
    done
    its=$(iters_for "$size")
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET CUDA_VISIBLE_DEVICES="$cgpu,$sgpu" LD_PRELOAD="$tcpx_devmem" \
      timeout 300 "$tcpx_py" "$here/nccl_with_tpx.py" --transport "$tr" --plugin "$tcpx_plugin" --check-max 0 \
      --sizes "$size" --inflight "${infs#,}" --iters "$its" --warmup 3 >"$log" 2>&1 ||
      { bad "NCCL $tr failed" "$log"; return 1; }
    grep -q "via NET/GPUDirectTCPX_v7/" "$log" || { bad "NCCL $tr: no channel via NET/GPUDirectTCPX_v7 in its log" "$log"; return 1; }
    local line
    while read -r line; do nccl_got[$r|$tr|$size|${line%% *}]=${line#* }; done < <(
      sed -n 's/^RESULT //p' "$log" | python3 -c '
import json, sys
for t in json.load(sys.stdin)["timed"]:
    print(t["inflight"], "%.3f" % t["gbps_per_gpu"])')
  fi
  val=${nccl_got[$r|$tr|$size|$inf]:-}
  [ -n "$val" ] || { bad "NCCL $tr: no figure for $size x$inf" "$log"; return 1; }
  cpu="- -"
}

membw_bin() {
  [ -x "$tmp/membw" ] || cc -O2 -pthread "$here/membw.c" -o "$tmp/membw" || return 1
  echo "$tmp/membw"
}
run_membw() { # threads
  local b
  b=$(membw_bin) || { bad "cannot build bench/membw.c"; return 1; }
  "${cpre[@]}" "$b" "$1" 64 2 >"$tmp/membw.log" 2>&1 || { bad "membw failed" "$tmp/membw.log"; return 1; }
  val=$(sed -n 's/.*copy \([0-9.]*\) GB\/s.*/\1/p' "$tmp/membw.log")
  cpu="- -"
}
run_gpucopy() { # d2h|h2d
  "${PYTHON:-python3}" "$here/gpu_copy.py" "$1" 2 >"$tmp/gpucopy.log" 2>&1 || { bad "gpu_copy.py failed" "$tmp/gpucopy.log"; return 1; }
  val=$(sed -n 's/.*: \([0-9.]*\) GB\/s.*/\1/p' "$tmp/gpucopy.log" | tail -n 1)
  cpu="- -"
}
# A load beside a case, for as long as it runs (then stopped): "membw T",
# "gpucopy DIR" or "iperf N"
load_start() {
  local what=$1 arg=$2 i
  case $what in
  membw) "$(membw_bin)" "$arg" 64 60 >/dev/null 2>&1 & pids="$pids $!" ;;
  gpucopy) "${PYTHON:-python3}" "$here/gpu_copy.py" "$arg" 60 >/dev/null 2>&1 & pids="$pids $!" ;;
  iperf)
    for i in $(seq 0 $((arg - 1))); do
      "$iperf" -s -1 -B 127.0.0.1 -p $((port_base + 50 + i)) >/dev/null 2>&1 &
      pids="$pids $!"
    done
    sleep 0.5
    for i in $(seq 0 $((arg - 1))); do
      "$iperf" -c 127.0.0.1 -p $((port_base + 50 + i)) -t 60 >/dev/null 2>&1 &
      pids="$pids $!"
    done ;;
  esac
  sleep 1
}
run_while() { # LOAD KIND fields...
  local load=$1 kind=$2 keep_pids
  shift 2
  load_start $load
  keep_pids=$pids pids=""
  "run_$kind" "$@"
  local rc=$?
  pids="$pids $keep_pids"
  stop_all
  return $rc
}

measure() { # case line
  local kind try f
  IFS='|' read -r name kind f <<<"$1"
  local -a fields
  IFS='|' read -r -a fields <<<"$f"
  for try in 1 2 3; do
    if [ "$kind" = eng ]; then
      run_eng "${fields[0]}" "${fields[1]}" "${fields[2]}" "${fields[3]}" "${fields[4]:-1}" "${fields[5]:-}" && return 0
    else
      "run_$kind" "${fields[@]}" && return 0
    fi
    port_base=$((port_base + 100 > 32600 ? 26000 : port_base + 100))
    echo "compare: $name failed (try $try); again on ports from $port_base" >&2
  done
  echo "compare: $name failed three times" >&2
  exit 1
}

date=$(date -u +%Y-%m-%dT%H:%MZ)
{
  echo "set:     $set_name"
  echo "machine: $(machine_line)"
  echo "date:    $date"
  echo "tpx:     $("$build/tpx-bench" --version 2>/dev/null | head -n 1), commit $(git -C "$here" rev-parse --short HEAD 2>/dev/null || echo '?')"
  [ "$iperf" != none ] && echo "iperf3:  $("$iperf" --version | head -n 1)"
  echo "setup:   $rounds rounds; 64 MiB x $it64, 256 MiB x $it256 per run; GPU cases: $([ "$gpu" = 1 ] && echo "yes (client GPU ${cgpu:-0}, server GPU ${sgpu:-0})" || echo no); CPUs this run may use: $(nproc)$([ -n "$ccpus$scpus" ] && echo "; client CPUs ${ccpus:-all}, server CPUs ${scpus:-all}")$([ "$cold" = 1 ] && echo "; cold cases: --regions $regions")$([ "$mps" = 1 ] && echo "; CUDA MPS on")$([ -n "$old" ] && echo "; old build $old, new build $build")"
  echo "checks:  $([ "$chkmode" = every ] && echo "every engine run timed with --check" || echo "timed runs without --check; each GPU case verified once (--check, 3 transfers, round 1)")"
  env | grep -E '^TPX_' | grep -v -E '^TPX_(SOCKET_IFNAME|LOG)=' | sed 's/^/env:     /' || true
} | tee "$tmp/machine.txt"
: >"$tmp/results.txt"
: >"$tmp/verified.txt"
printf '%s\n' "${ratios[@]}" >"$tmp/ratios.txt"
k=${#cases[@]}
for r in $(seq 1 "$rounds"); do
  for j in $(seq 0 $((k - 1))); do
    c=${cases[$(((j + r - 1) % k))]}
    tb="$build/tpx-bench" nb="$build/tpx-netbench"
    case ${c%%|*} in *" [old]") tb="$old/tpx-bench" nb="$old/tpx-netbench" ;; esac
    measure "$c"
    echo "${c%%|*}|$val|$cpu" >>"$tmp/results.txt"
    printf 'round %d: %-34s %8s   CPU s/GB client/server %s\n' "$r" "${c%%|*}" "$val" "$cpu"
  done
done
[ -s "$tmp/verified.txt" ] && { echo; cat "$tmp/verified.txt"; }
summarize "$tmp/results.txt" "$tmp/ratios.txt"
[ -n "$keep" ] && echo "logs and results.txt(.csv) in $keep"
exit 0
