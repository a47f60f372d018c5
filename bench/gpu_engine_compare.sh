#!/bin/bash
# GPU0 -> GPU1 between two processes over loopback through the engine
# (tpx-bench server on GPU 1, client on GPU 0, GPU memory on both sides),
# with host staging (default transport) and with the built-in transport's
# unpack mode (TPX_SOCK_UNPACK=1), at 64 MiB and 256 MiB, next to NCCL
# send/recv on its Socket transport (defaults and 4 threads x 4 sockets,
# bench/nccl_with_tpx.py, P2P/SHM off) in the same run. Every engine run
# checks the received bytes ("[CHECK] server: ok"); a run without that line
# counts as failed. CLIENT_GPU / SERVER_GPU (default 0 / 1) pick the GPUs:
# CLIENT_GPU=0 SERVER_GPU=0 --no-nccl runs both processes on one GPU.
#
#   bench/gpu_engine_compare.sh [--build DIR] [--out DIR] [--set final|sweep|sockets|quick|host]
#                               [--no-nccl] [--iters N]
#
# --set final (default): the configurations docs/BENCHMARKS.md reports;
# sweep: more channel / thread / chunk variants; sockets: automatic data
# sockets per channel vs explicit TPX_NSOCKS; quick: two short runs;
# host: host memory only (checks the script on a machine without GPUs).
# Results: DIR/summary.txt (table, GB/s = 1e9 B/s per GPU, and ratios to
# NCCL), DIR/results.csv, one log per run. Exit 0 only if every run passed.
set -u -o pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
build=$root/build
out=""
set_name=final
nccl=1
iters=20
while [ $# -gt 0 ]; do
  case "$1" in
  --build) build=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  --set) set_name=$2; shift 2 ;;
  --no-nccl) nccl=0; shift ;;
  --iters) iters=$2; shift 2 ;;
  -h | --help) sed -n '2,20p' "$0"; exit 0 ;;
  *) echo "gpu_engine_compare: unknown argument $1" >&2; exit 2 ;;
  esac
done
bench=$build/tpx-bench
[ -x "$bench" ] || { echo "gpu_engine_compare: $bench not built" >&2; exit 2; }
out=${out:-$root/out/gpu_engine_compare-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"
export TPX_SOCKET_IFNAME=lo TPX_LOG=${TPX_LOG:-warn}
# Never let NCCL or anything else use NVLink multicast on shared machines.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1

# name | environment | memory (cuda, host, or client:server such as cuda:host)
# The server (receiver of writes) is on GPU $SERVER_GPU, the client on GPU $CLIENT_GPU.
CLIENT_GPU=${CLIENT_GPU:-0} SERVER_GPU=${SERVER_GPU:-1}
case $set_name in
final)
  configs=(
    "host-8ch-16thr|TPX_NUM_CHANNELS=8 TPX_NTHREADS=16|host"
    "staging-defaults|-|cuda"
    "staging-8ch-16thr|TPX_NUM_CHANNELS=8 TPX_NTHREADS=16|cuda"
    "staging-8ch-16thr-ce|TPX_NUM_CHANNELS=8 TPX_NTHREADS=16 TPX_UNPACK=d2d|cuda"
    "stage-send-only|TPX_NUM_CHANNELS=8 TPX_NTHREADS=16|cuda:host"
    "stage-recv-only|TPX_NUM_CHANNELS=8 TPX_NTHREADS=16|host:cuda"
    "unpack-defaults|TPX_SOCK_UNPACK=1|cuda"
    "unpack-8ch-16thr|TPX_SOCK_UNPACK=1 TPX_NUM_CHANNELS=8 TPX_NTHREADS=16|cuda"
  ) ;;
sweep)
  configs=(
    "host-4ch|TPX_NUM_CHANNELS=4|host"
    "host-8ch|TPX_NUM_CHANNELS=8|host"
    "staging-4ch|TPX_NUM_CHANNELS=4|cuda"
    "staging-8ch|TPX_NUM_CHANNELS=8|cuda"
    "staging-8ch-16thr|TPX_NUM_CHANNELS=8 TPX_NTHREADS=16|cuda"
    "staging-8ch-1M|TPX_NUM_CHANNELS=8 TPX_CHUNK_BYTES=1M|cuda"
    "staging-16ch-16thr|TPX_NUM_CHANNELS=16 TPX_NTHREADS=16|cuda"
    "staging-8ch-8s-16thr|TPX_NUM_CHANNELS=8 TPX_NSOCKS=8 TPX_NTHREADS=16|cuda"
    "unpack-8ch|TPX_SOCK_UNPACK=1 TPX_NUM_CHANNELS=8|cuda"
    "unpack-8ch-16thr|TPX_SOCK_UNPACK=1 TPX_NUM_CHANNELS=8 TPX_NTHREADS=16|cuda"
    "unpack-16ch-16thr|TPX_SOCK_UNPACK=1 TPX_NUM_CHANNELS=16 TPX_NTHREADS=16|cuda"
  ) ;;
sockets) # data sockets per channel: automatic (defaults) vs explicit TPX_NSOCKS
  configs=(
    "host-defaults|-|host"
    "host-nsocks4|TPX_NSOCKS=4|host"
    "staging-defaults|-|cuda"
    "staging-nsocks2|TPX_NSOCKS=2|cuda"
    "staging-nsocks4|TPX_NSOCKS=4|cuda"
    "unpack-defaults|TPX_SOCK_UNPACK=1|cuda"
    "unpack-nsocks4|TPX_SOCK_UNPACK=1 TPX_NSOCKS=4|cuda"
  ) ;;
host) # no GPU needed: the script's own check on any machine
  configs=(
    "host-4ch|TPX_NUM_CHANNELS=4|host"
    "host-unpack-4ch|TPX_SOCK_UNPACK=1 TPX_NUM_CHANNELS=4|host"
  ) ;;
quick)
  configs=(
    "staging-8ch|TPX_NUM_CHANNELS=8|cuda"
    "unpack-8ch|TPX_SOCK_UNPACK=1 TPX_NUM_CHANNELS=8|cuda"
  )
  iters=5 ;;
*) echo "gpu_engine_compare: unknown set $set_name" >&2; exit 2 ;;
esac

{
  echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host:    $(uname -n) $(uname -r), $(nproc) cores"
  echo "gpus:    $(nvidia-smi --query-gpu=index,name,pci.bus_id --format=csv,noheader 2>/dev/null | tr '\n' ';')"
  echo "commit:  $(git -C "$root" log -1 --format='%h %s' 2>/dev/null | cut -c1-80)"
  echo "set:     $set_name, write GPU$CLIENT_GPU -> GPU$SERVER_GPU (initiator done = target acknowledged), $iters iterations at 64 MiB"
} | tee "$out/machine.txt"

fail=0
port=$((24000 + RANDOM % 2000))
echo "config,size,op,gbps,check,client_cpu_s_per_gb,client_cores,server_cpu_s_per_gb,server_cores" >"$out/results.csv"

# run_one NAME ENV MEM SIZE ITERS WARMUP OP
run_one() {
  local name=$1 envs=$2 mem=$3 size=$4 it=$5 wu=$6 op=$7
  local cmem=${mem%%:*} smem=${mem##*:}
  [ "$envs" = - ] && envs=""
  local log=$out/$name-$size-$op.log slog=$out/$name-$size-$op.server.log
  port=$((port + 1))
  # shellcheck disable=SC2086
  env $envs timeout 120 "$bench" server --port $port --host 127.0.0.1 --gpu $SERVER_GPU --mem "$smem" >"$slog" 2>&1 &
  local spid=$!
  sleep 0.3
  local rc=0
  # shellcheck disable=SC2086
  env $envs timeout 120 "$bench" client 127.0.0.1 --port $port --gpu $CLIENT_GPU --mem "$cmem" --size "$size" \
    --iters "$it" --warmup "$wu" --op "$op" --check --progress off >"$log" 2>&1 || rc=$?
  wait $spid || rc=$((rc ? rc : 90))
  local bw check
  bw=$(sed -n 's/.*Avg (.*BW: \([0-9.]*\) GB\/s.*/\1/p' "$log" | tail -n 1)
  if grep -q '^\[CHECK\] .*: ok' "$slog" "$log"; then check=ok; else check=FAILED; fi
  if [ $rc -ne 0 ] || [ -z "$bw" ] || [ "$check" != ok ]; then
    echo "FAIL  $name $size $op (exit $rc, check $check); last lines:"
    tail -n 5 "$log" "$slog" | sed 's/^/    /'
    fail=1
    bw=""
  fi
  # [CPU] who: U s user + S s system per GB, C cores busy on average
  local cc ss
  cc=$(sed -n 's/^\[CPU\] client: \([0-9.]*\) s user + \([0-9.]*\) s system per GB, \([0-9.]*\) cores.*/\1 \2 \3/p' "$log")
  ss=$(sed -n 's/^\[CPU\] server: \([0-9.]*\) s user + \([0-9.]*\) s system per GB, \([0-9.]*\) cores.*/\1 \2 \3/p' "$slog")
  local cpu
  cpu=$(echo "$cc $ss" | awk 'NF==6 {printf "%.3f,%.2f,%.3f,%.2f", $1+$2, $3, $4+$5, $6} NF!=6 {printf ",,,"}')
  printf '%-22s %5s %-5s %8s GB/s  check %s  cpu s/GB,cores client/server %s\n' "$name" "$size" "$op" \
    "${bw:-failed}" "$check" "$cpu"
  echo "$name,$size,$op,${bw:-},$check,$cpu" >>"$out/results.csv"
}

for c in "${configs[@]}"; do
  IFS='|' read -r name envs mem <<<"$c"
  run_one "$name" "$envs" "$mem" 64M "$iters" 3 write
  run_one "$name" "$envs" "$mem" 256M $(((iters + 1) / 2)) 2 write
done
# two-sided, best-known staging and unpack configurations
if [ "$set_name" = final ] || [ "$set_name" = sweep ]; then
  run_one staging-8ch-16thr "TPX_NUM_CHANNELS=8 TPX_NTHREADS=16" cuda 64M "$iters" 3 send
  run_one unpack-8ch-16thr "TPX_SOCK_UNPACK=1 TPX_NUM_CHANNELS=8 TPX_NTHREADS=16" cuda 64M "$iters" 3 send
fi

if [ $nccl -eq 1 ]; then
  for t in socket socket-4x4; do
    log=$out/nccl-$t.log
    if PYTHONUNBUFFERED=1 timeout 300 python3 "$root/bench/nccl_with_tpx.py" --transport "$t" --iters "$iters" \
      --warmup 5 >"$log" 2>&1; then
      python3 - "$log" "$t" "$out/results.csv" <<'EOF'
import json, sys
log, t, csv = sys.argv[1:4]
r = None
for line in open(log):
    if line.startswith("RESULT "):
        r = json.loads(line[7:])
if r:
    with open(csv, "a") as f:
        for x in r["timed"]:
            size = {64 << 20: "64M", 256 << 20: "256M"}.get(x["bytes"], str(x["bytes"]))
            f.write(f"nccl-{t},{size},send,{x['gbps_per_gpu']:.2f},exact,,,,\n")
            print(f"{'nccl-' + t:<22} {size:>5} send  {x['gbps_per_gpu']:8.2f} GB/s  check exact")
EOF
    else
      echo "FAIL  NCCL $t (see $log)"
      tail -n 10 "$log" | sed 's/^/    /'
      fail=1
    fi
  done
fi

python3 - "$out/results.csv" "$CLIENT_GPU" "$SERVER_GPU" <<'EOF' | tee "$out/summary.txt"
import csv, sys
rows = list(csv.DictReader(open(sys.argv[1])))
val = {}
for r in rows:
    if r["gbps"] and (r["op"] == "write" or r["config"].startswith("nccl")):
        val[(r["config"], r["size"])] = float(r["gbps"])
names = []
for r in rows:
    if r["config"] not in names and (r["op"] == "write" or r["config"].startswith("nccl")):
        names.append(r["config"])
ref = {s: val.get(("nccl-socket-4x4", s)) for s in ("64M", "256M")}
ref0 = {s: val.get(("nccl-socket", s)) for s in ("64M", "256M")}
print(f"GPU{sys.argv[2]} -> GPU{sys.argv[3]}, two processes, loopback; GB/s = 1e9 B/s per GPU (one GPU pair: also total)")
print(f"{'configuration':<22} {'64 MiB':>8} {'256 MiB':>8}   {'x NCCL 4x4 (64M/256M)':>22}  {'x NCCL default':>15}")
for n in names:
    a, b = val.get((n, "64M")), val.get((n, "256M"))
    f = lambda v: f"{v:8.2f}" if v is not None else "       -"
    def ratio(v, r):
        return f"{v / r:.2f}" if v is not None and r else "-"
    print(f"{n:<22} {f(a)} {f(b)}   {ratio(a, ref['64M']) + ' / ' + ratio(b, ref['256M']):>22}"
          f"  {ratio(a, ref0['64M']) + ' / ' + ratio(b, ref0['256M']):>15}")
print("engine rows: one-sided write, complete when the target acknowledged (data in GPU 1 memory)")
print()
print("CPU per GB moved (user+system, all threads) and cores busy on average, 64 MiB writes:")
for r in rows:
    if r["op"] == "write" and r["size"] == "64M" and r["client_cpu_s_per_gb"]:
        print(f"  {r['config']:<22} sender {float(r['client_cpu_s_per_gb']):.3f} s/GB ({r['client_cores']} cores)"
              f"   receiver {float(r['server_cpu_s_per_gb']):.3f} s/GB ({r['server_cores']} cores, warm-up and waits included)")
for r in rows:
    if r["op"] == "send" and not r["config"].startswith("nccl"):
        v = float(r["gbps"]) if r["gbps"] else None
        rf = ref.get(r["size"])
        print(f"two-sided send/recv, {r['config']}, {r['size']}: " + (f"{v:.2f} GB/s" if v else "failed") +
              (f" ({v / rf:.2f}x NCCL 4x4)" if v and rf else ""))
EOF
exit $fail
