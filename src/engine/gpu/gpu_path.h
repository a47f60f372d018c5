/* The engine's GPU data path: CUDA registrations, host staging for
 * transports that take only host pointers, and the receive-side unpack of
 * UNPACK (TCPX-style) transports. The engine calls in through a few hooks;
 * everything else lives in gpu_mem.c (registrations, per-GPU resources),
 * staging.c (pinned arenas, device<->host copies) and unpack_stage.c (slot
 * counting, loadMeta, unpack, FIFO consumption).
 *
 * Per chunk, the path is chosen from the memory type and the transport:
 *
 *   memory  transport                     send                   receive
 *   host    host-only / CUDA-capable      as before              as before
 *   host    UNPACK                        as before              irecv, CPU gather from the bounce pages
 *   CUDA    host-only (our default)       D2H into staging,      irecv into staging, H2D
 *                                         isend from staging
 *   CUDA    CUDA-capable, HOST type       isend(device ptr)      irecv(device ptr), then
 *                                                                iflush (GPUDirect RDMA:
 *                                                                the bytes are visible to
 *                                                                the GPU once it completed)
 *   CUDA    UNPACK                        isend(device ptr)      irecv, GPU unpack (kernel/d2d/host)
 *
 * Staging arenas are per comm direction (one pinned block, registered once
 * with that comm, used as a byte ring: allocation in posting order, release
 * in ring order, both FIFO), so a chunk costs no allocation and no sync:
 * one async copy and one pooled event on a persistent stream.
 *
 * Threads: all hooks run with ep->lock held (progress thread or a caller
 * driving progress). Every CUDA call goes through src/cuda/gpu.h, which enters
 * the right device's primary context and restores the caller's; the progress
 * thread additionally pins the endpoint's first GPU once.
 */
#ifndef TPX_ENGINE_GPU_PATH_H
#define TPX_ENGINE_GPU_PATH_H

#include <stddef.h>
#include <stdint.h>

#include "cuda/gpu.h"
#include "engine/gpu/gpu_mem.h"
#include "tpx/mem.h"

struct tpx_peer;
struct tpx__window;
struct tpx__wslot;
struct tpx__wlink;
struct tpx_mem;

/* Endpoint lifecycle. init runs once the transport is open (it reads its
 * properties and installs ep->consume when needed); fini after every peer and
 * registration is gone (streams, pools, unpackers, context references). */
int tpx__gpu_ep_init(tpx_endpoint_t *ep);
void tpx__gpu_ep_fini(tpx_endpoint_t *ep);

/* window.c's post_one, before the post: where the chunk [m->base + off, +len)
 * really goes. Returns GPU_POST_DEFAULT (post m's own memory),
 * GPU_POST_STAGED (*data / *mh set to a staging slot, or to the landing region
 * for an UNPACK receive into host memory), GPU_POST_WAIT (not
 * ready: the device-to-host copy is still running or no staging room;
 * back-pressure) or < 0 (error, tpx_err set). Idempotent until tpx__gpu_post_done. */
/* GPU_POST_*: gpu_mem.h. */
int tpx__gpu_post_prep(struct tpx_peer *p, struct tpx__window *q, struct tpx__wlink *l, struct tpx_mem *m, uint64_t off,
                       uint64_t len, void **data, void **mh);
/* The transport accepted the request for the chunk at l->cur, at ring
 * index q->tail % q->cap (mh: the memory handle it was posted with). */
void tpx__gpu_post_done(struct tpx_peer *p, struct tpx__window *q, const struct tpx__wlink *l, struct tpx_mem *m,
                        uint64_t off, uint64_t len, void *mh, int prep);
/* Where this side's CPU sees a receive's bytes (integrity.h): GPU_VIEW_NOW
 * at *at once the transport completed it (host memory, host staging),
 * GPU_VIEW_CONSUMED once its consume stage ran (an UNPACK gather into host
 * memory), GPU_VIEW_NONE where only a GPU does. */
enum { GPU_VIEW_NOW = 0, GPU_VIEW_CONSUMED, GPU_VIEW_NONE };
int tpx__gpu_recv_view(const struct tpx__window *q, const struct tpx__wslot *s, const void **at, int *dev);
/* The CRC-32C of GPU memory [p, p + len) on GPU dev, by its kernel
 * (cuda/crc.h), for bytes only a GPU sees. start: 0 (*ticket set),
 * TPX_EAGAIN (every slot busy: again later), TPX_ENOTSUP (no sums on this
 * GPU: the chunk goes unchecked), other < 0 errors. poll: 1 done (*sum), 0
 * not yet, < 0. drop: no longer wanted (its transfer ended). */
int tpx__gpu_sum_start(tpx_endpoint_t *ep, int dev, const void *p, uint64_t len, uint64_t *ticket);
/* A receive's sum already queued with its unpack (on the unpack's stream,
 * right after it): 1 and its ticket, taken over by the caller; else 0. */
int tpx__gpu_recv_sum_taken(const struct tpx__window *q, const struct tpx__wslot *s, uint64_t *ticket);
int tpx__gpu_sum_poll(tpx_endpoint_t *ep, int dev, uint64_t ticket, uint32_t *sum);
void tpx__gpu_sum_drop(tpx_endpoint_t *ep, int dev, uint64_t ticket);
/* This side moves packed chunks (plan.h) whose pieces lie in GPU memory:
 * its GPU staging goes both ways (a host-only transport, our built-in one
 * included), so a packed chunk is gathered into and scattered from the
 * staging arena (pack_runs.h). Elsewhere (CUDA pointers, UNPACK) the GPU
 * path moves one entry per chunk. */
int tpx__gpu_pack_ok(const tpx_endpoint_t *ep);
/* tpx__window_progress: start device-to-host copies of upcoming chunks (sends) so
 * they are ready when ring slots free up. */
void tpx__gpu_window_ahead(struct tpx_peer *p, struct tpx__window *q);
/* The comm is about to close (peer failed or closed): wait for copies and
 * unpacks still touching memory, deregister and free the staging arena. */
void tpx__gpu_window_purge(struct tpx_peer *p, struct tpx__window *q);
/* tpx__window_free: whatever purge did not free. */
void tpx__gpu_window_free(struct tpx__window *q);

#endif
