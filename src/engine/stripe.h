/* Striping that follows each channel's speed: the sender measures what each
 * channel's send window moves while it has requests in the transport, turns
 * the speeds into a pattern (route.h: slots in proportion, at least one per
 * channel not lost) and announces it (MSG_SCHED) before the transfers that
 * use it. Only with a peer that said HELLO_F_SCHED (p->sched); others keep
 * the fixed pattern. */
#ifndef TPX_ENGINE_STRIPE_H
#define TPX_ENGINE_STRIPE_H

#include <stdint.h>

#include "engine/wire.h"

struct tpx_peer;

/* The peer became ready: both patterns fixed over its channels. */
void tpx__stripe_init(struct tpx_peer *p);
/* Every STRIPE_PERIOD_MS: the speeds measured, the pattern re-made and
 * announced when a channel's share moved. 0, or < 0 (the control connection
 * failed; detail recorded). */
int tpx__stripe_tick(struct tpx_peer *p, uint64_t now);
/* Channel c's speed measured afresh from now (it was lost, or came back). */
void tpx__stripe_reset(struct tpx_peer *p, int c);
/* A channel was lost or came back: a new pattern now, announced. */
int tpx__stripe_replan(struct tpx_peer *p);
/* CHAN_RATE from the peer: our chunks on channel c landed at kbs KB/s. */
void tpx__stripe_on_rate(struct tpx_peer *p, int c, uint32_t kbs);
/* MSG_SCHED from the peer: the pattern of its next transfers. 0, or
 * TPX_EPROTO (detail recorded; the caller fails the peer). */
int tpx__stripe_on_sched(struct tpx_peer *p, const struct tpx__wire_frame *f);

#endif
