#!/usr/bin/env bash
# `bench/compare.sh tcpx` under tests/tcpx/with_real_plugin.sh on a GPU
# machine: the RxDM stand-in started on the machine's own CUDA driver (no
# test doubles), the plugin scripts/build-tcpx-plugin.sh built, GPU 0 -> GPU 1.
# The engine over Google's real GPUDirect-TCPX plugin against PyTorch's NCCL
# over the same plugin and stand-ins, and against the plugin's emulation
# (TPX_SOCK_UNPACK=1): medians, spreads and the targets' ratios.
#
#   bench/tcpx_compare.sh [BUILD_DIR]        (default ./build; ROUNDS, ITERS64,
#                                             LOGS, NCCL_VARIANTS, PYTHON as
#                                             bench/compare.sh takes them)
# TPX_TCPX_REAL_PLUGIN names another plugin build.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)
build=$(realpath "${1:-build}")
standin=$build/tests/fakes/tpx-rxdm-standin
[ -x "$standin" ] || { echo "tcpx_compare: $standin not built" >&2; exit 2; }
# The interpreter with torch (GPU images keep it in a virtual environment on PATH).
if [ -z "${PYTHON:-}" ]; then
  for c in "$(command -v python3 || true)" /usr/bin/python3; do
    [ -n "$c" ] && "$c" -c 'import torch' 2>/dev/null && { export PYTHON=$c; break; }
  done
fi
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export TPX_REAL_TIMEOUT_S=${TPX_REAL_TIMEOUT_S:-1200} IPERF3=none
# RxDM's own receive buffer per GPU (4 GiB, as tests/tcpx/gpu_real_plugin.sh gives it).
export TPX_RXDM_ARGS=${TPX_RXDM_ARGS:---pool-bytes 4294967296}
exec "$root/tests/tcpx/with_real_plugin.sh" "$root" - "$standin" -- bash "$here/compare.sh" tcpx "$build"
