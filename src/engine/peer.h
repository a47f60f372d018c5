/* Peers: one remote endpoint, its control connection and its channels.
 * This file's functions are the peer object's lifetime (list, references,
 * free); failure and close are fail.c, setup handshake.c, the control
 * stream control.c (I/O) and dispatch.c (incoming frames). struct tpx_peer
 * is core.h's. */
#ifndef TPX_ENGINE_PEER_H
#define TPX_ENGINE_PEER_H

#include <stdint.h>
#include <sys/socket.h>

#include "common/retry.h"
#include "engine/core.h"
#include "engine/peer_log.h"
#include "engine/route.h"
#include "engine/wire.h"
#include "tpx/endpoint.h"

struct tpx__op;

/* A new control connection (fd non-blocking), listed in ep->peers. */
struct tpx_peer *tpx__peer_new(tpx_endpoint_t *ep, int fd, int incoming, const char *where);
void tpx__peer_unlist(struct tpx_peer *p);
/* Drop one reference; the last one frees the peer, which must be dead. */
void tpx__peer_release(struct tpx_peer *p);
/* The one teardown of a channel's memory (its windows, its dial buffer): the
 * peer's last reference, and channels trimmed at setup (channel.c). */
void tpx__peer_channel_free(struct tpx__channel *ch);
/* Another request of the peer may be held (TPX_MAX_CTL_QUEUE): 0, or
 * TPX_EAGAIN with tpx_err_quiet detail; the caller drops the peer. */
int tpx__peer_admit(struct tpx_peer *p, const char *what);
/* Peers of the endpoint that are not dead (in setup or connected). */
int tpx__peer_count_live(const tpx_endpoint_t *ep, int only_unauth);
/* Incoming connections that never became peers are nobody's handle. */
void tpx__peer_sweep(tpx_endpoint_t *ep);

#endif
