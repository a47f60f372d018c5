/* Log lines a peer can cause again and again without failing (a refused
 * WRITE or READ, a dropped notification, a send larger than the peer's
 * receive) are rate-limited per peer and kind (common/ratelog.h): a peer
 * cannot turn requests into log volume. The failure that ends a peer is
 * always logged (fail.c), and with it what was counted and not logged.
 * Lock held. */
#ifndef TPX_ENGINE_PEER_LOG_H
#define TPX_ENGINE_PEER_LOG_H

#include <stdint.h>

#include "common/log.h"
#include "common/ratelog.h"
#include "engine/core.h"
#include "tpx/endpoint.h"

struct tpx_peer;

/* 1: log this refused connection's failure line in full; 0: counted. */
int tpx__refused_log_ok(struct tpx_peer *p);
/* The endpoint ends: a summary of what was counted and not logged yet. */
void tpx__refused_log_flush(tpx_endpoint_t *ep);

/* 1: log this line in full; 0: counted (a summary is logged meanwhile). */
int tpx__peer_log_ok(struct tpx_peer *p, int kind);
/* The peer ends: summaries of what was counted and not logged yet. */
void tpx__peer_log_flush(struct tpx_peer *p);

/* As TPX_LOG_AT, through the peer's rate limit of `kind`. */
#define TPX_PEER_LOG(p, kind, lvl, ...)                                                            \
  do {                                                                                             \
    if ((lvl) <= tpx__log_level && tpx__peer_log_ok((p), (kind))) tpx__log_emit((lvl), __FILE__, __LINE__, __VA_ARGS__); \
  } while (0)

#endif
