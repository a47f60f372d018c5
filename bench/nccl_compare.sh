#!/bin/bash
# NCCL over loopback on two GPUs of one host, three transports side by side in
# one run: NCCL Socket (defaults), NCCL Socket 4 threads x 4 sockets, and our
# plugin libnccl-net-tpx.so. Every run checks exact results
# (bench/nccl_with_tpx.py) and its NCCL_DEBUG=INFO log must show that the
# intended transport carried the traffic. Prints a table of send/recv GB/s
# (1e9 B/s, per GPU) at 64 MiB and 256 MiB.
#
#   bench/nccl_compare.sh [--plugin PATH] [--out DIR] [--iters N] [--warmup N]
#
# PATH defaults to build/libnccl-net-tpx.so (make build). Logs and results go
# to DIR (default out/nccl_compare-<time>). Exit status 0 only when all three
# runs passed their checks.
set -euo pipefail

root=$(cd "$(dirname "$0")/.." && pwd)
plugin=${TPX_PLUGIN_SO:-$root/build/libnccl-net-tpx.so}
out=""
iters=20
warmup=5
while [ $# -gt 0 ]; do
  case "$1" in
  --plugin) plugin=$2; shift 2 ;;
  --out) out=$2; shift 2 ;;
  --iters) iters=$2; shift 2 ;;
  --warmup) warmup=$2; shift 2 ;;
  -h | --help) sed -n '2,14p' "$0"; exit 0 ;;
  *) echo "nccl_compare: unknown argument $1" >&2; exit 2 ;;
  esac
done
plugin=$(realpath "$plugin" 2>/dev/null || echo "$plugin")
if [ ! -f "$plugin" ]; then
  echo "nccl_compare: $plugin not found; build it first (make build)" >&2
  exit 2
fi
out=${out:-$root/out/nccl_compare-$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out"

{
  echo "date:    $(date -Is)"
  echo "host:    $(hostname)"
  echo "gpus:    $(nvidia-smi -L 2>/dev/null | tr '\n' ';' || echo '?')"
  echo "cpus:    $(nproc)"
  echo "plugin:  $plugin"
  echo "commit:  $(git -C "$root" rev-parse --short HEAD 2>/dev/null || echo '?')"
} | tee "$out/machine.txt"

fail=0
for t in socket socket-4x4 tpx; do
  log=$out/$t.log
  echo
  echo "== $t  (log: $log)"
  # INIT carries "Using network X" and "Channel ... via NET/X/n".
  if ! NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,ENV,NET \
      python3 "$root/bench/nccl_with_tpx.py" --transport "$t" --plugin "$plugin" \
      --iters "$iters" --warmup "$warmup" >"$log" 2>&1; then
    echo "FAIL: $t: the run failed (wrong results or an error); last lines of $log:"
    tail -n 30 "$log" | sed 's/^/    /'
    fail=1
    continue
  fi
  case $t in
  tpx) want=tpx; other='Using network (Socket|IB)' ;;
  *) want=Socket; other='Using network (tpx|IB)' ;;
  esac
  if ! grep -q "Using network $want" "$log"; then
    echo "FAIL: $t: no 'Using network $want' in $log: NCCL picked another transport"
    grep -E 'Using network|NET/Plugin|Could not find|Failed to initialize' "$log" | head -n 10 | sed 's/^/    /'
    fail=1
  elif grep -Eq "$other" "$log"; then
    echo "FAIL: $t: $log shows another network in use:"
    grep -E "$other" "$log" | head -n 5 | sed 's/^/    /'
    fail=1
  elif ! grep -q "via NET/$want/" "$log"; then
    echo "FAIL: $t: no channel 'via NET/$want/' in $log: the traffic did not go through $want"
    fail=1
  else
    echo "ok: exact results; traffic via NET/$want ($(grep -c "via NET/$want/" "$log") channel connections)"
    if [ "$t" = tpx ]; then grep -m1 "NET/tpx : built-in" "$log" | sed "s/^/    /" || true; fi
  fi
  grep '^RESULT ' "$log" | sed 's/^RESULT //' >"$out/$t.json" || true
  sed -n '/^ *size  *iters/,/^RESULT/p' "$log" | grep -v '^RESULT' | sed 's/^/    /'
done

echo
python3 - "$out" <<'EOF'
import json, os, sys
out = sys.argv[1]
rows = []
for t in ("socket", "socket-4x4", "tpx"):
    p = os.path.join(out, t + ".json")
    try:
        r = json.load(open(p))
    except (OSError, ValueError):
        rows.append((t, None, None))
        continue
    g = {x["bytes"]: x["gbps_per_gpu"] for x in r["timed"]}
    rows.append((t, g.get(64 << 20), g.get(256 << 20)))
print("send/recv GPU0 -> GPU1 over loopback, GB/s (1e9 B/s) per GPU")
print(f"{'transport':<12} {'64 MiB':>8} {'256 MiB':>8}")
for t, a, b in rows:
    f = lambda v: f"{v:8.2f}" if v is not None else "  failed"
    print(f"{t:<12} {f(a)} {f(b)}")
EOF

if [ $fail -ne 0 ]; then
  echo "nccl_compare: FAILED (see above)" >&2
  exit 1
fi
echo "nccl_compare: all three transports gave exact results; logs in $out"
