#!/bin/bash
# Issue 18 experiment: staging copies batched per launch (TPX_X_COPY_BATCH), GPUs split, 16 CPUs.
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
t0=$SECONDS
B=build-gpu-run
# correctness with batching on: the GPU suite's engine steps (staging both ways, every chunk size, memcheck)
TPX_X_COPY_BATCH=4 STEPS="ctx unpack engine flush sockunpack gputcpx memcheck_engine" BUILD_DIR=$PWD/$B OUT=$OUT/suite \
  bash tests/gpu/run.sh >$OUT/suite.log 2>&1
grep -E '^(PASS|FAIL|SKIP)' $OUT/suite/summary.txt; rm -f $OUT/suite.log
echo "suite done at $((SECONDS - t0)) s"
cmake --build $B -j "$(nproc)" --target tpx-netbench >/dev/null 2>&1; [ -x $B/tpx-bench ] || exit 1
run() { # name batch cmem smem inflight -> prints GB/s and cpu
  local sg=() cg=() port=$((27200 + RANDOM % 500))
  [ $4 = cuda ] && sg=(--gpu 1); [ $3 = cuda ] && cg=(--gpu 0)
  TPX_X_COPY_BATCH=$2 taskset -c 0-15 $B/tpx-bench server --host 127.0.0.1 --port $port --mem $4 "${sg[@]}" >/tmp/s.log 2>&1 &
  local sp=$!
  for i in $(seq 50); do grep -q '^\[SERVER\] listening' /tmp/s.log && break; sleep 0.05; done
  TPX_X_COPY_BATCH=$2 taskset -c 0-15 timeout 120 $B/tpx-bench client 127.0.0.1 --port $port --mem $3 "${cg[@]}" --size 64M --inflight $5 --iters 30 --progress off --check >/tmp/c.log 2>&1
  wait $sp
  local v=$(sed -n 's/^\[PERF\].*BW: \([0-9.]*\) GB.*/\1/p' /tmp/c.log | tail -1)
  grep -q '^\[CHECK\] server: ok' /tmp/s.log /tmp/c.log || v="FAIL"
  local cc=$(sed -n 's/^\[CPU\] client: \([0-9.]*\) s user + \([0-9.]*\) s system per GB.*/\1 \2/p' /tmp/c.log | tail -1 | awk '{printf "%.3f",$1+$2}')
  local sc=$(sed -n 's/^\[CPU\] server: \([0-9.]*\) s user + \([0-9.]*\) s system per GB.*/\1 \2/p' /tmp/s.log /tmp/c.log | tail -1 | awk '{printf "%.3f",$1+$2}')
  echo "$1|$v|$cc|$sc"
}
cases=("host x1|1|host|host|1" "host x4|1|host|host|4"
  "cuda x1 b1|1|cuda|cuda|1" "cuda x1 b4|4|cuda|cuda|1" "cuda x1 b8|8|cuda|cuda|1"
  "cuda x4 b1|1|cuda|cuda|4" "cuda x4 b4|4|cuda|cuda|4" "cuda x4 b8|8|cuda|cuda|4"
  "cuda/host x1 b1|1|cuda|host|1" "cuda/host x1 b4|4|cuda|host|1"
  "host/cuda x1 b1|1|host|cuda|1" "host/cuda x1 b4|4|host|cuda|1")
k=${#cases[@]}
: >$OUT/ab.txt
for r in $(seq ${ROUNDS:-7}); do
  for j in $(seq 0 $((k - 1))); do
    c=${cases[$(((j + r) % k))]}
    IFS='|' read -r n b cm sm inf <<<"$c"
    echo "$r|$(run "$n" $b $cm $sm $inf)" >>$OUT/ab.txt
  done
done
python3 - $OUT/ab.txt <<'PY' | tee $OUT/ab_summary.txt
import sys, statistics as st
rows = {}
for l in open(sys.argv[1]):
    r, n, v, cc, sc = l.strip().split("|")
    rows.setdefault(n, []).append((v, cc, sc))
med = {}
print("case                 median   spread         CPU s/GB cl/sv   (GB/s = 1e9 B/s; FAIL = bytes not verified)")
for n, vs in rows.items():
    xs = [float(v[0]) for v in vs if v[0] not in ("FAIL", "")]
    fails = sum(1 for v in vs if v[0] in ("FAIL", ""))
    c1 = [float(v[1]) for v in vs if v[1]]; c2 = [float(v[2]) for v in vs if v[2]]
    med[n] = st.median(xs) if xs else 0
    print("%-20s %7.2f  %6.2f-%-6.2f  %.3f / %.3f  %s" % (n, med[n], min(xs or [0]), max(xs or [0]),
          st.median(c1) if c1 else 0, st.median(c2) if c2 else 0, ("FAILS %d" % fails) if fails else ""))
for b in ("b1", "b4", "b8"):
    for x in ("x1", "x4"):
        if "cuda %s %s" % (x, b) in med: print("cuda %s %s / host %s: %.2f" % (x, b, x, med["cuda %s %s" % (x, b)] / med["host " + x]))
best = max(("1", "4", "8"), key=lambda b: med.get("cuda x1 b" + b, 0))
open("/tmp/best", "w").write(best)
PY
best=$(cat /tmp/best); echo "best batch: $best; A/B done at $((SECONDS - t0)) s"
d=/tmp/tl; rm -rf $d; mkdir -p $d
TPX_X_COPY_BATCH=$best TPX_TIMELINE=$d/tl taskset -c 0-15 $B/tpx-bench server --host 127.0.0.1 --port 27900 --mem cuda --gpu 1 >$d/s.log 2>&1 &
sleep 1.5
TPX_X_COPY_BATCH=$best TPX_TIMELINE=$d/tl taskset -c 0-15 timeout 60 $B/tpx-bench client 127.0.0.1 --port 27900 --mem cuda --gpu 0 --size 64M --inflight 1 --iters 20 --progress off >$d/c.log 2>&1
wait
python3 bench/timeline.py $d/tl.* --plot $OUT/timeline-batch.png --label "64 MiB write, GPU0 -> GPU1, copies batched by $best, 16 CPUs" >$OUT/timeline-batch.txt 2>&1
head -1 $OUT/timeline-batch.txt; grep '^median' $OUT/timeline-batch.txt
echo "timeline done at $((SECONDS - t0)) s"
TPX_X_COPY_BATCH=$best CLIENT_GPU=0 SERVER_GPU=1 IPERF3=$PWD/build-iperf/iperf3w ROUNDS=${RF:-3} taskset -c 0-15 bench/fill_compare.sh $B 2>&1 | tee $OUT/fill16-batch.txt | sed -n '/^ratios/,/^Markdown/p'
echo "fill done at $((SECONDS - t0)) s"
