#!/usr/bin/env bash
# The GPUDirect-TCPX plugin's other clients on a GPU machine: PyTorch's NCCL
# and NIXL's Python agent, each over Google's real plugin
# (scripts/build-tcpx-plugin.sh) with the RxDM stand-in running and the
# devmem TCP stand-in preloaded, through tests/tcpx/with_real_plugin.sh
# (which also checks the stand-in's record: the plugin asked for rules, every
# request was valid, every rule was deleted again). docs/A3HIGH.md, "NCCL
# and NIXL over the real plugin".
#
#   tests/gpu/tcpx_clients.sh nccl|nixl [--build DIR] [--plugin PATH] [--python PY]
#
# nccl: torch.distributed, two processes (GPU 0 and GPU 1), NCCL_NET_PLUGIN =
#   the plugin, P2P and SHM off so the plugin carries every byte:
#   all_reduce and send/recv from 1 KiB to 256 MiB with exact results
#   (bench/nccl_with_tpx.py --transport tcpx), then 64 MiB send/recv timed
#   with 1 and 4 in flight (informational). NCCL's log (NCCL_DEBUG=INFO) must
#   show the plugin loaded (its name and version), chosen as the network,
#   carrying the channels with GPU memory at both ends (GDRDMA), and NCCL's
#   unpack offload. Needs 2 GPUs (exit 77 otherwise).
# nixl: tests/gpu/tcpx_nixl.py with TPX_NET_PLUGIN = the plugin: VRAM at both
#   ends, 1,000 x 64 KiB and 64 MiB, every byte checked. Needs NIXL_PREFIX
#   (a NIXL built with scripts/build-testdeps.sh --cuda) and the TPX NIXL
#   plugin built in DIR (exit 77 otherwise, saying which).
# Exit status: 0 passed, 77 skipped (the reason printed), else failed.
# Environment: TPX_TCPX_REAL_PLUGIN (the plugin, as --plugin), NCCL_DEBUG_SUBSYS,
# TPX_REAL_TIMEOUT_S (whole run, default 300).
set -u -o pipefail

root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
what=${1:-}
shift || true
build=$root/build
plugin=${TPX_TCPX_REAL_PLUGIN:-}
py=${PYTHON:-}
while [ $# -gt 0 ]; do
  case $1 in
  --build) build=$2; shift 2 ;;
  --plugin) plugin=$2; shift 2 ;;
  --python) py=$2; shift 2 ;;
  -h | --help) sed -n '2,27p' "$0"; exit 0 ;;
  *) echo "tcpx_clients: unknown argument $1" >&2; exit 2 ;;
  esac
done
case $what in nccl | nixl) ;; *) echo "usage: tests/gpu/tcpx_clients.sh nccl|nixl [--build DIR] [--plugin PATH] [--python PY]" >&2; exit 2 ;; esac
skip() { echo "tcpx_clients $what: SKIPPED: $*"; exit 77; }
fail() { echo "tcpx_clients $what: FAILED: $*" >&2; exit 1; }

[ -n "$plugin" ] || plugin=$("$root/scripts/build-tcpx-plugin.sh" --prefix 2>/dev/null || true)
[ -n "$plugin" ] && [ -f "$plugin" ] || skip "the GPUDirect-TCPX plugin is not built (scripts/build-tcpx-plugin.sh)"
plugin=$(realpath "$plugin")
standin=$build/tests/fakes/tpx-rxdm-standin
devmem=$build/tests/fakes/devmem/libtpx-devmem-standin.so
[ -x "$standin" ] && [ -f "$devmem" ] || fail "the stand-ins are not built in $build (targets tpx-rxdm-standin, tpx-devmem-standin)"
ngpu=$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)
[ "${ngpu:-0}" -ge 1 ] || skip "no GPU"
# The interpreter that has torch (GPU images keep it in a virtual environment on PATH).
if [ -z "$py" ]; then
  for c in "$(command -v python3 || true)" /usr/bin/python3; do
    [ -n "$c" ] && "$c" -c 'import torch' 2>/dev/null && { py=$c; break; }
  done
fi
[ -n "$py" ] && "$py" -c 'import torch' 2>/dev/null || skip "no python3 with torch"
# Never NVLink multicast on shared machines; loopback only.
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1 TPX_SOCKET_IFNAME=lo
export TPX_TCPX_REAL_PLUGIN=$plugin TPX_REAL_TIMEOUT_S=${TPX_REAL_TIMEOUT_S:-300}
# RxDM's own receive buffer per GPU (4 GiB, as tests/tcpx/gpu_real_plugin.sh gives it).
export TPX_RXDM_ARGS=${TPX_RXDM_ARGS:---pool-bytes 4294967296}
# with_real_plugin.sh: "-" = the machine's own CUDA driver, no test doubles.
real=("$root/tests/tcpx/with_real_plugin.sh" "$root" - "$standin" --)
log=$(mktemp /tmp/tcpx-clients-XXXXXX.log)
trap 'rm -f "$log"' EXIT

if [ "$what" = nccl ]; then
  [ "$ngpu" -ge 2 ] || skip "NCCL between two processes needs 2 GPUs ($ngpu present)"
  echo "tcpx_clients nccl: plugin $plugin, $("$py" -c 'import torch; v = torch.cuda.nccl.version(); print("torch", torch.__version__, "NCCL", ".".join(map(str, v)) if isinstance(v, tuple) else v)')"
  NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=${NCCL_DEBUG_SUBSYS:-INIT,NET,ENV} PYTHONUNBUFFERED=1 \
    "${real[@]}" env LD_PRELOAD="$devmem" "$py" "$root/bench/nccl_with_tpx.py" --transport tcpx \
    --plugin "$plugin" --check-max 256M --sizes 64M --inflight 1,4 --iters 5 --warmup 2 --timeout 120 2>&1 | tee "$log"
  rc=${PIPESTATUS[0]}
  if [ "$rc" != 0 ] && grep -q 'rx ctrl timeout' "$log"; then
    echo "tcpx_clients nccl: the plugin's receives saw nothing arrive ('rx ctrl timeout'): the peer's sends did" \
      "not go, its NCCL kernel waits for bytes left in the devmem pages (an LL protocol), or a copy of the devmem" \
      "stand-in waits behind a kernel (DEVMEM_STANDIN_LOG=1 names it): docs/A3HIGH.md" >&2
  fi
  [ "$rc" = 0 ] || fail "exit status $rc (wrong results, an error, or the stand-in's record; above)"
  # What NCCL says it used: every line must be there.
  checks=(
    "NET/Plugin: Loaded net plugin GPUDirectTCPX_v7 \(v7\)|the plugin's v7 table loaded"
    "NET/GPUDirectTCPX ver\. |the plugin's own version line"
    "Using network GPUDirectTCPX_v7|the plugin chosen as NCCL's network"
    "via NET/GPUDirectTCPX_v7/[0-9]+/GDRDMA|channels over the plugin with GPU memory (GDRDMA)"
    "NCCL_NET_DEVICE_UNPACK|NCCL's unpack offload for the plugin's receives"
  )
  for c in "${checks[@]}"; do
    if grep -Eq "${c%%|*}" "$log"; then
      echo "ok: ${c#*|}: $(grep -Eo "${c%%|*}.{0,40}" "$log" | head -n 1)"
    else
      fail "NCCL's log has no '${c%%|*}': ${c#*|} not seen"
    fi
  done
  grep -Eq 'Using network (Socket|IB)' "$log" && fail "NCCL's log shows another network in use"
  echo "tcpx_clients nccl: passed (exact results; NCCL over the real plugin and the stand-ins)"
  exit 0
fi

# nixl
[ -n "${NIXL_PREFIX:-}" ] && [ -f "$NIXL_PREFIX/env.sh" ] ||
  skip "NIXL_PREFIX is not a NIXL built by scripts/build-testdeps.sh --cuda"
[ -f "$build/nixl-plugins/libplugin_TPX.so" ] || skip "the TPX NIXL plugin is not built in $build (configure with -DNIXL_PREFIX)"
# shellcheck disable=SC1091
nixl_env=$(. "$NIXL_PREFIX/env.sh" && printf '%s\n%s' "$PYTHONPATH" "$LD_LIBRARY_PATH")
PYTHONUNBUFFERED=1 PYTHONDONTWRITEBYTECODE=1 PYTHONPATH="$root/python:${nixl_env%%$'\n'*}" \
  LD_LIBRARY_PATH="${nixl_env#*$'\n'}" NIXL_PLUGIN_DIR="$build/nixl-plugins" TPX_LIBRARY="$build/libtpx.so" \
  "${real[@]}" env LD_PRELOAD="$devmem" TPX_NET_PLUGIN="$plugin" "$py" "$root/tests/gpu/tcpx_nixl.py" 2>&1 | tee "$log"
rc=${PIPESTATUS[0]}
[ "$rc" = 0 ] || fail "exit status $rc (above)"
grep -q '^RESULT .*"ok": true' "$log" || fail "no passing RESULT line"
echo "tcpx_clients nixl: passed (every byte matched over the real plugin and the stand-ins)"
