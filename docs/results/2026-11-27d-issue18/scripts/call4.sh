#!/bin/bash
# Session 4 call 4 (single GPU, 16 CPUs): the tree is 54217ec's; the shared-copy ceiling (bench/copy_share.sh) beside
# the engine's x4 figures in one call; perf of the unpack receiver if perf is there.
set -u -o pipefail
export PATH=$PATH:/usr/local/cuda/bin TPX_LOG=warn TPX_SOCKET_IFNAME=lo SGPU=0 CGPU=0
t0=$SECONDS
echo "tpx_config_chunk in the tree: $(grep -c tpx_config_chunk src/common/config.c)"; which perf || echo "no perf"
B=build-g
cmake -S . -B $B -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON >/dev/null 2>&1 && cmake --build $B -j --target tpx-bench tpx-netbench >/dev/null 2>&1 || { echo build failed; exit 1; }
echo "built at $((SECONDS - t0)) s"
. x/ab.sh
for k in 1 2; do
  bash bench/copy_share.sh >$OUT/copy_share$k.txt 2>&1
  cases=("host x4|host|host|4" "staging x4|cuda|cuda|4" "unpack x4|cuda|cuda|4|TPX_SOCK_UNPACK=1" "host x1|host|host|1" "staging x1|cuda|cuda|1" "unpack x1|cuda|cuda|1|TPX_SOCK_UNPACK=1")
  ROUNDS=3 TLIM=400 abloop $OUT/ab_ceiling$k.txt | tee $OUT/ab_ceiling${k}_summary.txt
  echo "pass $k at $((SECONDS - t0)) s"
done
grep -h "GB/s\|#" $OUT/copy_share1.txt $OUT/copy_share2.txt | head -40
