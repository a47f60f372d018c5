#!/bin/sh
# bench/compare.sh end to end, one round of tiny runs (host memory, no
# iperf3, no GPU). Set fill: every case measured, its median and the ratios
# printed; the cold cases (--regions) are measured; CLIENT_CPUS / SERVER_CPUS
# reach the setup line; a bad CPU list, COLD, REGIONS or MPS, MPS=1 without
# GPU cases, or a build without the tools is refused with exit 2 before
# anything runs. Set cpu: the latency cases and their ratio. A case added by
# CASES is measured; OLD= measures each case with both builds and prints the
# new / old ratio; GPU cases (through a stand-in tpx-bench) are verified once
# and reach each side's GPU; an unknown set is refused.
# usage: bench_compare.sh BUILD_DIR COMPARE_SH
set -u
build=$1 fc=$2
dir=$(mktemp -d)
trap 'rm -rf "$dir"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
command -v taskset >/dev/null 2>&1 || { echo "SKIP: no taskset"; exit 77; }
cpu=$(taskset -pc $$ | sed 's/.*: *//; s/[,-].*//') # the first CPU this test may use

ROUNDS=1 ITERS64=2 ITERS256=1 IPERF3=none GPU=0 REGIONS=3 CLIENT_CPUS=$cpu SERVER_CPUS=$cpu \
  timeout 250 bash "$fc" fill "$build" >"$dir/out.txt" 2>&1 || fail "compare.sh fill failed: $(tail -n 5 "$dir/out.txt")"
grep -q "client CPUs $cpu, server CPUs $cpu" "$dir/out.txt" || fail "no CPU lists in the setup line: $(head -n 6 "$dir/out.txt")"
grep -q "cold cases: --regions 3" "$dir/out.txt" || fail "no cold cases in the setup line: $(head -n 6 "$dir/out.txt")"
for c in "raw 64M x1" "raw 64M x4" "host 64M x1" "host 64M x4" "host 256M x1" "host 256M x4" "host 64M x1 cold" \
  "host 64M x4 cold"; do
  grep -q "^  $c  *[0-9][0-9.]* " "$dir/out.txt" || fail "no median for $c: $(cat "$dir/out.txt")"
done
grep -q "host 64M x1 / raw 64M x1 *[0-9]" "$dir/out.txt" || fail "no engine / raw ratio: $(cat "$dir/out.txt")"
grep -q "host 64M x1 cold / host 64M x1 *[0-9]" "$dir/out.txt" || fail "no cold / cached ratio: $(cat "$dir/out.txt")"

CLIENT_CPUS=x IPERF3=none bash "$fc" fill "$build" >"$dir/bad.txt" 2>&1
[ $? -eq 2 ] && grep -q CLIENT_CPUS "$dir/bad.txt" || fail "CLIENT_CPUS=x not refused: $(cat "$dir/bad.txt")"
REGIONS=1 IPERF3=none bash "$fc" fill "$build" >"$dir/bad.txt" 2>&1
[ $? -eq 2 ] && grep -q REGIONS "$dir/bad.txt" || fail "REGIONS=1 not refused: $(cat "$dir/bad.txt")"
COLD=yes IPERF3=none bash "$fc" fill "$build" >"$dir/bad.txt" 2>&1
[ $? -eq 2 ] && grep -q COLD "$dir/bad.txt" || fail "COLD=yes not refused: $(cat "$dir/bad.txt")"
MPS=on IPERF3=none bash "$fc" fill "$build" >"$dir/bad.txt" 2>&1
[ $? -eq 2 ] && grep -q "MPS: 0 or 1" "$dir/bad.txt" || fail "MPS=on not refused: $(cat "$dir/bad.txt")"
MPS=1 GPU=0 IPERF3=none bash "$fc" fill "$build" >"$dir/bad.txt" 2>&1
[ $? -eq 2 ] && grep -q "MPS=1: no GPU cases" "$dir/bad.txt" || fail "MPS=1 without GPU cases not refused: $(cat "$dir/bad.txt")"
IPERF3=none bash "$fc" fill "$dir/no-build" >"$dir/bad.txt" 2>&1
[ $? -eq 2 ] && grep -q "build first" "$dir/bad.txt" || fail "a missing build not refused: $(cat "$dir/bad.txt")"

ROUNDS=1 ITERS64=2 IPERF3=none CLIENT_CPUS=$cpu SERVER_CPUS=$cpu CASES="send 1M|eng|host|-|1M|1|1|--op send" \
  ONLY='latency|send' timeout 120 bash "$fc" cpu "$build" >"$dir/cpu.txt" 2>&1 ||
  fail "compare.sh cpu failed: $(tail -n 5 "$dir/cpu.txt")"
for c in "raw 4K latency" "write 4K latency" "send 64M" "send 1M"; do
  grep -q "^  $c  *[0-9][0-9.]* " "$dir/cpu.txt" || fail "no median for $c: $(cat "$dir/cpu.txt")"
done
grep -q "write 4K latency / raw 4K latency *[0-9].*target <= 1.5" "$dir/cpu.txt" || fail "no latency ratio: $(cat "$dir/cpu.txt")"

ROUNDS=1 ITERS64=2 IPERF3=none OLD=$build ONLY='^contig 4M$' timeout 60 bash "$fc" kv "$build" >"$dir/ab.txt" 2>&1 ||
  fail "compare.sh kv with OLD failed: $(tail -n 5 "$dir/ab.txt")"
grep -q "contig 4M \[new\] / contig 4M \[old\] *[0-9]" "$dir/ab.txt" || fail "no new / old ratio: $(cat "$dir/ab.txt")"

# The GPU cases' logic without a GPU: a tpx-bench stand-in that turns GPU
# memory into host memory and drops --gpu; each GPU case is verified once
# (--check) and measured, CLIENT_GPU / SERVER_GPU reach the commands.
mkdir "$dir/fake"
{
  echo '#!/bin/bash'
  echo 'args=()'
  echo 'while [ $# -gt 0 ]; do'
  echo '  case $1 in --gpu) echo "gpu $2" >>"$(dirname "$0")/gpus"; shift 2; continue ;; cuda) args+=(host) ;; *) args+=("$1") ;; esac'
  echo '  shift'
  echo 'done'
  echo "exec \"$build/tpx-bench\" \"\${args[@]}\""
} >"$dir/fake/tpx-bench"
chmod +x "$dir/fake/tpx-bench"
ln -s "$build/tpx-netbench" "$dir/fake/tpx-netbench"
ROUNDS=1 ITERS64=2 IPERF3=none GPU=1 CLIENT_GPU=0 SERVER_GPU=1 ONLY='^(host|staging) 64M x1$' timeout 60 \
  bash "$fc" fill "$dir/fake" >"$dir/gpu.txt" 2>&1 || fail "compare.sh fill with GPU cases failed: $(tail -n 5 "$dir/gpu.txt")"
grep -q "^verified: staging 64M x1 (3 transfers, --check)" "$dir/gpu.txt" || fail "GPU case not verified: $(cat "$dir/gpu.txt")"
grep -q "staging 64M x1 / host 64M x1 *[0-9].*target >= 0.9" "$dir/gpu.txt" || fail "no GPU / host ratio: $(cat "$dir/gpu.txt")"
grep -q "gpu 0" "$dir/fake/gpus" && grep -q "gpu 1" "$dir/fake/gpus" || fail "CLIENT_GPU / SERVER_GPU not passed"

IPERF3=none bash "$fc" nosuchset "$build" >"$dir/bad.txt" 2>&1
[ $? -eq 2 ] && grep -q "usage" "$dir/bad.txt" || fail "an unknown set not refused: $(cat "$dir/bad.txt")"
echo "PASS"
