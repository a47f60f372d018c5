#!/usr/bin/env bash
# One-command GPU test run for a machine with an NVIDIA GPU:
#   build with CUDA -> GPU layer test (context balance, pointers, events)
#   -> unpack correctness (all modes, byte for byte) -> compute-sanitizer
#   memcheck on the unpack test -> unpack benchmark -> the engine's GPU path
#   between two processes (staging and every unpack mode, one and two GPUs,
#   chunks 4 KiB..4 MiB) -> packed chunks of small GPU entries -> receives into GPU memory on a CUDA-capable
#   transport (iflush) -> the built-in transport's unpack mode on the GPU
#   -> bits flipped in flight into GPU memory caught (integrity)
#   -> transport calls bound to the endpoint's GPU (2 GPUs) -> memcheck of the unpack kernels driven by the engine -> GPU0 -> GPU1
#   engine benchmark next to NCCL Socket (bench/gpu_engine_compare.sh)
#   -> disaggregated prefill / decode of a Llama-shaped model through tpx and
#   NIXL/TPX (tests/python/package/test_disagg_serving.py) -> Google's real
#   GPUDirect-TCPX plugin built from its tarball and run over the RxDM and
#   devmem TCP stand-ins (tests/tcpx/gpu_real_plugin.sh) -> PyTorch's NCCL and
#   NIXL's Python agent over that plugin and the stand-ins
#   (tests/gpu/tcpx_clients.sh) -> the engine over it next to NCCL over it and
#   the emulation (bench/tcpx_compare.sh).
# Every step runs even if an earlier one failed (except after a failed
# build); the exit status is non-zero if any step failed.
#
# Environment:
#   OUT         folder for the results: summary.txt, logs.tar.gz (every step's
#               log; the device tool brings back at most 8 files) and
#               gpubench.txt (the benchmark table). Without OUT the logs
#               stay unpacked in <build>/gpu-logs.
#   BUILD_DIR   build folder (default: build-gpu-run in the repository)
#   GPU_QUICK=1 smaller benchmark (fewer iterations, no slow modes)
#   STEPS       space-separated subset of: ctx unpack memcheck bench engine
#               pack flush integrity sockunpack gputcpx memcheck_engine python gpubench disagg
#               tcpxreal tcpx_nccl tcpx_nixl tcpx_bench
#   TPX_TESTDEPS_TOOLS, TPX_THIRD_PARTY, TPX_DEPS_CACHE  where the tcpx*
#               steps find the plugin's tarballs and protobuf's .debs and
#               build it (scripts/build-tcpx-plugin.sh)
#   PYTHON      interpreter for the python step (default /usr/bin/python3, else
#               python3; needs pytest and numpy; torch is used when present)
#   BENCH_SET   gpu_engine_compare.sh --set (final | sweep | quick; default final)
#   BENCH_ARGS  more gpu_engine_compare.sh arguments (e.g. --no-nccl)
#   NIXL_PREFIX a NIXL built by scripts/build-testdeps.sh --cuda: the disagg
#               step then also runs through NIXL/TPX (else those cases skip)
#
# Adding a step: write a function step_<name> below and append <name> to
# ALL_STEPS; build its target in TARGETS. Keep the number of log files small
# (the device tool brings back at most 8 files from $OUT).
set -u -o pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
BUILD=${BUILD_DIR:-$ROOT/build-gpu-run}
LOGS=$BUILD/gpu-logs
ALL_STEPS="ctx unpack memcheck bench engine pack flush integrity sockunpack gputcpx memcheck_engine python gpubench disagg tcpxreal"
ALL_STEPS="$ALL_STEPS tcpx_nccl tcpx_nixl tcpx_bench"
STEPS=${STEPS:-$ALL_STEPS}
TARGETS="test_gpu_ctx test_unpack_gpu tpx-unpack-bench test_engine_gpu test_engine_gpu_pack test_engine_flush test_engine_gpu_integrity test_gpu_tcpx tpx-bench tpx_shared"
[ -n "${NIXL_PREFIX:-}" ] && TARGETS="$TARGETS plugin_TPX"
[ -f "$ROOT/tests/gpu/test_sock_unpack_gpu.c" ] && TARGETS="$TARGETS test_sock_unpack_gpu"
rm -rf "$LOGS"
mkdir -p "$LOGS"
[ -n "${OUT:-}" ] && mkdir -p "$OUT"
SUMMARY=$LOGS/summary.txt
# Results to $OUT in three files, however the run ends.
pack() {
  [ -n "${OUT:-}" ] || return 0
  tar czf "$OUT/logs.tar.gz" -C "$LOGS" . 2>/dev/null || true
  cp "$SUMMARY" "$OUT/summary.txt" 2>/dev/null || true
  if [ -f "$LOGS/gpubench/summary.txt" ]; then cp "$LOGS/gpubench/summary.txt" "$OUT/gpubench.txt"; fi
  return 0
}
trap pack EXIT
: >"$SUMMARY"

export PATH=$PATH:/usr/local/cuda/bin
export TPX_LOG=${TPX_LOG:-warn}
failed=0

note() { echo "$*" | tee -a "$SUMMARY"; }

# run_step NAME TIMEOUT_S CMD...: output to $LOGS/NAME.log, tail echoed.
run_step() {
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS rc
  echo "=== $name: $*"
  timeout --kill-after=10 "$limit" "$@" >"$LOGS/$name.log" 2>&1
  rc=$?
  tail -n 60 "$LOGS/$name.log"
  if [ $rc -eq 0 ]; then
    note "PASS  $name ($((SECONDS - t0)) s)"
  elif [ $rc -eq 77 ]; then
    note "SKIP  $name (no GPU)"
  else
    [ $rc -eq 124 ] && note "      $name: timed out after ${limit} s"
    note "FAIL  $name (exit $rc, $((SECONDS - t0)) s; log $LOGS/$name.log)"
    failed=1
  fi
  return $rc
}

step_ctx() { run_step ctx 60 "$BUILD/tests/gpu/test_gpu_ctx"; }

step_unpack() { run_step unpack 150 "$BUILD/tests/gpu/test_unpack_gpu"; }

step_memcheck() {
  local cs
  cs=$(command -v compute-sanitizer || true)
  if [ -z "$cs" ]; then
    note "FAIL  memcheck (compute-sanitizer not found)"
    failed=1
    return 1
  fi
  # --quick: the sanitizer slows kernels down a lot; the subset still covers
  # every mode, every misalignment and fragments at both buffer ends.
  run_step memcheck 240 "$cs" --tool memcheck --leak-check full --error-exitcode 3 \
    "$BUILD/tests/gpu/test_unpack_gpu" --quick
}

# The engine between two processes: every path x GPU pair x chunk size.
step_engine() {
  if [ "${GPU_QUICK:-0}" = 1 ]; then
    run_step engine 200 "$BUILD/tests/gpu/test_engine_gpu" --quick
  else
    run_step engine 300 "$BUILD/tests/gpu/test_engine_gpu"
  fi
}

# Packed chunks of small GPU entries (gathered / scattered by one launch).
step_pack() { run_step pack 180 "$BUILD/tests/gpu/test_engine_gpu_pack"; }

# Receives straight into GPU memory on a CUDA-capable transport: iflush.
step_flush() { run_step flush 120 "$BUILD/tests/gpu/test_engine_flush"; }

# Integrity: bits flipped in flight into GPU memory are caught (the GPU's
# CRC-32C kernel in unpack mode, the CPU's over host staging).
step_integrity() { run_step integrity 180 "$BUILD/tests/gpu/test_engine_gpu_integrity"; }

step_sockunpack() {
  if [ -x "$BUILD/tests/gpu/test_sock_unpack_gpu" ]; then
    run_step sockunpack 120 "$BUILD/tests/gpu/test_sock_unpack_gpu"
  else
    note "SKIP  sockunpack (not built)"
  fi
}

# The TCPX device rules: no host receives on UNPACK comms, CUDA registrations
# on 4 KiB boundaries past the first GiB too, transport calls
# bound to the endpoint's GPU (that part needs 2 GPUs).
step_gputcpx() { run_step gputcpx 120 "$BUILD/tests/gpu/test_gpu_tcpx"; }

# The unpack kernels as the engine drives them (one process, two endpoints):
# unpack of bounce pages and the staging copies (SM copies through the mapping).
step_memcheck_engine() {
  local cs
  cs=$(command -v compute-sanitizer || true)
  [ -n "$cs" ] || { note "FAIL  memcheck_engine (compute-sanitizer not found)"; failed=1; return 1; }
  run_step memcheck_engine 240 "$cs" --tool memcheck --error-exitcode 3 --target-processes all \
    "$BUILD/tests/gpu/test_engine_gpu" --one-process-only
}

# The Python package's pytest suite with CUDA memory on both sides (torch
# tensors when torch is installed, else cudaMalloc through ctypes), then the
# 64 MiB CUDA-tensor write benchmark through tpx next to tpx-bench.
# PYTHON, else the first of Debian's and PATH's python3 that imports $1
# (GPU images keep pytest, numpy, torch in a virtual environment on PATH).
find_python() {
  local py=${PYTHON:-} c
  if [ -z "$py" ]; then
    for c in /usr/bin/python3 "$(command -v python3 || true)"; do
      [ -n "$c" ] && [ -x "$c" ] && "$c" -c "import $1" 2>/dev/null && { py=$c; break; }
    done
    py=${py:-python3}
  fi
  echo "$py"
}

step_python() {
  local py
  py=$(find_python "pytest, numpy")
  if ! "$py" -c "import pytest, numpy" 2>/dev/null; then
    note "FAIL  python ($py lacks pytest or numpy: apt-get install python3-pytest python3-numpy)"
    failed=1
    return 1
  fi
  # the compiled fast path when Python's headers are there (else ctypes alone)
  cmake --build "$BUILD" --target tpx_py_speedups >>"$LOGS/build.log" 2>&1 || true
  run_step python 400 env TPX_PY_MEM=cuda TPX_LIBRARY="$BUILD/libtpx.so" PYTHONPATH="$ROOT/python:$BUILD/python" \
    PYTHONDONTWRITEBYTECODE=1 TPX_SOCKET_IFNAME=lo "$py" -m pytest -q -p no:cacheprovider "$ROOT/tests/python/package" \
    --ignore "$ROOT/tests/python/package/test_disagg_serving.py"
  local gpus=0,0
  [ "$(nvidia-smi -L 2>/dev/null | wc -l)" -ge 2 ] && gpus=0,1
  run_step python_bench 300 env TPX_LIBRARY="$BUILD/libtpx.so" PYTHONPATH="$ROOT/python:$BUILD/python" \
    TPX_SOCKET_IFNAME=lo "$py" "$ROOT/bench/python_vs_bench.py" --build "$BUILD" --mem cuda --size 64M \
    --gpus "$gpus" --rounds 3
  grep RESULT "$LOGS/python_bench.log" >>"$SUMMARY"
}

step_gpubench() {
  local n
  n=$(nvidia-smi -L 2>/dev/null | wc -l)
  if [ "$n" -lt 2 ]; then
    note "SKIP  gpubench (needs 2 GPUs, $n present)"
    return 0
  fi
  # shellcheck disable=SC2086
  run_step gpubench 400 "$ROOT/bench/gpu_engine_compare.sh" --build "$BUILD" --out "$LOGS/gpubench" \
    --set "${BENCH_SET:-final}" ${BENCH_ARGS:-}
  [ -f "$LOGS/gpubench/summary.txt" ] && cat "$LOGS/gpubench/summary.txt" >>"$SUMMARY"
}

# A Llama-shaped model's KV cache from a prefill process (GPU 0) into scattered
# blocks of a decode process's paged pool (GPU 1, or GPU 0 alone), through tpx
# and NIXL/TPX: same greedy tokens and bitwise first-step logits as prefill's
# own continuation; a peer killed mid-transfer is an error within
# TPX_TIMEOUT_MS, never a token.
step_disagg() {
  local py env=()
  py=$(find_python "pytest, numpy, torch, transformers")
  if [ -n "${NIXL_PREFIX:-}" ] && [ -f "$NIXL_PREFIX/env.sh" ] && [ -f "$BUILD/nixl-plugins/libplugin_TPX.so" ]; then
    # shellcheck disable=SC1091
    env=(PYTHONPATH="$ROOT/python:$BUILD/python:$(. "$NIXL_PREFIX/env.sh" && echo "$PYTHONPATH")"
      LD_LIBRARY_PATH="$(. "$NIXL_PREFIX/env.sh" && echo "$LD_LIBRARY_PATH")"
      NIXL_PLUGIN_DIR="$BUILD/nixl-plugins")
  else
    env=(PYTHONPATH="$ROOT/python:$BUILD/python")
    note "      disagg: no NIXL (NIXL_PREFIX unset or the plugin not built): NIXL cases skip"
  fi
  run_step disagg 600 env TPX_LIBRARY="$BUILD/libtpx.so" "${env[@]}" PYTHONDONTWRITEBYTECODE=1 \
    TPX_SOCKET_IFNAME=lo "$py" -m pytest -v -rs -p no:cacheprovider "$ROOT/tests/python/package/test_disagg_serving.py"
}

# Google's real GPUDirect-TCPX plugin, built (cached in TPX_DEPS_CACHE) by
# scripts/build-tcpx-plugin.sh, over the RxDM and devmem TCP stand-ins and
# this machine's CUDA driver: conformance, the engine 4 KiB..256 MiB in host
# and GPU memory, GPU 0 -> GPU 1, faults (tests/tcpx/gpu_real_plugin.sh).
step_tcpxreal() {
  if [ -n "$tcpxreal_why" ]; then
    note "SKIP  tcpxreal ($tcpxreal_why)"
    return 0
  fi
  if ! "$ROOT/scripts/build-tcpx-plugin.sh" --check >"$LOGS/tcpxreal_check.log" 2>&1; then
    note "SKIP  tcpxreal ($(tail -n 1 "$LOGS/tcpxreal_check.log"))"
    return 0
  fi
  run_step tcpxreal_build 600 "$ROOT/scripts/build-tcpx-plugin.sh" || return 1
  local plugin
  plugin=$(tail -n 1 "$LOGS/tcpxreal_build.log")
  run_step tcpxreal 900 "$ROOT/tests/tcpx/gpu_real_plugin.sh" "$BUILD" "$plugin"
  grep -E 'ver\. |^(PASS|FAIL|SKIP)  tcpx-real' "$LOGS/tcpxreal.log" | sed 's/^\[tpx [^]]*\] /      /' >>"$SUMMARY"
}

# Google's GPUDirect-TCPX plugin (scripts/build-tcpx-plugin.sh, cached; it
# prints the plugin's path last) and the stand-ins, built once for the steps
# below; prints the plugin's path.
tcpx_plugin=""
tcpx_prepare() {
  if [ -z "$tcpx_plugin" ]; then
    "$ROOT/scripts/build-tcpx-plugin.sh" --check >>"$LOGS/tcpx_plugin.log" 2>&1 &&
      tcpx_plugin=$("$ROOT/scripts/build-tcpx-plugin.sh" 2>>"$LOGS/tcpx_plugin.log" | tail -n 1)
  fi
  [ -n "$tcpx_plugin" ] && [ -f "$tcpx_plugin" ] && [ -x "$BUILD/tests/fakes/tpx-rxdm-standin" ]
}

# NCCL (PyTorch's, two processes on GPU 0 and GPU 1) and NIXL's Python agent
# (TPX backend, VRAM at both ends) over the real plugin with the RxDM stand-in
# running and the devmem stand-in preloaded; every byte checked, NCCL's log
# showing the plugin's name and version (tests/gpu/tcpx_clients.sh).
tcpx_client_step() {
  local what=$1 limit=$2
  if [ -n "$tcpxreal_why" ]; then
    note "SKIP  tcpx_$what ($tcpxreal_why)"
    return 0
  fi
  if ! tcpx_prepare; then
    note "FAIL  tcpx_$what (the plugin or the stand-ins did not build: $(tail -n 1 "$LOGS/tcpx_plugin.log" 2>/dev/null); $LOGS/build.log)"
    failed=1
    return 1
  fi
  run_step "tcpx_$what" "$limit" env NIXL_PREFIX="${NIXL_PREFIX:-}" "$ROOT/tests/gpu/tcpx_clients.sh" "$what" \
    --build "$BUILD" --plugin "$tcpx_plugin"
  [ $? = 77 ] && grep -m 1 'SKIPPED' "$LOGS/tcpx_$what.log" | sed 's/^/      /' >>"$SUMMARY"
  return 0
}
step_tcpx_nccl() { tcpx_client_step nccl 420; }
step_tcpx_nixl() { tcpx_client_step nixl 300; }

# The engine GPU 0 -> GPU 1 over the real plugin next to NCCL over the same
# plugin and stand-ins, and next to the emulation (TPX_SOCK_UNPACK=1): the
# issue's targets as ratios (bench/tcpx_compare.sh, a benchmark, not a test).
step_tcpx_bench() {
  local n
  n=$(nvidia-smi -L 2>/dev/null | wc -l)
  if [ "$n" -lt 2 ]; then
    note "SKIP  tcpx_bench (needs 2 GPUs, $n present)"
    return 0
  fi
  if [ -n "$tcpxreal_why" ]; then
    note "SKIP  tcpx_bench ($tcpxreal_why)"
    return 0
  fi
  tcpx_prepare || { note "FAIL  tcpx_bench (the plugin or the stand-ins did not build)"; failed=1; return 1; }
  run_step tcpx_bench 500 env TPX_TCPX_REAL_PLUGIN="$tcpx_plugin" ROUNDS="${TCPX_BENCH_ROUNDS:-3}" \
    ITERS64="${TCPX_BENCH_ITERS:-20}" LOGS="$LOGS/tcpx_bench" "$ROOT/bench/tcpx_compare.sh" "$BUILD"
  sed -n '/^medians/,/^with_real_plugin/p' "$LOGS/tcpx_bench.log" | grep -v '^with_real_plugin' >>"$SUMMARY"
}

step_bench() {
  if [ "${GPU_QUICK:-0}" = 1 ]; then
    run_step bench 200 "$BUILD/tpx-unpack-bench" --iters 5 --warmup 1 --quick
  else
    run_step bench 200 "$BUILD/tpx-unpack-bench"
  fi
}

{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(uname -n) $(uname -r) $(nproc) cores"
  nvidia-smi --query-gpu=index,name,memory.total,driver_version,pci.bus_id --format=csv,noheader 2>&1 || true
  nvcc --version 2>&1 | tail -n 2 || true
  git -C "$ROOT" log -1 --format='commit %h %s' 2>/dev/null || true
} | tee -a "$SUMMARY"

# Fallback when the whole library does not build (other layers mid-change):
# compile just src/common + src/cuda and the GPU programs directly, into the
# same paths, so the GPU pieces can still be checked. Reported as a failure.
build_gpu_pieces() {
  local o=$BUILD/gpu-pieces f
  local cflags=(-std=gnu11 -O2 -g -Wall -Wextra -Werror -DTPX_HAVE_CUDA=1 -I"$ROOT/include" -I"$ROOT/src"
    -I/usr/local/cuda/include)
  local libs=(-L/usr/local/cuda/lib64 -Wl,-rpath,/usr/local/cuda/lib64 -lcudart -lstdc++ -lpthread -ldl)
  # src/common's keys need libcrypto; a machine without its -dev package
  # still has the runtime library.
  if ldconfig -p | grep -q 'libcrypto\.so '; then libs+=(-lcrypto); else libs+=(-l:libcrypto.so.3); fi
  mkdir -p "$o" "$BUILD/tests/gpu" || return 1
  for f in "$ROOT"/src/cuda/*.cu; do
    nvcc -arch=sm_90 -O3 -lineinfo -Xcompiler=-Wall,-Wextra --Werror=all-warnings -DTPX_HAVE_CUDA=1 \
      -I"$ROOT/include" -I"$ROOT/src" -c "$f" -o "$o/$(basename "$f").o" || return 1
  done
  for f in "$ROOT"/src/common/*.c "$ROOT"/src/cuda/*.c "$ROOT"/src/tcpx/contract.c; do
    gcc "${cflags[@]}" -c "$f" -o "$o/$(basename "$f").o" || return 1
  done
  for t in test_gpu_ctx test_unpack_gpu; do
    gcc "${cflags[@]}" -I"$ROOT/tests/gpu" "$ROOT/tests/gpu/$t.c" "$o"/*.o "${libs[@]}" \
      -o "$BUILD/tests/gpu/$t" || return 1
  done
  gcc "${cflags[@]}" "$ROOT/tools/tpx-unpack-bench.c" "$o"/*.o "${libs[@]}" -o "$BUILD/tpx-unpack-bench"
}

cfg=()
command -v ninja >/dev/null && cfg=(-G Ninja)
# The tcpx* steps' programs (tests/fakes, tests/conformance) are built
# with the tests, which need cmocka; GPU machines have none: Debian's, from
# the .debs scripts/pack-testdeps-tools.sh carries, when they are there.
# Without cmocka they are not built and the step skips, saying so.
tcpxreal_why=""
case " $STEPS " in
*" tcpxreal "* | *" tcpx_"*)
  cm_debs=$(ls "${TPX_TESTDEPS_TOOLS:-/nonexistent}"/debs/libcmocka*.deb 2>/dev/null)
  if ! ldconfig -p | grep -q 'libcmocka\.so'; then
    if [ -n "$cm_debs" ]; then
      for d in $cm_debs; do dpkg-deb -x "$d" "$BUILD/cmocka"; done
      cfg+=(-DCMOCKA_LIB="$BUILD/cmocka/usr/lib/x86_64-linux-gnu/libcmocka.so.0" -DCMOCKA_INCLUDE="$BUILD/cmocka/usr/include")
    else
      tcpxreal_why="no cmocka here nor in \$TPX_TESTDEPS_TOOLS/debs (scripts/pack-testdeps-tools.sh)"
    fi
  fi
  [ -z "$tcpxreal_why" ] && TARGETS="$TARGETS tpx-info tpx-conformance tpx-rxdm-standin tpx-devmem-standin tpx-netbench" ;;
esac
t0=$SECONDS
if {
  cmake -S "$ROOT" -B "$BUILD" "${cfg[@]}" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPX_CUDA=ON &&
    # shellcheck disable=SC2086
    cmake --build "$BUILD" -j "$(nproc)" --target $TARGETS
} >"$LOGS/build.log" 2>&1; then
  note "PASS  build ($((SECONDS - t0)) s)"
else
  grep -E "error|Error" "$LOGS/build.log" | head -n 20
  note "FAIL  build of the whole library (log $LOGS/build.log); building the GPU pieces alone"
  failed=1
  if ! build_gpu_pieces >>"$LOGS/build.log" 2>&1; then
    tail -n 40 "$LOGS/build.log"
    note "FAIL  build of the GPU pieces"
    exit 1
  fi
  note "PASS  build of the GPU pieces alone"
fi

for s in $STEPS; do
  "step_$s" || true
done

echo "=== summary"
cat "$SUMMARY"
exit $failed
