#!/bin/bash
# Bandwidth against message size on one machine, host memory over loopback,
# everything side by side in one run (docs/BENCHMARKS.md, issue 13):
#   engine   tpx-bench loopback -b MIN -e MAX -f 2 --op write,read,send (JSON)
#   raw      tpx-netbench (the transport alone, one comm, 1 message in flight)
#   iperf3   one TCP stream on 127.0.0.1 with MSG-byte writes (-l; at most
#            1 MiB, iperf3's limit), 2 s
#   kv       tpx-bench --block-size 4K..1M x --batch 1,16,64,256,1000 (write)
#   ratio    KV pattern vs contiguous, ROUNDS alternating rounds (medians):
#            1000 x 64 KiB and 256 x 16 KiB vectored writes vs one 64 MiB write
#            (and vs one write of the same bytes)
# then bench/plot.py draws the plots. A --check run of each op comes first.
#
# usage: bench/sweep_compare.sh [BUILD_DIR] [OUT_DIR]
#   env: MIN (4K) MAX (64M) ITERS (10) ROUNDS (5) KV_MAX (1M) IPERF_SECONDS (2)
set -euo pipefail
build=${1:-build}
out=${2:-out/sweep-$(date -u +%Y%m%d-%H%M%S)}
min=${MIN:-4K} max=${MAX:-64M} iters=${ITERS:-10} rounds=${ROUNDS:-5} kvmax=${KV_MAX:-1M}
secs=${IPERF_SECONDS:-2}
tb=$build/tpx-bench nb=$build/tpx-netbench
for t in "$tb" "$nb"; do [ -x "$t" ] || { echo "sweep_compare: $t not built" >&2; exit 2; }; done
command -v iperf3 >/dev/null || { echo "sweep_compare: iperf3 missing (scripts/deps.sh --test)" >&2; exit 2; }
mkdir -p "$out"
export TPX_SOCKET_IFNAME=lo TPX_LOG=${TPX_LOG:-error}

bytes() { # 4K -> 4096
  python3 -c "import sys; s=sys.argv[1]; m={'K':1<<10,'M':1<<20,'G':1<<30}; print(int(s[:-1])*m[s[-1]] if s[-1] in m else int(s))" "$1"
}
sizes=()
s=$(bytes "$min")
while [ "$s" -le "$(bytes "$max")" ]; do sizes+=("$s"); s=$((s * 2)); done

{
  echo "date:    $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host:    $(uname -n) $(uname -r), $(nproc) cpus, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | sed 's/^ //')"
  echo "load:    $(cut -d' ' -f1-3 /proc/loadavg) (1/5/15 min, at start)"
  echo "commit:  $(git log -1 --format='%h %s' 2>/dev/null | cut -c1-72)"
  echo "iperf3:  $(iperf3 --version | head -n 1)"
  echo "sizes:   ${sizes[0]} .. ${sizes[-1]} bytes, x2; $iters iterations per size (engine, raw); iperf3 $secs s per size"
} | tee "$out/machine.txt"

echo "== --check: every byte of every iteration, each op"
"$tb" loopback -b 4K -e "$max" -f 16 --op write,read,send --iters 3 --check --progress off \
  --json "$out/check.json" >"$out/check.log" 2>&1 || { echo "check run failed (see $out/check.log)"; exit 1; }
echo "ok"

echo "== engine: write, read, send"
"$tb" loopback -b "$min" -e "$max" -f 2 --op write,read,send --iters "$iters" --warmup 2 --progress off \
  --json "$out/engine.json" | tee "$out/engine.log" | grep -v '^\[' || true

echo "== raw transport (tpx-netbench, 1 in flight)"
echo "bytes,gbps" >"$out/raw.csv"
for s in "${sizes[@]}"; do
  "$nb" --size "$s" --iters "$iters" --warmup 2 --inflight 1 >"$out/raw-$s.log" 2>&1 || { echo "raw $s failed"; continue; }
  g=$(sed -n 's/^RESULT bw_.* recv_gbps=\([0-9.]*\).*/\1/p' "$out/raw-$s.log")
  echo "$s,$g" >>"$out/raw.csv"
  printf '  %10s  %s GB/s\n' "$s" "$g"
done

echo "== iperf3 (one stream, 127.0.0.1)"
port=$((25000 + RANDOM % 5000))
iperf3 -s -B 127.0.0.1 -p $port >"$out/iperf3-server.log" 2>&1 &
ipid=$!
trap 'kill $ipid 2>/dev/null || true' EXIT
sleep 0.5
echo "bytes,gbps" >"$out/iperf3.csv"
for s in "${sizes[@]}"; do
  l=$((s > 1048576 ? 1048576 : s)) # iperf3's largest write (-l); a stream either way
  iperf3 -c 127.0.0.1 -p $port -l "$l" -t "$secs" -J >"$out/iperf3-$s.json" 2>/dev/null || { echo "iperf3 $s failed"; continue; }
  g=$(python3 -c "import json,sys; print('%.3f' % (json.load(open(sys.argv[1]))['end']['sum_received']['bits_per_second'] / 8e9))" "$out/iperf3-$s.json")
  echo "$s,$g" >>"$out/iperf3.csv"
  printf '  %10s  %s GB/s\n' "$s" "$g"
done

echo "== KV-cache pattern sweep (write)"
"$tb" loopback -b 4K -e "$kvmax" -f 4 --batch 1,16,64,256,1000 --op write --iters "$iters" --warmup 2 --progress off \
  --json "$out/kv.json" | tee "$out/kv.log" | grep -v '^\[' || true

echo "== KV ratios, $rounds alternating rounds (GB/s; CPU s per GB of the whole process, both ends)"
# contiguous, contiguous cut into chunks of the block size, and the KV pattern:
# the engine makes every block its own chunk, so the middle one isolates what
# the blocks cost beyond their chunks
variants=("contig_64M|--size 64M" "contig_64M_chunk64K|--size 64M --chunk 64K" "kv_1000x64K|--block-size 64K --batch 1000"
  "contig_4M|--size 4M" "contig_4M_chunk16K|--size 4M --chunk 16K" "kv_256x16K|--block-size 16K --batch 256")
hdr="round"
for v in "${variants[@]}"; do hdr="$hdr,${v%%|*},${v%%|*}_cpu"; done
echo "$hdr" >"$out/ratio.csv"
for r in $(seq 1 "$rounds"); do
  row="$r"
  for v in "${variants[@]}"; do
    # shellcheck disable=SC2086
    "$tb" loopback ${v#*|} --iters "$iters" --warmup 2 --progress off >"$out/ratio.log" 2>&1 || { echo "failed: ${v#*|}"; exit 1; }
    g=$(sed -n 's/^\[PERF\] Avg .*BW: \([0-9.]*\) GB\/s.*/\1/p' "$out/ratio.log" | head -n 1)
    c=$(sed -n 's/^\[CPU\] client: \([0-9.]*\) s user + \([0-9.]*\) s system per GB.*/\1 \2/p' "$out/ratio.log" |
      awk '{ printf "%.3f", $1 + $2 }')
    row="$row,$g,$c"
  done
  echo "$row" | tee -a "$out/ratio.csv"
done
python3 - "$out/ratio.csv" <<'PY' | tee "$out/ratio.txt"
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1])))
med = {k: statistics.median(float(r[k]) for r in rows) for k in rows[0] if k != "round"}
names = [k for k in med if not k.endswith("_cpu")]
print(f"{'variant':<22} {'GB/s':>6} {'CPU s/GB':>9}   (medians of {len(rows)} rounds)")
for k in names:
    print(f"{k:<22} {med[k]:6.2f} {med[k + '_cpu']:9.3f}")
a = med["kv_1000x64K"] / med["contig_64M"]
b = med["kv_256x16K"] / med["contig_64M"]
print(f"1000 x 64 KiB vs one 64 MiB write: {a:.2f}x GB/s (target >= 0.8: {'met' if a >= 0.8 else 'MISSED'}),"
      f" {med['contig_64M_cpu'] / med['kv_1000x64K_cpu']:.2f}x by CPU per byte")
print(f"256 x 16 KiB vs one 64 MiB write:  {b:.2f}x GB/s (target >= 0.6: {'met' if b >= 0.6 else 'MISSED'}),"
      f" {med['contig_64M_cpu'] / med['kv_256x16K_cpu']:.2f}x by CPU per byte")
print(f"256 x 16 KiB vs one 4 MiB write (same bytes): {med['kv_256x16K'] / med['contig_4M']:.2f}x GB/s,"
      f" {med['contig_4M_cpu'] / med['kv_256x16K_cpu']:.2f}x by CPU per byte;"
      f" vs 4 MiB in 16 KiB chunks {med['contig_4M_chunk16K_cpu'] / med['kv_256x16K_cpu']:.2f}x by CPU per byte")
for k in ("kv_1000x64K", "kv_256x16K"):
    print(f"per round {k}/contig_64M: " + " ".join(f"{float(r[k]) / float(r['contig_64M']):.2f}" for r in rows))
PY
kill $ipid 2>/dev/null || true
echo "== plots"
if /usr/bin/python3 -c 'import matplotlib' 2>/dev/null; then
  /usr/bin/python3 "$(dirname "$0")/plot.py" "$out"
else
  echo "matplotlib missing (Debian python3-matplotlib: scripts/deps.sh --bench); no plots"
fi
echo "results in $out"
