#!/usr/bin/env bash
# Progress cadence of the engine (issue 19, point 7): the progress thread's
# nap policy (TPX_PROGRESS_SPIN_US=0, the default: 10-100 us naps when a pass
# finds nothing done with requests in flight) against spin-then-block
# (TPX_PROGRESS_SPIN_US=N: keep polling, yielding between passes, for N us
# after the last progress, then block), side by side in one run, alternating
# the policies ROUNDS times. Transport: the built-in transport's unpack mode
# (the GPUDirect-TCPX receive contract: bounce pages, unpack, irecvConsumed),
# GPU memory, tpx-bench loopback writes. Reports the median GB/s and the
# median CPU use (cores busy, both sides) per policy, and ratios to napping.
#
# usage: bench/progress_policy.sh [BUILD_DIR]   (default ./build; a CUDA build)
#   ROUNDS=N (5)  ITERS=N (30)  SIZE=64M  INFLIGHT=2  SPINS="0 50 200 1000"
#   GPUS="0 1" (client GPU, server GPU; "0 0" on a one-GPU machine)
#   MEM=cuda (host: the same without a GPU, for a dry run)
set -euo pipefail
build="${1:-build}"
rounds="${ROUNDS:-5}"
iters="${ITERS:-30}"
size="${SIZE:-64M}"
inflight="${INFLIGHT:-2}"
spins="${SPINS:-0 50 200 1000}"
read -r gc gs <<<"${GPUS:-0 1}"
mem=(--mem cuda --gpu "$gc" --server-gpu "$gs")
[ "${MEM:-cuda}" = host ] && mem=(--mem host)
tb="$build/tpx-bench"
[ -x "$tb" ] || { echo "no $tb: build first (cmake --build $build)" >&2; exit 1; }
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
echo "date $(date -u +%Y-%m-%dT%H:%M:%SZ) host $(uname -n) $(nproc) cores; $(nvidia-smi -L 2>/dev/null | head -n 2 | tr '\n' ';')"
echo "commit $(git -C "$(dirname "$0")/.." log -1 --format=%h 2>/dev/null || echo '?')"
echo "tpx-bench loopback ${mem[*]} --size $size --iters $iters --inflight $inflight, TPX_SOCK_UNPACK=1"
for r in $(seq 1 "$rounds"); do
  for s in $spins; do
    log="$out/r$r-s$s.log"
    TPX_SOCK_UNPACK=1 TPX_PROGRESS_SPIN_US=$s timeout 300 "$tb" loopback "${mem[@]}" \
      --size "$size" --iters "$iters" --warmup 3 --inflight "$inflight" >"$log" 2>&1 || echo "round $r spin $s: exit $?" >&2
    bw=$(sed -n 's/.*BW: \([0-9.]*\) GB\/s.*/\1/p' "$log" | tail -n 1)
    cpu=$(sed -n 's/.*, \([0-9.]*\) cores busy.*/\1/p' "$log" | awk '{t += $1} END {printf "%.2f", t}')
    echo "round $r spin_us $s: ${bw:-?} GB/s, ${cpu:-?} cores busy (sum of the [CPU] lines)"
    echo "$s ${bw:-0} ${cpu:-0}" >>"$out/all"
  done
done
python3 - "$out/all" <<'PY'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
by = {}
for s, bw, cpu in rows:
    by.setdefault(int(s), []).append((float(bw), float(cpu)))
base = by.get(0)
b_bw = statistics.median(x[0] for x in base) if base else None
b_cpu = statistics.median(x[1] for x in base) if base else None
print("\n| TPX_PROGRESS_SPIN_US | GB/s (median) | cores busy (median) | GB/s vs nap | cores vs nap |")
print("|---|---|---|---|---|")
for s in sorted(by):
    bw = statistics.median(x[0] for x in by[s]); cpu = statistics.median(x[1] for x in by[s])
    rb = f"{bw / b_bw:.2f}" if b_bw else "-"; rc = f"{cpu / b_cpu:.2f}" if b_cpu else "-"
    print(f"| {s}{' (nap, default)' if s == 0 else ''} | {bw:.2f} | {cpu:.2f} | {rb} | {rc} |")
PY
