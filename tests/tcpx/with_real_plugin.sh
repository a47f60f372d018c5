#!/bin/sh
# Runs a command against Google's real GPUDirect-TCPX plugin on a machine
# without a GPU: the plugin scripts/build-tcpx-plugin.sh built (outside the
# checkout), the CUDA driver test double (tests/fakes/cuda) as its
# libcuda.so.1, and tpx-rxdm-standin (tests/fakes/rxdm) as RxDM, all on
# loopback. docs/A3HIGH.md, "The real plugin on this machine".
#
#   with_real_plugin.sh SOURCE_DIR FAKE_CUDA_DIR RXDM_STANDIN -- COMMAND...
#
# FAKE_CUDA_DIR "-": the machine's own CUDA driver and runtime (a GPU
# machine: tests/gpu/run.sh, step tcpxreal); the RxDM stand-in's buffers are
# then real GPU memory, one per GPU.
# COMMAND runs with TPX_NET_PLUGIN set to the plugin and the plugin's
# environment; TPX_RXDM_RECORD names the stand-in's record of every request
# (checked below unless TPX_RXDM_EXPECT_RULES=0: the plugin asked for
# flow-steering rules, every request was valid, and every rule created was
# deleted again by the end). Exits 77 (skipped), saying why, when the plugin
# is not built here.
set -eu
src=$1 fake=$2 standin=$3
shift 3
[ "${1:-}" = "--" ] && shift
plugin=${TPX_TCPX_REAL_PLUGIN:-$("$src/scripts/build-tcpx-plugin.sh" --prefix 2>/dev/null || true)}
if [ -z "$plugin" ] || [ ! -f "$plugin" ]; then
  echo "with_real_plugin: SKIPPED: the real GPUDirect-TCPX plugin is not built on this machine"
  echo "  (scripts/build-tcpx-plugin.sh --prefix found none; scripts/deps.sh --test fetches its source"
  echo "  tarballs (scripts/third-party.txt lists them; or set TPX_THIRD_PARTY to a folder holding them)"
  echo "  and builds it: $("$src/scripts/build-tcpx-plugin.sh" --check 2>&1 | tail -1))"
  exit 77
fi
dir=$(mktemp -d /tmp/tpx-tcpx-real-XXXXXX)
record=$dir/rxdm.record
pid=""
cleanup() {
  if [ -n "$pid" ]; then kill -TERM "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$dir"
}
trap cleanup EXIT INT TERM
if [ "$fake" != - ]; then
  export LD_LIBRARY_PATH=$fake${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
  export FAKE_CUDA_DEVICES=${FAKE_CUDA_DEVICES:-1}
fi
# The stand-in's sockets; it prints "ready ..." once they listen.
# shellcheck disable=SC2086
"$standin" --prefix "$dir" --record "$record" ${TPX_RXDM_ARGS:-} >"$dir/standin.out" 2>&1 &
pid=$!
i=0
until grep -q '^ready' "$dir/standin.out" 2>/dev/null; do
  i=$((i + 1))
  if [ $i -gt 300 ] || ! kill -0 "$pid" 2>/dev/null; then
    cat "$dir/standin.out"
    echo "with_real_plugin: tpx-rxdm-standin did not start" >&2
    exit 1
  fi
  sleep 0.1
done
echo "with_real_plugin: plugin $plugin, RxDM stand-in at $dir"
export TPX_NET_PLUGIN=$plugin
export NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX=$dir
export NCCL_GPUDIRECTTCPX_SOCKET_IFNAME=lo NCCL_GPUDIRECTTCPX_CTRL_DEV=lo
export TPX_SOCKET_IFNAME=lo TPX_RXDM_RECORD=$record
# The flow-steering wait the plugin sleeps after each rule (5 s by default,
# connect.cc): nothing is programmed here.
export NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS=${NCCL_GPUDIRECTTCPX_PROGRAM_FLOW_STEERING_WAIT_MICROS:-1000}
rc=0
# Bounded even if COMMAND ignores SIGTERM: a hang is a failure, never a stall.
timeout -k 10 "${TPX_REAL_TIMEOUT_S:-200}" "$@" || rc=$?
echo "with_real_plugin: command exit status $rc; RxDM stand-in record:"
sed 's/^/  /' "$record"
if [ "$rc" = 0 ] && [ "${TPX_RXDM_EXPECT_RULES:-1}" = 1 ]; then
  grep -q '^create .* ok' "$record" || { echo "with_real_plugin: the plugin asked for no flow-steering rule" >&2; exit 1; }
  if grep -q '^bad ' "$record"; then echo "with_real_plugin: the plugin sent a request the stand-in refused" >&2; exit 1; fi
  # Every rule created was deleted again (the comms were all closed).
  left=$(grep -o 'rules=[0-9]*' "$record" | tail -1)
  [ "$left" = rules=0 ] || { echo "with_real_plugin: flow-steering rules left installed at the end: $left" >&2; exit 1; }
fi
exit "$rc"
