#!/bin/sh
# A tpx-bench run over the real GPUDirect-TCPX plugin (run by
# with_real_plugin.sh) that must fail cleanly: exit status 1 (not a crash,
# not a hang: bounded by timeout), its output naming why (REGEX, grep -E).
#   bench_fails.sh REGEX TPX_BENCH ARGS...
# Used for: the engine refusing GPU memory on lo without the devmem stand-in
# (the plugin's CUDA regMr would crash on a NIC without a PCI path), the RxDM
# stand-in refusing flow-steering rules, the receive buffer running out.
regex=$1
shift
out=$(timeout -k 10 120 "$@" 2>&1)
rc=$?
echo "$out"
[ "$rc" = 1 ] || { echo "bench_fails: exit status $rc, expected 1 (a clean failure)" >&2; exit 1; }
echo "$out" | grep -Eq "$regex" || { echo "bench_fails: the failure does not say: $regex" >&2; exit 1; }
echo "bench_fails: failed as expected"
