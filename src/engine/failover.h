/* A lost channel costs bandwidth, not the transfer (docs/RELIABILITY.md).
 *
 * A channel is lost when one of its comms fails, or when its requests make
 * no progress for TPX_CHANNEL_STALL_MS while another channel of the peer
 * moves (a link that went down without a reset). The side that sees it
 * closes both comms, tells the peer (CHAN_DOWN) and announces a pattern
 * without it (stripe.h). Then, per transfer with chunks on it:
 *  - the data's sender asks the receiver (CHAN_ASK) whether it still needs
 *    them, and counts them as done meanwhile (the transfer ends only once
 *    every answer is in: op->await_mask);
 *  - the receiver answers (CHAN_VERDICT) from what landed: every chunk on
 *    the channel, or some still missing (then all of them come again);
 *  - the sender adds a resend layer (route.h) over the channels alive,
 *    queues it, and announces it (CHAN_RESEND); the receiver queues the same.
 * Every layer the sender made before its ASK was applied by the receiver
 * before it answers (one ordered control stream), and no later layer uses a
 * lost channel, so an answer is never stale. A chunk that arrives twice
 * lands the same bytes; the op (and its notification) finishes once.
 * Only with a peer that said HELLO_F_SCHED; otherwise, or when no channel is
 * left, a channel's error fails the peer as before. */
#ifndef TPX_ENGINE_FAILOVER_H
#define TPX_ENGINE_FAILOVER_H

#include <stdint.h>

#include "engine/wire.h"

struct tpx_peer;
struct tpx__op;

/* Data progress of every channel not lost; a channel's failure is handled
 * here while others are left. Returns the state changes, or < 0 when the
 * peer can no longer go on (detail recorded). */
int tpx__failover_progress(struct tpx_peer *p);
/* From the endpoint's deadline scan: stalled channels, channels rejoining.
 * 0, or < 0 when the peer can no longer go on. */
int tpx__failover_tick(struct tpx_peer *p, uint64_t now);
/* MSG_CHAN. 0, or < 0 when the peer must fail (detail recorded). */
int tpx__failover_on_frame(struct tpx_peer *p, const struct tpx__wire_frame *f);

#endif
