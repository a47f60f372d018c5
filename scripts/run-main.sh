#!/bin/sh
# The main job: a loopback transfer benchmark through the engine on the
# built-in transport (64 MiB writes). GPU memory when a GPU is present and the
# build has CUDA, host memory otherwise; every byte of every iteration checked
# (outside the timing). Extra arguments go to tpx-bench.
set -eu
build="${1:-build}"
[ $# -gt 0 ] && shift
export TPX_SOCKET_IFNAME="${TPX_SOCKET_IFNAME:-lo}"
mem=host
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep -q '^GPU 0' &&
  grep -q '^TPX_CUDA_BUILT:INTERNAL=ON' "$build/CMakeCache.txt" 2>/dev/null; then
  mem=cuda
fi
echo "tpx-bench loopback: $mem memory, built-in transport over lo"
exec "$build/tpx-bench" loopback --mem "$mem" --check "$@"
