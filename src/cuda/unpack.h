/* The GPU unpacker: gathers received chunks under the TCPX receive
 * contract (tcpx/contract.h, docs/UNPACK.md) into GPU memory.
 *
 * A received chunk is `cnt` loadMeta entries {src_off, len, dst_off}: copy
 * `len` bytes from bounce + src_off to dst + dst_off for each. The bounce
 * buffer is device memory (GPUDirect) or pinned host memory mapped into the
 * GPU (the built-in transport's emulation); dst is the receive buffer. The
 * layout, the entry validation and the CPU gather for host memory
 * (tpx__tcpx_unpack_cpu) belong to the contract; this is the GPU side.
 *
 * tpx_unpacker_t: one GPU per unpacker, persistent streams, a pooled event
 * per chunk. Modes:
 *   kernel  one launch per chunk; 16-byte vector copies where alignment
 *           allows, exact tails otherwise; one warp per fragment (large
 *           fragments are sliced across warps);
 *   d2d     one cudaMemcpyAsync per fragment (adjacent ones merged);
 *   host    gather through a pinned host buffer (debug; synchronous).
 * Submission is asynchronous and returns a ticket; tickets complete in
 * submission order, so the caller polls the oldest and calls irecvConsumed
 * in FIFO order once it is done.
 *
 * Every entry is checked against the sizes of the bounce buffer and of the
 * destination before any copy is queued (tpx__tcpx_unpack_validate): a bad entry
 * is TPX_EPROTO and nothing of that chunk is copied.
 */
#ifndef TPX_CUDA_UNPACK_H
#define TPX_CUDA_UNPACK_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/unpack_names.h"
#include "tcpx/contract.h"

#ifdef __cplusplus
extern "C" {
#endif

/* ---------------- GPU unpacker ---------------- */

typedef struct tpx_unpack_opts {
  int mode;               /* TPX_UNPACK_*; default kernel */
  int desc;               /* TPX_UNPACK_DESC_*; default TPX_UNPACK_DESC_DEFAULT */
  uint32_t max_frags;     /* entries per chunk; 0 -> 2048 */
  uint32_t max_inflight;  /* chunks submitted and not yet completed; 0 -> 32 */
  int threads;            /* kernel block size (multiple of 32, <= 512); 0 -> 256 */
  int nstreams;           /* streams chunks rotate over (1..8; host mode: 1); 0 -> default */
  int d2d_batch;          /* d2d: 1 = one cudaMemcpyBatchAsync per chunk, 0 = one
                             cudaMemcpyAsync per run; -1 -> default (batch) */
  size_t host_stage_bytes; /* host mode: initial staging size; 0 -> 4 MiB (grows) */
} tpx_unpack_opts_t;

#define TPX_UNPACK_DESC_DEFAULT TPX_UNPACK_DESC_PARAM
#define TPX_UNPACK_NSTREAMS_DEFAULT 4
#define TPX_UNPACK_MAX_STREAMS 8

void tpx__unpacker_opts_default(tpx_unpack_opts_t *o);

typedef struct tpx_unpacker tpx_unpacker_t;

/* Creates the unpacker's stream, event pool and buffers on GPU dev (holds a
 * reference on its primary context until destroy). TPX_ENOTSUP without CUDA
 * or without a usable GPU. */
int tpx__unpacker_create(int dev, const tpx_unpack_opts_t *opts, tpx_unpacker_t **out);
/* Waits for submitted work, then frees everything. NULL ok. */
void tpx__unpacker_destroy(tpx_unpacker_t *u);

typedef struct tpx_unpack_chunk {
  const tpx_unpack_meta_t *meta;     /* entries, readable by the CPU */
  const tpx_unpack_meta_t *meta_dev; /* same entries as the GPU sees them (DESC_DIRECT only) */
  uint32_t cnt;
  const void *bounce;   /* bounce base as the GPU addresses it */
  size_t bounce_bytes;  /* bounds for src_off + len */
  void *dst;            /* receive buffer (GPU-addressable) */
  size_t dst_bytes;     /* bounds for dst_off + len */
} tpx_unpack_chunk_t;

/* Queue the unpack of one chunk. On success *ticket identifies it (tickets
 * count up from 0 per unpacker). The entries may be overwritten once this
 * returns, except with DESC_DIRECT. Consecutive chunks go to the unpacker's
 * streams in turn, so they may run concurrently on the GPU; completion is
 * still reported in ticket order. TPX_EAGAIN when max_inflight chunks are
 * still running (poll, then retry); TPX_EPROTO for a bad entry (nothing
 * queued). */
int tpx__unpacker_submit(tpx_unpacker_t *u, const tpx_unpack_chunk_t *c, uint64_t *ticket);

/* Non-blocking: 1 if chunk `ticket` and every earlier one have been
 * unpacked, 0 if not yet; TPX_EINVAL for a ticket never issued; TPX_ECUDA if
 * the GPU work failed. */
int tpx__unpacker_done(tpx_unpacker_t *u, uint64_t ticket);

/* Block until `ticket` is done, at most timeout_ms (< 0: no limit);
 * TPX_ETIMEDOUT when it passes. */
int tpx__unpacker_wait(tpx_unpacker_t *u, uint64_t ticket, int timeout_ms);

/* Everything submitted so far is done when this returns 0. */
int tpx__unpacker_sync(tpx_unpacker_t *u);

/* The unpacker's streams (cudaStream_t), e.g. for timing events: stream i
 * of tpx__unpacker_nstreams; tpx__unpacker_stream is stream 0. */
void *tpx__unpacker_stream(tpx_unpacker_t *u);
int tpx__unpacker_nstreams(const tpx_unpacker_t *u);
void *tpx__unpacker_stream_at(tpx_unpacker_t *u, int i);
int tpx__unpacker_device(const tpx_unpacker_t *u);
/* The stream chunk `ticket` was queued on (tpx_gpu_stream_t): work queued
 * there after it runs after its copies. */
struct tpx_gpu_stream *tpx__unpacker_ticket_stream(tpx_unpacker_t *u, uint64_t ticket);

typedef struct tpx_unpack_stats {
  uint64_t chunks;   /* submitted */
  uint64_t frags;    /* entries submitted */
  uint64_t bytes;    /* payload bytes submitted */
  uint64_t launches; /* kernel launches or copy calls issued */
  uint64_t events_created; /* pooled events ever created (stays small) */
} tpx_unpack_stats_t;
void tpx__unpacker_get_stats(tpx_unpacker_t *u, tpx_unpack_stats_t *st);

#ifdef __cplusplus
}
#endif
#endif
