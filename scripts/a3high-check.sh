#!/usr/bin/env bash
# The A3-high first-run checks of docs/A3HIGH.md, on one node of a pair:
# environment and plugin (tpx-info, RxDM sockets), conformance (protocol-only
# cases, two-process), tpx-bench per GPU pair (GPU memory, write/read/send,
# every byte checked), the full mesh (all GPU pairs at once), optionally the
# progress policies side by side. ethtool -S rx_devmem_pkts is recorded on
# every data NIC before and after each step and the deltas printed: they must
# rise, or devmem TCP was not used.
#
# usage: scripts/a3high-check.sh --role server|client [--peer ADDR] [options]
#   --role R      server on node A (first), client on node B (drives)
#   --peer ADDR   client: node A's control (eth0) address
#   --build DIR   tcpx-p2p CUDA build (default ./build)
#   --out DIR     results (default ./a3high-<role>-<date>)
#   --gpus "0 1 ..."  GPU indices (default: all nvidia-smi lists)
#   --steps "env conformance pergpu mesh spin"  (default: env conformance pergpu mesh)
#   --size SIZE   bytes per transfer (default 256M)
# Both nodes must be given the same --gpus/--steps/--size. Variables from
# docs/A3HIGH.md are set when unset (printed into OUT/env.txt).
set -u -o pipefail

role="" peer="" build=build out="" gpus="" size=256M
steps="env conformance pergpu mesh"
while [ $# -gt 0 ]; do
  case "$1" in
  --role) role=$2; shift 2 ;;
  --peer) peer=$2; shift 2 ;;
  --build) build=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  --gpus) gpus=$2; shift 2 ;;
  --steps) steps=$2; shift 2 ;;
  --size) size=$2; shift 2 ;;
  -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
  *) echo "a3high-check: unknown argument $1" >&2; exit 2 ;;
  esac
done
case "$role" in server | client) ;; *) echo "a3high-check: --role server|client" >&2; exit 2 ;; esac
if [ "$role" = client ] && [ -z "$peer" ]; then echo "a3high-check: the client needs --peer" >&2; exit 2; fi
out=${out:-./a3high-$role-$(date -u +%Y%m%dT%H%M%SZ)}
mkdir -p "$out"
bench=$build/tpx-bench info=$build/tpx-info conf=$build/tests/conformance/tpx-conformance
for b in "$bench" "$info" "$conf"; do [ -x "$b" ] || { echo "a3high-check: $b missing: build first" >&2; exit 2; }; done
[ -n "$gpus" ] || gpus=$(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null | tr '\n' ' ')
[ -n "$gpus" ] || { echo "a3high-check: no GPU found (nvidia-smi)" >&2; exit 2; }

# ---- environment (docs/A3HIGH.md, "The environment"); only what is unset ----
: "${TPX_NET_PLUGIN:=tcpx}"
: "${NCCL_GPUDIRECTTCPX_SOCKET_IFNAME:=eth1,eth2,eth3,eth4}"
: "${NCCL_GPUDIRECTTCPX_CTRL_DEV:=eth0}"
: "${NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX:=/run/tcpx}"
: "${NCCL_GPUDIRECTTCPX_TX_BINDINGS:=eth1:8-21,112-125;eth2:8-21,112-125;eth3:60-73,164-177;eth4:60-73,164-177}"
: "${NCCL_GPUDIRECTTCPX_RX_BINDINGS:=eth1:22-35,126-139;eth2:22-35,126-139;eth3:74-87,178-191;eth4:74-87,178-191}"
: "${NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS:=50000}"
: "${TPX_CHUNK_BYTES:=524288}"
: "${TPX_LOG:=info}"
: "${NCCL_DEBUG:=INFO}"
: "${NCCL_DEBUG_SUBSYS:=INIT,NET,ENV}"
export TPX_NET_PLUGIN NCCL_GPUDIRECTTCPX_SOCKET_IFNAME NCCL_GPUDIRECTTCPX_CTRL_DEV \
  NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX NCCL_GPUDIRECTTCPX_TX_BINDINGS NCCL_GPUDIRECTTCPX_RX_BINDINGS \
  NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS TPX_CHUNK_BYTES TPX_LOG NCCL_DEBUG NCCL_DEBUG_SUBSYS
export LD_LIBRARY_PATH=/usr/local/tcpx/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
IFS=, read -r -a nics <<<"$NCCL_GPUDIRECTTCPX_SOCKET_IFNAME"
summary=$out/summary.txt
: >"$summary"
note() { echo "$*" | tee -a "$summary"; }
failed=0

# ---- rx_devmem_pkts per data NIC ----
devmem() { # -> "eth1=N eth2=N ..."
  local n v line=""
  for n in "${nics[@]}"; do
    v=$(ethtool -S "$n" 2>/dev/null | awk '/rx_devmem_pkts/ {s += $2} END {print s + 0}')
    line="$line $n=$v"
  done
  echo "$line"
}
delta() { # before after -> deltas, and 0 if every NIC rose
  local b a i rc=0 d=""
  read -r -a b <<<"$1"
  read -r -a a <<<"$2"
  for i in "${!a[@]}"; do
    local n=${a[$i]%%=*} x=${a[$i]#*=} y=${b[$i]#*=}
    d="$d $n+$((x - y))"
    [ $((x - y)) -gt 0 ] || rc=1
  done
  echo "$d"
  return $rc
}
snap() { # step when: ethtool -S of eth0 and the data NICs
  local n
  for n in eth0 "${nics[@]}"; do
    { echo "== $n"; ethtool -S "$n" 2>&1; } >>"$out/$1.ethtool-$2.txt"
  done
}

# run_step NAME DATA CMD...: logged, devmem deltas noted when DATA is 1.
# Every program below runs under `tmo` (a bounded time).
run_step() {
  local name=$1 data=$2
  shift 2
  local before after rc
  before=$(devmem)
  snap "$name" before
  echo "$*" >"$out/$name.cmd"
  "$@" >"$out/$name.log" 2>&1
  rc=$?
  after=$(devmem)
  snap "$name" after
  if [ $rc -eq 0 ]; then note "PASS  $name"; else note "FAIL  $name (exit $rc; $out/$name.log)"; failed=1; fi
  if [ "$data" = 1 ]; then
    local d
    if d=$(delta "$before" "$after"); then
      note "      rx_devmem_pkts:$d"
    else
      note "      rx_devmem_pkts:$d  <- not rising on every NIC: devmem not used (docs/A3HIGH.md)"
      failed=1
    fi
  fi
  return $rc
}

tmo() { timeout --kill-after=10 600 "$@"; }

# Client side: retry while node A's server is not up yet (bounded).
retry() {
  local i
  for i in 1 2 3 4 5 6 7 8 9 10; do
    "$@" && return 0
    sleep 3
  done
  return 1
}

{
  date -u
  uname -a
  nvidia-smi topo -m 2>&1
  ip -br addr 2>&1
  ls -l "$NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX" 2>&1
  env | grep -E '^(TPX_|NCCL_|LD_LIBRARY_PATH)' | sort
} >"$out/env.txt"

step_env() {
  run_step env 0 tmo "$info"
  grep -q 'device offload UNPACK v7' "$out/env.log" || { note "      the plugin is not loaded as UNPACK v7 (see env.log)"; failed=1; }
  grep -q '^WARNING' "$out/env.log" && note "      tpx-info warnings: $(grep -c '^WARNING' "$out/env.log") (see env.log)"
  local pci n=0 missing=0
  for pci in $(nvidia-smi --query-gpu=pci.bus_id --format=csv,noheader 2>/dev/null); do
    n=$((n + 1))
    local id f found=0
    id=${pci: -7} # bus:device.function; nvidia-smi pads the domain to 8 digits
    id=${id,,}
    for f in "$NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX"/get_gpu_fd_*; do
      case "${f,,}" in *"$id"*) found=1 ;; esac
    done
    [ $found = 1 ] || missing=$((missing + 1))
  done
  if [ $missing -gt 0 ]; then
    note "      RxDM: $missing of $n GPUs have no get_gpu_fd_<pci> socket in $NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX"
    failed=1
  fi
  [ -S "$NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX/rx_rule_manager" ] ||
    { note "      RxDM: no rx_rule_manager socket in $NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX"; failed=1; }
}

step_conformance() {
  local c
  for c in t_properties t_regmr_cuda t_close_idle; do
    if [ "$role" = server ]; then
      run_step "conf-$c" 0 tmo "$conf" --plugin tcpx --role server --peer 0.0.0.0:5555 --dev 0 --filter "$c"
    else
      run_step "conf-$c" 0 retry tmo "$conf" --plugin tcpx --role client --peer "$peer:5555" --dev 0 --filter "$c"
    fi
  done
}

pair() { # gpu op
  local g=$1 op=$2
  if [ "$role" = server ]; then
    tmo "$bench" server --gpu "$g" --mem cuda
  else
    retry tmo "$bench" client "$peer" --port $((20000 + g)) --gpu "$g" --mem cuda --size "$size" --op "$op" --iters 20
  fi
}

step_pergpu() {
  local g op
  for g in $gpus; do
    for op in write read send; do run_step "gpu$g-$op" 1 pair "$g" "$op"; done
  done
}

mesh() {
  local g pids=() rc=0
  for g in $gpus; do
    pair "$g" write >"$out/mesh-gpu$g.log" 2>&1 &
    pids+=($!)
  done
  for g in "${pids[@]}"; do wait "$g" || rc=1; done
  return $rc
}
step_mesh() { run_step mesh 1 mesh; }

step_spin() {
  local s g
  g=${gpus%% *}
  for s in 0 200 1000; do
    export TPX_PROGRESS_SPIN_US=$s
    run_step "spin$s" 1 pair "$g" write
  done
  unset TPX_PROGRESS_SPIN_US
  [ "$role" = client ] && grep -h 'BW:\|\[CPU\]' "$out"/spin*.log >>"$summary"
}

for s in $steps; do "step_$s" || true; done
grep -h '\[PERF\] Avg\|\[CHECK\]' "$out"/gpu*.log "$out"/mesh*.log 2>/dev/null | sort | uniq -c >>"$summary" || true
echo "=== summary ($out)"
cat "$summary"
exit $failed
