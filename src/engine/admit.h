/* Admission against the endpoint's limits.
 *
 * Incoming control connections. Before its HELLO (with a key:
 * through the key handshake too) a connection holds one of TPX_MAX_UNAUTH
 * slots, and one source (an IPv4 address, or an IPv6 /64 prefix) holds at
 * most TPX_MAX_UNAUTH_PER_SOURCE of them: past its share a new connection
 * of that source is closed at once. When every slot is taken, the oldest
 * connection of the source holding the most slots is evicted in favour of
 * the new one, so connections that never finish their handshake cannot
 * keep a peer out. Past TPX_MAX_PEERS (in setup or connected) new
 * connections are closed. Lock held. */
#ifndef TPX_ENGINE_ADMIT_H
#define TPX_ENGINE_ADMIT_H

#include <stdint.h>
#include <sys/socket.h>

#include "tpx/endpoint.h"

/* Where a connection comes from, for the per-source share. */
struct tpx_src {
  uint8_t fam;  /* 4, 6 (0: unknown, never shares) */
  uint8_t b[8]; /* the IPv4 address, or the IPv6 /64 prefix (IPv4-mapped: IPv4) */
};

void tpx__src_of(const struct sockaddr *sa, struct tpx_src *out);
/* 1: the connection from s may be held (some other one may have been
 * evicted: *why says so); 0: close it (*why says why). */
int tpx__admit(tpx_endpoint_t *ep, const struct tpx_src *s, const char **why);

struct tpx_peer;
/* Pending notifications are bounded per peer (TPX_MAX_NOTIFS, _BYTES) and
 * per endpoint (TPX_MAX_EP_NOTIF_BYTES), each charged tpx__notif_cost:
 * may one more of len bytes be held? 0, or TPX_EAGAIN (tpx_err_quiet
 * detail); the caller drops the peer. At the endpoint's bound the peer
 * holding the most is dropped instead (its notifications not popped
 * discarded), unless that would be p. A notification counts from its
 * arrival (tpx__notif_arrive, or entering the FIFO with its op) until it is
 * popped, dropped, or its peer is freed. */
int tpx__admit_notif(struct tpx_peer *p, uint32_t len);

#endif
