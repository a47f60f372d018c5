#!/bin/sh
# bench/fill_compare.sh end to end, one round of tiny runs (host memory, no
# iperf3, no GPU): every case measured, its median and the ratios printed;
# the cold cases (--regions) are measured; CLIENT_CPUS / SERVER_CPUS reach
# the setup line; a bad CPU list, COLD, REGIONS or MPS, MPS=1 without GPU
# cases, or a build without the tools is refused with exit 2 before anything
# runs.
# usage: fill_compare.sh BUILD_DIR FILL_COMPARE_SH
set -u
build=$1 fc=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v taskset >/dev/null 2>&1 || { echo "SKIP: no taskset"; exit 77; }
cpu=$(taskset -pc $$ | sed 's/.*: *//; s/[,-].*//') # the first CPU this test may use

ROUNDS=1 ITERS64=2 ITERS256=1 IPERF3=none GPU=0 REGIONS=3 CLIENT_CPUS=$cpu SERVER_CPUS=$cpu \
  timeout 250 bash "$fc" "$build" >"$dir/out.txt" 2>&1 || fail "fill_compare failed: $(tail -n 5 "$dir/out.txt")"
grep -q "client CPUs $cpu, server CPUs $cpu" "$dir/out.txt" || fail "no CPU lists in the setup line: $(head -n 6 "$dir/out.txt")"
grep -q "cold cases: --regions 3" "$dir/out.txt" || fail "no cold cases in the setup line: $(head -n 6 "$dir/out.txt")"
for c in "raw 64M x1" "raw 64M x4" "host 64M x1" "host 64M x4" "host 256M x1" "host 256M x4" "host 64M x1 cold" \
  "host 64M x4 cold"; do
  grep -q "^  $c  *[0-9][0-9.]* " "$dir/out.txt" || fail "no median for $c: $(cat "$dir/out.txt")"
done
grep -q "host 64M x1 / raw 64M x1 *[0-9]" "$dir/out.txt" || fail "no engine / raw ratio: $(cat "$dir/out.txt")"
grep -q "host 64M x1 cold / host 64M x1 *[0-9]" "$dir/out.txt" || fail "no cold / cached ratio: $(cat "$dir/out.txt")"

CLIENT_CPUS=x IPERF3=none bash "$fc" "$build" >"$dir/bad.txt" 2>&1
[ $? -eq 2 ] && grep -q CLIENT_CPUS "$dir/bad.txt" || fail "CLIENT_CPUS=x not refused: $(cat "$dir/bad.txt")"
REGIONS=1 IPERF3=none bash "$fc" "$build" >"$dir/bad.txt" 2>&1
[ $? -eq 2 ] && grep -q REGIONS "$dir/bad.txt" || fail "REGIONS=1 not refused: $(cat "$dir/bad.txt")"
COLD=yes IPERF3=none bash "$fc" "$build" >"$dir/bad.txt" 2>&1
[ $? -eq 2 ] && grep -q COLD "$dir/bad.txt" || fail "COLD=yes not refused: $(cat "$dir/bad.txt")"
MPS=on IPERF3=none bash "$fc" "$build" >"$dir/bad.txt" 2>&1
[ $? -eq 2 ] && grep -q "MPS: 0 or 1" "$dir/bad.txt" || fail "MPS=on not refused: $(cat "$dir/bad.txt")"
MPS=1 GPU=0 IPERF3=none bash "$fc" "$build" >"$dir/bad.txt" 2>&1
[ $? -eq 2 ] && grep -q "MPS=1: no GPU cases" "$dir/bad.txt" || fail "MPS=1 without GPU cases not refused: $(cat "$dir/bad.txt")"
IPERF3=none bash "$fc" "$dir/no-build" >"$dir/bad.txt" 2>&1
[ $? -eq 2 ] && grep -q "build first" "$dir/bad.txt" || fail "a missing build not refused: $(cat "$dir/bad.txt")"
echo "PASS"
