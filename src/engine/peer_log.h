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
#include "tpx/endpoint.h"

/* Where a control connection came from: an IPv4 address or an IPv6 /64
 * (admit.h fills it, tpx__src_of; here for the refused lines' sources). */
struct tpx_src {
  uint8_t fam;  /* 4, 6 (0: unknown, never shares) */
  uint8_t b[8]; /* the IPv4 address, or the IPv6 /64 prefix (IPv4-mapped: IPv4) */
};

struct tpx_peer;

/* Control connections refused before they became peers (a wrong key,
 * garbage, a bad HELLO, a setup that failed): their failure lines are
 * rate-limited per source and in total, so that opening connections does
 * not turn into log volume. A line goes in full only while both its
 * source's limit (TPX_RATELOG_BURST) and the total one
 * (REFUSED_LOG_BURST) allow it; the rest are counted, and a summary with
 * the count (and the source that sent the most) is logged at most every
 * TPX_RATELOG_PERIOD_NS. Sources are kept in a small table, the least
 * recently seen making room: a churn of sources only reaches the total
 * limit. Part of the endpoint (lock held). */
#define REFUSED_LOG_SOURCES 64
#define REFUSED_LOG_BURST 20
struct refused_log {
  struct tpx_ratelog all;
  struct {
    struct tpx_src src;
    uint64_t seen;    /* last line (0: free) */
    uint64_t counted; /* not logged in full since the last summary */
    struct tpx_ratelog rl;
  } s[REFUSED_LOG_SOURCES];
};
/* 1: log this refused connection's failure line in full; 0: counted. */
int tpx__refused_log_ok(struct tpx_peer *p);
/* The endpoint ends: a summary of what was counted and not logged yet. */
void tpx__refused_log_flush(tpx_endpoint_t *ep);

enum peer_log_kind { PL_WRITE_REFUSED, PL_READ_REFUSED, PL_NOTIF_DROPPED, PL_SEND_TRUNC, PL_CHANNEL_LOST, PL_KINDS };

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
