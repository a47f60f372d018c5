#!/bin/sh
# tpx-bench loopback over the real GPUDirect-TCPX plugin on lo (run by
# with_real_plugin.sh). The engine posts every receive over this plugin with
# a GPU landing region (docs/UNPACK.md, "Host-memory receives"), and the
# plugin's CUDA regMr reads the NIC's PCI path unchecked: lo has none, so it
# would crash the process (SIGSEGV, seen before the engine checked). Without
# the devmem TCP stand-in (which gives lo a PCI path and the plugin its
# receive path: bench_tcpx_real_devmem), the engine must refuse cleanly:
# exit status 1, the reason named, nothing hanging.
# usage: bench_refused.sh TPX_BENCH
out=$(timeout 120 "$1" loopback --size 1M --op write --iters 2 --warmup 0 --check --progress off 2>&1)
rc=$?
echo "$out"
[ "$rc" = 1 ] || { echo "bench_refused: exit status $rc, expected 1 (a clean refusal)" >&2; exit 1; }
echo "$out" | grep -q "cannot register GPU memory: its device 0 'lo' has no PCI path" ||
  { echo "bench_refused: the refusal does not name the missing PCI path" >&2; exit 1; }
echo "bench_refused: refused as expected"
