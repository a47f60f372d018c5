#!/bin/sh
# The main job: a loopback transfer benchmark on the built-in transport.
# GPU memory when a GPU is present, host memory otherwise.
set -eu
build="${1:-build}"
export TPX_SOCKET_IFNAME="${TPX_SOCKET_IFNAME:-lo}"
if [ -x "$build/tpx-bench" ]; then
  exec "$build/tpx-bench" loopback
fi
exec "$build/tpx-netbench" --size 64M --iters 20
