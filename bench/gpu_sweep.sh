#!/bin/bash
# Bandwidth by size with GPU memory: GPU memory through the engine,
# GPU0 -> GPU1 in two processes over loopback (one GPU: both ends on GPU 0),
# every byte of every iteration checked:
#   engine   tpx-bench -b 4K -e 256M -f 2 --op write,read,send --mem cuda --check
#   kv       tpx-bench --block-size 4K..1M x --batch 1,16,64,256,1000 --mem cuda --check (write)
#   nccl     NCCL send/recv over its Socket transport at 64 / 256 MiB, 4 threads x
#            4 sockets (bench/nccl_with_tpx.py; needs two GPUs and PyTorch)
# then bench/plot.py (when matplotlib is there; else copy the folder and plot elsewhere).
# usage: bench/gpu_sweep.sh [BUILD_DIR] [OUT_DIR]    env: ITERS (10) KV_MAX (1M) MAX (256M)
#   MEM=host: the same runs on host memory (a dry run of this script on any machine)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
build=${1:-build}
out=${2:-$root/out/gpu-sweep-$(date -u +%Y%m%d-%H%M%S)}
iters=${ITERS:-10} kvmax=${KV_MAX:-1M} max=${MAX:-256M} mem=${MEM:-cuda}
tb=$build/tpx-bench
[ -x "$tb" ] || { echo "gpu_sweep: $tb not built" >&2; exit 2; }
mkdir -p "$out"
export TPX_SOCKET_IFNAME=lo TPX_LOG=${TPX_LOG:-warn}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "$ngpu" -ge 1 ] || [ "$mem" = host ] || { echo "gpu_sweep: no GPU" >&2; exit 2; }
sgpu=$((ngpu > 1 ? 1 : 0))
{
  echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host:    $(uname -n) $(uname -r), $(nproc) cpus, GPUs: $(nvidia-smi --query-gpu=name --format=csv,noheader 2>/dev/null | sort | uniq -c | tr -s ' ' | tr '\n' ';')"
  echo "commit:  $(git -C "$root" log -1 --format='%h %s' 2>/dev/null | cut -c1-72)"
  echo "pair:    client GPU 0 -> server GPU $sgpu, two processes, loopback, $mem memory both sides, --check"
} | tee "$out/machine.txt"

port=$((24000 + RANDOM % 2000))
"$tb" server --forever --host 127.0.0.1 --port $port --gpu $sgpu --mem "$mem" >"$out/server.log" 2>&1 &
spid=$!
trap 'kill $spid 2>/dev/null || true' EXIT
sleep 1
fail=0
"$tb" client 127.0.0.1 --port $port --gpu 0 --mem "$mem" -b 4K -e "$max" -f 2 --op write,read,send --iters "$iters" \
  --warmup 2 --check --progress off --json "$out/engine.json" | tee "$out/engine.log" | grep -v '^\[CPU' || fail=1
"$tb" client 127.0.0.1 --port $port --gpu 0 --mem "$mem" -b 4K -e "$kvmax" -f 4 --batch 1,16,64,256,1000 --op write \
  --iters "$iters" --warmup 2 --check --progress off --json "$out/kv.json" | tee "$out/kv.log" | grep -v '^\[CPU' || fail=1
kill -TERM $spid
wait $spid || fail=1
python3 "$root/tests/tools/check_bench_json.py" "$out/engine.json" --ops write,read,send --clean || fail=1
python3 "$root/tests/tools/check_bench_json.py" "$out/kv.json" --clean || fail=1
if [ "$ngpu" -ge 2 ] && [ "$mem" = cuda ] && python3 -c 'import torch' 2>/dev/null; then
  PYTHONUNBUFFERED=1 timeout 600 python3 "$root/bench/nccl_with_tpx.py" --transport socket-4x4 --iters "$iters" \
    >"$out/nccl-socket-4x4.log" 2>&1 && sed -n 's/^RESULT //p' "$out/nccl-socket-4x4.log" >"$out/nccl-socket-4x4.json" ||
    echo "NCCL Socket run failed (see $out/nccl-socket-4x4.log)"
fi
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then /usr/bin/python3 "$root/bench/plot.py" "$out"; fi
echo "results in $out (exit $fail)"
exit $fail
