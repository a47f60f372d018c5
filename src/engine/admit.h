/* Admission against the endpoint's limits.
 *
 * Incoming control connections. Before its HELLO (with a key: through
 * the key handshake too) a connection holds one of TPX_MAX_UNAUTH slots;
 * before HELLO or in transport setup, one of its source's (an IPv4 address,
 * or an IPv6 /64 prefix) TPX_MAX_UNAUTH_PER_SOURCE; any peer, one of
 * TPX_MAX_PEERS. A bound reached makes room by evicting a connection still
 * in setup that has not proved the key (its source's own, for its share):
 * the one that has shown the least (nothing, then something before HELLO,
 * then in transport setup, slowest first), from the source holding the
 * most, the oldest; the new one is refused only when none may go. Lock
 * held. */
#ifndef TPX_ENGINE_ADMIT_H
#define TPX_ENGINE_ADMIT_H

#include <stdint.h>
#include <sys/socket.h>

#include "engine/core.h"
#include "tpx/endpoint.h"

/* Where a connection comes from, for the per-source share (struct tpx_src:
 * peer_log.h). */
void tpx__src_of(const struct sockaddr *sa, struct tpx_src *out);

struct tpx_peer;
/* p (incoming) completed its handshake: its source is known. */
void tpx__admit_good(struct tpx_peer *p);
/* 1: the connection from s may be held (others may have been evicted, told
 * why: *why names the last limit); 0: refuse it (*why says why). */
int tpx__admit(tpx_endpoint_t *ep, const struct tpx_src *s, const char **why);

struct tpx_peer;
/* Pending notifications are bounded per peer (TPX_MAX_NOTIFS, _BYTES) and
 * per endpoint (TPX_MAX_EP_NOTIF_BYTES), each charged tpx__notif_cost:
 * may one more of len bytes be held? 0, or TPX_EAGAIN (tpx_err_quiet
 * detail); the caller drops the peer. At the endpoint's bound only a peer
 * above its fair share (the bound divided among the peers holding
 * notifications) is dropped: the one holding the most (its notifications
 * not popped discarded), or p when p is above its share and holds the
 * most. A notification counts from its
 * arrival (tpx__notif_arrive, or entering the FIFO with its op) until it is
 * popped, dropped, or its peer is freed. */
int tpx__admit_notif(struct tpx_peer *p, uint32_t len);

/* A peer's requests we hold (incoming WRITEs and READs, refused ones whose
 * data is still drained) are charged what they cost, entries included,
 * against TPX_MAX_HELD_BYTES per peer and TPX_MAX_EP_HELD_BYTES per
 * endpoint: may one more of `cost` bytes be held? 0, or TPX_EAGAIN
 * (tpx_err_quiet detail); the caller drops p. At the endpoint's bound, as
 * for notifications, only a peer above its fair share goes: the one
 * holding the most (failed now), or p. */
int tpx__admit_held(struct tpx_peer *p, uint64_t cost, const char *what);

#endif
