/* tools/internal.h: the library internals that some tools use. Tools only:
 * never installed, not part of the API, no stability promise.
 *
 * Tools use the public API (the headers in include/tpx/) and nothing else,
 * except the ones that include this header, which CMakeLists.txt lists in
 * TPX_INTERNAL_TOOLS: only those get src/ on their include path, and like
 * every tool they link the static libtpx.a, where the internal symbols that
 * libtpx.so hides (-fvisibility=hidden) still link. Who uses what, and why:
 *
 *  - tpx-bench: cuda/gpu.h (tpx__gpu_retain/release, _malloc/_free, _memcpy,
 *    _device_count) for its --mem cuda buffers in the library's own primary-
 *    context references, and tpx__gpu_ctx_refs/_ctx_retained to report that
 *    the engine released every context it retained at teardown; and
 *    engine/wire.h's WIRE_VERSION for --version (which peers it talks to).
 *    Its sources in tools/bench/ also use common/config.h (the environment's
 *    number parser and ranges, so --chunk, --port, --channels, --timeout-ms
 *    are checked by the same rules as TPX_CHUNK_BYTES etc.) and common/le.h
 *    (its client/server messages).
 *  - tpx-netbench: common/config.h, for the same reason (--size, --port,
 *    --timeout-ms).
 *  - tpx-soak: cuda/gpu.h for its --mem cuda regions (as tpx-bench) and
 *    common/config.h's number parser for its sizes.
 *  - tpx-unpack-bench: cuda/unpack.h, the TCPX unpack kernels themselves
 *    (tpx_unpacker_*, tpx__unpacker_submit/_wait/_sync, tpx__tcpx_unpack_cpu for the
 *    reference result), which the engine drives internally and no public call
 *    reaches; and cuda/gpu.h for its pinned and device buffers.
 *
 *  - tpx-setup-load: engine/wire.h and sock/wire.h, to write HELLOs and
 *    transport handles by hand as a peer that never finishes its setup
 *    would (docs/SECURITY.md, "Setup-time CPU"), and common/le.h.
 *
 * tpx-info needs none of it (tpx/net.h is public). */
#ifndef TPX_TOOLS_INTERNAL_H
#define TPX_TOOLS_INTERNAL_H

#include "cuda/gpu.h"
#include "cuda/unpack.h"
#include "engine/wire.h"

#endif
