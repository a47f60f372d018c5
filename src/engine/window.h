/* The sliding window: one direction of one channel (a transport comm), its
 * ring of requests and its queue of transfers waiting for room.
 *
 * The discipline is the strictest plugin contract, TCPX's (docs/UNPACK.md):
 *  - at most `cap` requests per comm; capacity is checked before posting;
 *  - only the oldest not-yet-done request of a comm is tested (FIFO);
 *  - a receive leaves the ring only after its consume stage finished and
 *    irecvConsumed (if the transport has it) was called, in FIFO order
 *    (tri-state: posted -> done in the transport -> consumed);
 *  - every request has a deadline (cfg.timeout_ms);
 *  - rc TPX_ESYSTEM from test is "not yet" (the plugin's transient rc 2;
 *    it never comes with done=1: docs/UNPACK.md, "Peer close").
 *
 * The window reports upward only through its return values and the `done`
 * callback it is given: it never fails a peer or finishes a transfer itself.
 * Its structs (window, wslot, wlink) are core.h's. */
#ifndef TPX_ENGINE_WINDOW_H
#define TPX_ENGINE_WINDOW_H

#include <stdint.h>

#include "engine/core.h"

struct tpx_peer;
struct tpx__op;
struct tpx__gpu_window;
struct tpx__pack_ring;

/* A chunk left the window (sent, or landed and consumed). Returns < 0 when
 * the peer can no longer go on (the window stops and passes it up). */
typedef int (*window_done_fn)(struct tpx__op *o, int ch);

int tpx__window_init(struct tpx__window *q, int ch, int is_recv, uint32_t cap);
void tpx__window_free(struct tpx__window *q);
/* Queue an op's chunks for this window (posted as room allows). */
void tpx__window_enqueue(struct tpx_peer *p, struct tpx__window *q, struct tpx__wlink *l);
/* Test, release and post what can move now. Returns the number of state
 * changes, or < 0 with tpx_last_error() naming peer, channel and chunk. */
int tpx__window_progress(struct tpx_peer *p, struct tpx__window *q, window_done_fn done);
/* Forget every request and pending chunk (the comm is being closed, which
 * frees the transport's requests). */
void tpx__window_purge(struct tpx_peer *p, struct tpx__window *q);

#endif
