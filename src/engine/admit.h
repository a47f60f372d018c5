/* Admission of incoming control connections. Before its HELLO (with a key:
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

#endif
