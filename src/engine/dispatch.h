/* The incoming control stream: read events, frames parsed and routed by
 * the peer's state (handshake.c during setup, initiator.c, target.c and match.c once ready). */
#ifndef TPX_ENGINE_DISPATCH_H
#define TPX_ENGINE_DISPATCH_H

#include <stdint.h>

struct tpx_peer;

/* epoll reported events on p's control socket. Returns work done. */
int tpx__dispatch_event(struct tpx_peer *p, uint32_t events);
/* Handle every complete frame in p->in (frames wait while the channels
 * come up: they may already refer to them). Returns frames handled, < 0
 * when the peer failed. */
int tpx__dispatch_parse(struct tpx_peer *p);

#endif
