/* Transfers: two-sided send/recv and one-sided write/read, prepared once and
 * posted many times.
 *
 * A transfer handle (tpx_xfer_t) is made by one of the tpx_xfer_prep_*
 * calls, posted with tpx_xfer_post (never blocks), completed with
 * tpx_xfer_test / tpx_xfer_wait, posted again as often as wanted once it
 * completed, and released with tpx_xfer_free. Registrations it uses must stay
 * registered until it is freed.
 *
 * Completion means:
 *  - write: every byte landed in the peer's memory and the peer acknowledged;
 *  - read: every byte landed in local memory;
 *  - send: the local buffer may be reused (bytes handed to the transport);
 *  - recv: the message landed; tpx_xfer_received() gives its length.
 * A one-sided access outside the peer's registrations (or their access
 * flags) fails with TPX_EACCES, and nothing outside them is touched.
 */
#ifndef TPX_XFER_H
#define TPX_XFER_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/endpoint.h"
#include "tpx/export.h"
#include "tpx/mem.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpx_xfer tpx_xfer_t;

typedef enum tpx_op { TPX_OP_WRITE = 1, TPX_OP_READ = 2, TPX_OP_SEND = 3, TPX_OP_RECV = 4 } tpx_op_t;

/* One (local, remote, length) triple of a one-sided transfer. */
typedef struct tpx_iov {
  tpx_mem_t *local;          /* local registration */
  size_t local_off;          /* offset in it */
  const tpx_rmem_t *remote;  /* remote descriptor (from tpx_load_remote_md) */
  uint64_t remote_off;       /* offset in the remote region */
  size_t len;                /* may be 0 */
} tpx_iov_t;

#define TPX_XFER_MAX_IOV 32768 /* triples per transfer */

/* Write n triples into the peer's memory; notif (may be NULL/0, at most
 * TPX_NOTIF_MAX bytes) is delivered to the peer after all of them landed. */
TPX_API int tpx_xfer_prep_write(tpx_peer_t *peer, const tpx_iov_t *iov, size_t n, const void *notif,
                                size_t notif_len, tpx_xfer_t **out);
/* Read n triples from the peer's memory into local memory. A notif, if any,
 * is delivered to the peer once it has sent the data. */
TPX_API int tpx_xfer_prep_read(tpx_peer_t *peer, const tpx_iov_t *iov, size_t n, const void *notif,
                               size_t notif_len, tpx_xfer_t **out);
/* Two-sided: a send matches the peer's oldest unmatched recv with the same
 * tag; a send larger than that recv fails on both sides with TPX_ETRUNC. */
TPX_API int tpx_xfer_prep_send(tpx_peer_t *peer, tpx_mem_t *mem, size_t off, size_t len,
                               uint64_t tag, tpx_xfer_t **out);
TPX_API int tpx_xfer_prep_recv(tpx_peer_t *peer, tpx_mem_t *mem, size_t off, size_t cap,
                               uint64_t tag, tpx_xfer_t **out);

/* Replace the notification sent with the next post of a write/read. */
TPX_API int tpx_xfer_set_notif(tpx_xfer_t *x, const void *notif, size_t len);

/* Start the transfer. Non-blocking. TPX_EUSAGE if it is still in flight;
 * TPX_ECLOSED etc. if the peer is gone. With a progress thread, a transfer
 * over 64 KiB is only queued here (no transport call; the thread starts it);
 * transfers leave in the order they were posted either way. */
TPX_API int tpx_xfer_post(tpx_xfer_t *x);
/* 0 when complete, TPX_EINPROGRESS while in flight, else the transfer's error
 * (tpx_last_error() names peer, channel and chunk). TPX_EUSAGE if never posted. */
TPX_API int tpx_xfer_test(tpx_xfer_t *x);
/* Wait for completion up to timeout_ms (< 0: forever). TPX_ETIMEDOUT when the
 * wait timed out (the transfer itself goes on). */
TPX_API int tpx_xfer_wait(tpx_xfer_t *x, int timeout_ms);
/* tpx_xfer_post then tpx_xfer_wait: a synchronous transfer in one call
 * (loops that re-post one prepared transfer; bindings, for which every call
 * into the library has a price). */
TPX_API int tpx_xfer_run(tpx_xfer_t *x, int timeout_ms);
/* Wait until any transfer of a set is no longer in flight, up to timeout_ms
 * (< 0: forever; 0: poll once). For serving loops with many transfers
 * outstanding: one call instead of testing each. xs[0..n) may hold NULL
 * slots (skipped); all others must belong to one endpoint. On return *index
 * is the lowest index of a settled transfer and the result is its status,
 * as tpx_xfer_test gives it (0, or its error); *index == n with
 * TPX_ETIMEDOUT when none settled in time (the transfers go on). A
 * completed transfer stays settled until it is posted again: re-post it or
 * take it out of the set (NULL) before the next call. A prepared transfer
 * that was never posted counts as settled (TPX_EUSAGE). */
TPX_API int tpx_xfer_wait_any(tpx_xfer_t *const *xs, size_t n, int timeout_ms, size_t *index);
/* Bytes received by a completed recv (the sender's length). */
TPX_API size_t tpx_xfer_received(const tpx_xfer_t *x);
TPX_API tpx_op_t tpx_xfer_op(const tpx_xfer_t *x);
/* Release. A transfer still in flight is finished or cancelled in the
 * background (its registrations stay pinned until then). NULL ok. */
TPX_API void tpx_xfer_free(tpx_xfer_t *x);

/* One-shot helpers: prep + post. The caller waits and frees. */
TPX_API int tpx_write(tpx_peer_t *peer, tpx_mem_t *local, size_t local_off,
                      const tpx_rmem_t *remote, uint64_t remote_off, size_t len, const void *notif,
                      size_t notif_len, tpx_xfer_t **out);
TPX_API int tpx_read(tpx_peer_t *peer, tpx_mem_t *local, size_t local_off, const tpx_rmem_t *remote,
                     uint64_t remote_off, size_t len, tpx_xfer_t **out);
TPX_API int tpx_send(tpx_peer_t *peer, tpx_mem_t *mem, size_t off, size_t len, uint64_t tag,
                     tpx_xfer_t **out);
TPX_API int tpx_recv(tpx_peer_t *peer, tpx_mem_t *mem, size_t off, size_t cap, uint64_t tag,
                     tpx_xfer_t **out);

#ifdef __cplusplus
}
#endif
#endif
