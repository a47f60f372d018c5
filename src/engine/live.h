/* Liveness of a ready peer: a peer that stops answering fails within
 * TPX_PEER_TIMEOUT_MS, a peer that is merely busy never does
 * (docs/RELIABILITY.md, "A silent peer").
 *
 * Any byte that comes on the control connection is a sign of life, so a busy
 * stream costs nothing extra. When it has been quiet for a quarter of the
 * timeout we send MSG_PING (PING_ASK); the peer's progress pass answers it
 * (PING_ANSWER), so an answer proves its engine runs, not only its kernel.
 * Only a peer that sent HELLO_F_LIVE is pinged and judged by its silence:
 * it promised a progress thread that answers while its application is busy.
 * An endpoint without one (the application drives progress) does not send
 * the flag, and neither does an older peer; for both, what is promised is
 * the kernel's: TCP keepalive and TCP_USER_TIMEOUT on the control socket,
 * which notice a dead host or a lost route (not a stopped process).
 *
 * Silence is only counted while we ourselves run: a gap between our steps
 * longer than the ping interval (our process descheduled or stopped, an
 * application that drove no progress) is not the peer's. */
#ifndef TPX_ENGINE_LIVE_H
#define TPX_ENGINE_LIVE_H

#include <stdint.h>

#include "tpx/endpoint.h"

struct tpx_peer;
struct tpx__wire_frame;

/* Its state, struct tpx__live, is the peer's (peer.h); control.c's reads set
 * live.rx when bytes came. */

/* HELLO_F_LIVE when this endpoint answers pings on its own (its progress
 * thread runs), else 0. */
uint32_t tpx__live_flag(const tpx_endpoint_t *ep);
/* The peer's HELLO flags. */
void tpx__live_agree(struct tpx_peer *p, uint32_t flags);
/* The timer (every deadline scan, after the pass read what had come): arm
 * once ready, ping a quiet peer, fail a silent one. */
void tpx__live_step(struct tpx_peer *p, uint64_t now);
/* MSG_PING from a ready peer: an ask is answered, an answer recorded.
 * 0, or the error the peer was failed with. */
int tpx__live_on_ping(struct tpx_peer *p, const struct tpx__wire_frame *f);

#endif
