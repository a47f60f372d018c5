#!/usr/bin/env bash
# Google's real GPUDirect-TCPX plugin on a GPU machine, with the RxDM and
# devmem TCP stand-ins (tests/fakes) over the machine's own CUDA driver: the
# RxDM stand-in's receive buffers are real GPU memory, one per GPU, and the
# devmem stand-in writes received bytes into them and reads sends from GPU
# memory (docs/A3HIGH.md, "The real plugin on a GPU machine"). Run by
# tests/gpu/run.sh, step tcpxreal:
#
#   gpu_real_plugin.sh BUILD_DIR PLUGIN_SO [CASE...]   (or TPX_REAL_CASES="CASE...")
#
# Cases (all by default; each a line PASS/FAIL NAME in the output):
#   info conf_host conf_gpu cuda host host_recv gpu01 kv rules_refused
#   buffer_full peer_killed last_send gpus01
# Every transfer is checked byte for byte (--check); every failure must come
# within its TPX_TIMEOUT_MS. Exit status: the number of failed cases (0: all
# passed). Needs 2 GPUs for gpu01, gpus01 (skipped, saying so, with one).
set -u -o pipefail
self=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)/$(basename "${BASH_SOURCE[0]}")
mode=cases
case ${1:-} in --pair | --peer-killed) mode=$1; shift ;; esac
build=$1 plugin=$2
build=$(cd "$build" && pwd)
shift 2
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cases=${*:-${TPX_REAL_CASES:-info conf_host conf_gpu cuda host host_recv gpu01 kv rules_refused buffer_full peer_killed last_send gpus01}}
# TPX_FAKE_CUDA_DIR: the CUDA test doubles instead (a dry run of this script
# on a machine without a GPU; set TPX_UNPACK=d2d there too).
real=("$root/tests/tcpx/with_real_plugin.sh" "$root" "${TPX_FAKE_CUDA_DIR:--}" "$build/tests/fakes/tpx-rxdm-standin" --)
preload=$build/tests/fakes/devmem/libtpx-devmem-standin.so
bench=$build/tpx-bench
conf=$build/tests/conformance/tpx-conformance
export TPX_TCPX_REAL_PLUGIN=$plugin TPX_SOCKET_IFNAME=lo TPX_LOG=${TPX_LOG:-warn}
# RxDM's own receive buffer per GPU (4 GiB: RX_POOL_SIZE, its
# include/gpu_page_exporter_interface.h); the stand-in's default is 64 MiB.
export TPX_RXDM_ARGS=${TPX_RXDM_ARGS:---pool-bytes 4294967296}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ngpus=$(nvidia-smi -L 2>/dev/null | wc -l)
failed=0
tmp=$(mktemp -d /tmp/tpx-gpu-real-XXXXXX)
[ -n "${TPX_REAL_KEEP:-}" ] || trap 'rm -rf "$tmp"' EXIT

result() { # NAME RC SECONDS [WHY]
  if [ "$2" = 0 ]; then echo "PASS  tcpx-real $1 ($3 s)"; else echo "FAIL  tcpx-real $1 (exit $2, $3 s) ${4:-}"; failed=$((failed + 1)); fi
}

# one NAME CMD...: a case whose command must exit 0 (and, with need_check=1,
# say "[CHECK] ...: ok": tpx-bench checked the bytes).
need_check=0
one() {
  local name=$1 t0=$SECONDS rc=0
  shift
  echo "=== tcpx-real $name: $*"
  "$@" >"$tmp/$name.log" 2>&1 || rc=$?
  grep -v '^  \(flow\|create\|delete\|fd\|metadata\|queues\|register\) ' "$tmp/$name.log" | tail -n 40
  if [ $rc = 0 ] && [ $need_check = 1 ] && ! grep -q '^\[CHECK\] .*: ok' "$tmp/$name.log"; then rc=99; fi
  if [ $rc = 0 ] && grep -q '^\[CHECK\] .*MISMATCH' "$tmp/$name.log"; then rc=98; fi
  result "$name" $rc $((SECONDS - t0))
}

# fails NAME SAYS LIMIT_S CMD...: a case whose command must fail, saying SAYS,
# within LIMIT_S seconds.
fails() {
  local name=$1 says=$2 limit=$3 t0=$SECONDS rc=0
  shift 3
  echo "=== tcpx-real $name (must fail within $limit s, saying '$says'): $*"
  "$@" >"$tmp/$name.log" 2>&1 || rc=$?
  local dt=$((SECONDS - t0))
  grep -v '^  \(flow\|create\|delete\|fd\|metadata\|queues\|register\) ' "$tmp/$name.log" | tail -n 25
  if [ $rc = 0 ]; then result "$name" 97 $dt "it succeeded"
  elif ! grep -q -- "$says" "$tmp/$name.log"; then result "$name" 96 $dt "without saying '$says'"
  elif [ $dt -gt "$limit" ]; then result "$name" 95 $dt "later than $limit s"
  else result "$name" 0 $dt; fi
}

# Two processes: a tpx-bench server and client (with_real_plugin.sh around
# both, one RxDM stand-in). pair SERVER_ARGS -- CLIENT_ARGS
pair() {
  local sargs=() port=$((25000 + RANDOM % 3000))
  while [ "$1" != -- ]; do sargs+=("$1"); shift; done
  shift
  LD_PRELOAD=$preload timeout 300 "$bench" server --port $port --host 127.0.0.1 "${sargs[@]}" >"$tmp/server.log" 2>&1 &
  local spid=$! rc=0
  sleep 1
  LD_PRELOAD=$preload timeout 300 "$bench" client 127.0.0.1 --port $port "$@" --check --progress off || rc=$?
  local src=0
  wait $spid || src=$?
  [ $rc = 0 ] && rc=$src
  echo "--- server:"
  cat "$tmp/server.log"
  return $rc
}

# The client killed mid-transfer: the server must fail, saying why, within
# TPX_TIMEOUT_MS (5 s) and a margin of 5 s. 0 when it did.
peer_killed() {
  local port=$((28000 + RANDOM % 2000))
  LD_PRELOAD=$preload TPX_TIMEOUT_MS=5000 timeout 120 "$bench" server --port $port --host 127.0.0.1 --gpu "$1" \
    --mem cuda >"$tmp/killed-server.log" 2>&1 &
  local spid=$!
  sleep 1
  # No `timeout` wrapper here: the SIGKILL below must reach tpx-bench itself
  # (killing a wrapper leaves the client running on); it is the bound.
  LD_PRELOAD=$preload TPX_TIMEOUT_MS=5000 "$bench" client 127.0.0.1 --port $port --gpu 0 --mem cuda \
    --size 256M --iters 1000 --warmup 0 --op write --progress off >"$tmp/killed-client.log" 2>&1 &
  local cpid=$!
  sleep 6
  kill -KILL $cpid
  local t0=$SECONDS rc=0
  wait $spid || rc=$?
  local dt=$((SECONDS - t0))
  echo "server exit status $rc, $dt s after the client was killed; its output:"
  cat "$tmp/killed-server.log"
  [ $rc != 0 ] && [ $rc != 124 ] && [ $dt -le 10 ] && grep -q 'tpx-bench: server' "$tmp/killed-server.log"
}
# The two-process cases run inside with_real_plugin.sh (one RxDM stand-in
# for both processes) as this script again: --pair, --peer-killed.
case $mode in
--pair) pair "$@"; exit ;;
--peer-killed) peer_killed "$@"; exit ;;
esac

other=0
[ "$ngpus" -ge 2 ] && other=1
echo "tcpx-real: plugin $plugin, $ngpus GPU(s), build $build"
for c in $cases; do
  need_check=0
  case $c in host | cuda | kv | gpu01 | gpus01 | last_send) need_check=1 ;; esac
  case $c in
  # The plugin as our loader sees it: its name and version.
  info) one info env TPX_RXDM_EXPECT_RULES=0 "${real[@]}" env TPX_LOG=debug "$build/tpx-info"
    grep 'ver\. ' "$tmp/info.log" ;;
  # The ncclNet contract, host memory (plain recv on lo), then GPU memory:
  # the devmem stand-in preloaded, CUDA regMr through the real driver's
  # dma-buf (or the stand-in's placeholder).
  conf_host) one conf_host "${real[@]}" "$conf" --quirks 1 --max-bytes 16M --host-bytes \
    --skip 't_truncation_*,t_regmr_cuda' ;;
  conf_gpu) one conf_gpu "${real[@]}" env LD_PRELOAD="$preload" "$conf" --quirks 1 --max-bytes 16M --host-bytes \
    --skip 't_truncation_*' ;;
  # The engine, 4 KiB .. 256 MiB, GPU memory on the UNPACK path (the unpack
  # kernels read the plugin's metadata), one process; then host memory as
  # the sender's (two processes: its writes and sends land in the peer's
  # GPU memory). A receive into host memory is refused (host_recv).
  cuda) one cuda "${real[@]}" env LD_PRELOAD="$preload" "$bench" loopback --mem cuda -b 4K -e 256M -f 4 \
    --op write,read,send --iters 3 --warmup 1 --check --progress off ;;
  host) one host "${real[@]}" "$self" --pair "$build" "$plugin" --gpu $other --mem cuda -- --gpu 0 --mem host \
    -b 4K -e 256M -f 4 --op write,send --iters 3 --warmup 1 ;;
  # The bounce pages are GPU memory the CPU cannot read: the engine refuses
  # a host receive buffer above TPX_INLINE_BYTES at once (docs/UNPACK.md).
  host_recv) fails host_recv "cannot be filled from bounce pages in GPU memory" 20 env TPX_RXDM_EXPECT_RULES=0 \
    "${real[@]}" env LD_PRELOAD="$preload" "$bench" loopback --mem host --size 1M --op write --iters 2 --warmup 0 \
    --check --progress off ;;
  kv) one kv "${real[@]}" env LD_PRELOAD="$preload" "$bench" loopback --mem cuda --block-size 64K --batch 1000 \
    --op write,read --iters 3 --warmup 1 --check --progress off ;;
  # GPU 0 -> GPU 1, two processes; then each process driving both GPUs.
  gpu01)
    if [ $other = 1 ]; then
      one gpu01 "${real[@]}" "$self" --pair "$build" "$plugin" --gpu 1 --mem cuda -- --gpu 0 --mem cuda -b 4K -e 256M -f 4 --op write,read,send --iters 3 --warmup 1
    else echo "SKIP  tcpx-real gpu01 (one GPU)"; fi ;;
  gpus01)
    if [ $other = 1 ]; then
      one gpus01 "${real[@]}" "$self" --pair "$build" "$plugin" --gpus 1,0 --mem cuda -- --gpus 0,1 --mem cuda --size 64M --op write,read,send --iters 4 --warmup 1
    else echo "SKIP  tcpx-real gpus01 (one GPU)"; fi ;;
  # Faults. Every rule refused: accept or connect fails at once, named.
  rules_refused) fails rules_refused "on net device 0 failed" 30 env TPX_RXDM_EXPECT_RULES=0 \
    TPX_RXDM_ARGS="--max-rules 0" "${real[@]}" env LD_PRELOAD="$preload" "$bench" loopback --mem cuda --size 1M --op write --iters 2 \
    --warmup 0 --check --progress off ;;
  # A 2 MiB receive buffer under 4 MiB chunks: a chunk's receive holds its
  # pages until all of it is there, so it never completes: TPX_TIMEOUT_MS.
  # (Smaller chunks, the default on machines with 4 CPUs or more, go
  # through: their pages come back after each chunk's unpack.)
  buffer_full) fails buffer_full "not done after 3000 ms" 40 env TPX_RXDM_EXPECT_RULES=0 \
    TPX_RXDM_ARGS="--pool-bytes 2097152" "${real[@]}" env TPX_TIMEOUT_MS=3000 TPX_CHUNK_BYTES=4194304 LD_PRELOAD="$preload" "$bench" loopback --mem cuda \
    --size 16M --op write --iters 2 --warmup 0 --check --progress off ;;
  peer_killed) one peer_killed env TPX_RXDM_EXPECT_RULES=0 "${real[@]}" "$self" --peer-killed "$build" "$plugin" $other ;;
  # The peer closing right after its last send (the seeds' rc=2 case): one
  # 4 KiB send, then the client exits; the server's receive must complete.
  last_send) one last_send "${real[@]}" "$self" --pair "$build" "$plugin" --gpu $other --mem cuda -- --gpu 0 --mem cuda \
    --size 4K --op send --iters 1 --warmup 0 ;;
  *) echo "gpu_real_plugin: unknown case $c" >&2; failed=$((failed + 1)) ;;
  esac
done
exit $failed
