#!/bin/sh
# bench/compare.sh tcpx over the CUDA test doubles (run under
# tests/tcpx/with_real_plugin.sh with FAKE_CUDA_DEVICES=2): the engine over
# Google's real plugin and the devmem stand-in, and the emulation, "GPU" 0 ->
# "GPU" 1, one round of small runs, every transfer checked: each case gets
# its median and the targets' ratios are printed. Outside with_real_plugin.sh
# the set is refused with exit 2; NCCL cases without torch too. Also
# bench/nccl_with_tpx.py's checks of its arguments (no torch needed).
# usage: bench_compare_tcpx.sh BUILD_DIR SOURCE_DIR
set -u
build=$1 src=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
py=python3

GPU=1 NCCL_VARIANTS= ROUNDS=1 ITERS64=2 CHECK=every IPERF3=none TPX_UNPACK=d2d \
  timeout 200 bash "$src/bench/compare.sh" tcpx "$build" >"$dir/out.txt" 2>&1 ||
  fail "compare.sh tcpx failed: $(tail -n 20 "$dir/out.txt")"
grep -q "client GPU 0, server GPU 1" "$dir/out.txt" || fail "not GPU 0 -> GPU 1: $(head -n 8 "$dir/out.txt")"
for c in "real plugin 64M x1" "real plugin 64M x4" "real plugin send 64M x1" "emulation 64M x1" "emulation 64M x4"; do
  grep -q "^  $c  *[0-9][0-9.]* " "$dir/out.txt" || fail "no median for $c: $(cat "$dir/out.txt")"
done
for i in 1 4; do
  grep -q "real plugin 64M x$i / emulation 64M x$i *[0-9.]*  (target >= 0.8" "$dir/out.txt" ||
    fail "no ratio to the emulation at $i in flight: $(cat "$dir/out.txt")"
done

# Refused before anything runs: no stand-ins (not under with_real_plugin.sh).
env -u NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX GPU=1 IPERF3=none bash "$src/bench/compare.sh" tcpx "$build" >"$dir/r.txt" 2>&1
rc=$?
[ $rc = 2 ] && grep -q "run under tests/tcpx/with_real_plugin.sh" "$dir/r.txt" || fail "no refusal without the stand-ins (exit $rc): $(cat "$dir/r.txt")"
if ! $py -c 'import torch' 2>/dev/null; then
  GPU=1 IPERF3=none PYTHON=$py bash "$src/bench/compare.sh" tcpx "$build" >"$dir/r.txt" 2>&1
  rc=$?
  [ $rc = 2 ] && grep -q "has no torch" "$dir/r.txt" || fail "NCCL cases without torch not refused (exit $rc): $(cat "$dir/r.txt")"
fi

# nccl_with_tpx.py: bad arguments are refused before torch is imported.
nw=$src/bench/nccl_with_tpx.py
out=$($py "$nw" --transport tcpx 2>&1) && fail "tcpx without --plugin accepted"
echo "$out" | grep -q "needs --plugin" || fail "tcpx without --plugin: $out"
out=$($py "$nw" --transport tcpx --plugin /nonexistent/libnccl-net-tcpx.so 2>&1) && fail "a missing plugin accepted"
echo "$out" | grep -q "does not exist" || fail "a missing plugin: $out"
for bad in "--inflight 0" "--inflight 1,x" "--sizes 64Q" "--sizes 0" "--check-max -1"; do
  # shellcheck disable=SC2086
  $py "$nw" --transport tcpx $bad >/dev/null 2>&1
  [ $? = 2 ] || fail "nccl_with_tpx.py $bad not refused with exit 2"
done
echo "ok"
