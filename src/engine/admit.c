/* Admission against the endpoint's limits (admit.h): incoming control
 * connections, held notifications. */
#include <netinet/in.h>
#include <sys/ioctl.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/util.h"
#include "engine/admit.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/notif.h"
#include "engine/peer.h"

void tpx__src_of(const struct sockaddr *sa, struct tpx_src *out) {
  memset(out, 0, sizeof(*out));
  if (sa->sa_family == AF_INET) {
    out->fam = 4;
    memcpy(out->b, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    return;
  }
  if (sa->sa_family != AF_INET6) return;
  const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(a)) {
    out->fam = 4;
    memcpy(out->b, a->s6_addr + 12, 4);
  } else {
    out->fam = 6;
    memcpy(out->b, a->s6_addr, 8);
  }
}

static int same_src(const struct tpx_src *a, const struct tpx_src *b) {
  return a->fam && a->fam == b->fam && memcmp(a->b, b->b, sizeof(a->b)) == 0;
}

/* An incoming connection that is not a peer yet: before its HELLO, or in
 * transport setup. */
static int unfinished(const struct tpx_peer *p) {
  return p->incoming && (p->state == P_WAIT_HELLO || p->state == P_NET_SETUP);
}

/* Proved the key: never displaced by a connection that has not. */
static int proven(const struct tpx_peer *p) { return p->ep->cfg.auth_key_len && p->auth == PEER_AUTH_OK; }

/* Connections in setup from s (its share: TPX_MAX_UNAUTH_PER_SOURCE). */
static int src_count(const tpx_endpoint_t *ep, const struct tpx_src *s) {
  int n = 0;
  for (const struct tpx_peer *p = ep->peers; p; p = p->next) n += unfinished(p) && same_src(&p->src, s);
  return n;
}

/* A connection this young that has said nothing yet may be a client on
 * its way to its first frame (its HELLO waits for its channels to listen,
 * its challenge for a long round trip): it goes after those that have been
 * silent longer, and one from a source that recently completed a
 * handshake (tpx__admit_good) after one from a source never seen to. */
#define SPEAK_GRACE_NS 100000000ull /* 100 ms */
#define GOOD_SOURCE_NS 600000000000ull /* a source stays known 10 min */

static int good_source(const tpx_endpoint_t *ep, const struct tpx_src *s, uint64_t now) {
  const struct tpx__admit_good *g = &ep->good_src;
  for (int i = 0; i < ADMIT_GOOD_SOURCES; i++)
    if (g->t[i] && now - g->t[i] < GOOD_SOURCE_NS && same_src(&g->s[i], s)) return 1;
  return 0;
}

void tpx__admit_good(struct tpx_peer *p) {
  if (!p->incoming || !p->src.fam) return;
  struct tpx__admit_good *g = &p->ep->good_src;
  int slot = 0;
  for (int i = 0; i < ADMIT_GOOD_SOURCES; i++) {
    if (same_src(&g->s[i], &p->src)) {
      slot = i;
      break;
    }
    if (g->t[i] < g->t[slot]) slot = i; /* the least recent makes room */
  }
  g->s[slot] = p->src;
  g->t[slot] = tpx__now_ns();
}

/* What a connection has shown, least first: 0 nothing for longer than the
 * grace (before HELLO, not a byte read or waiting), 1 nothing yet within
 * the grace, 2 the same from a known source, 3 something before its HELLO
 * (a challenge, part of a frame), 4 its HELLO (in transport setup). */
static int shown(const struct tpx_peer *p, uint64_t now) {
  if (p->state == P_NET_SETUP) return 4;
  if (p->auth != PEER_AUTH_NONE || p->in_len) return 3;
  uint64_t born = p->setup_deadline - tpx__ms_to_ns(p->ep->cfg.connect_timeout_ms);
  if (now - born >= SPEAK_GRACE_NS) return 0;
  return good_source(p->ep, &p->src, now) ? 2 : 1;
}

/* Bytes it sent that were not read yet: it has said something (asked only
 * of the one about to be chosen: a system call). */
static int waiting(const struct tpx_peer *p) {
  int n = 0;
  return p->fd >= 0 && ioctl(p->fd, FIONREAD, &n) == 0 && n > 0;
}

struct cand {
  struct tpx_peer *p;
  int shown, src_n;
};

/* Is a the better one to evict than b: it has shown less; then its source
 * holds more (evictions spread over the sources, the largest first); then
 * it progressed the least (transport setup: the longest wait between
 * steps); then it is the oldest. */
static int worse(const struct cand *a, const struct cand *b) {
  if (a->shown != b->shown) return a->shown < b->shown;
  if (a->src_n != b->src_n) return a->src_n > b->src_n;
  if (a->shown == 4 && a->p->setup_wait != b->p->setup_wait) return a->p->setup_wait > b->p->setup_wait;
  return a->p->setup_deadline < b->p->setup_deadline;
}

/* Connections in setup per source, counted once per eviction (O(peers)). */
struct src_tab {
  struct {
    struct tpx_src s;
    int n;
  } *e;
  size_t cap;
};

static size_t src_hash(const struct tpx_src *s) {
  uint64_t h = 1469598103934665603ull ^ s->fam;
  for (int i = 0; i < 8; i++) h = (h ^ s->b[i]) * 1099511628211ull;
  return (size_t)h;
}

/* The source's slot (NULL: no table, counted as 1). */
static int *src_slot(struct src_tab *t, const struct tpx_src *s) {
  if (!t->e || !s->fam) return NULL;
  for (size_t i = src_hash(s) & (t->cap - 1), k = 0; k < t->cap; k++, i = (i + 1) & (t->cap - 1)) {
    if (!t->e[i].s.fam) t->e[i].s = *s;
    if (same_src(&t->e[i].s, s)) return &t->e[i].n;
  }
  return NULL;
}

static void src_tab_fill(struct src_tab *t, const tpx_endpoint_t *ep) {
  size_t n = 0;
  for (const struct tpx_peer *p = ep->peers; p; p = p->next) n += unfinished(p);
  for (t->cap = 64; t->cap < 2 * n; t->cap *= 2) {
  }
  t->e = calloc(t->cap, sizeof(*t->e)); /* NULL: every source counts 1 (still a choice) */
  for (const struct tpx_peer *p = ep->peers; p; p = p->next) {
    int *c = unfinished(p) ? src_slot(t, &p->src) : NULL;
    if (c) ++*c;
  }
}

/* The connection to evict for a new one: among those in setup that have
 * not proved the key, only before HELLO (pre_hello), only from s (s), the
 * one that has shown the least (worse). NULL when none may go. */
static struct tpx_peer *victim(tpx_endpoint_t *ep, int pre_hello, const struct tpx_src *s) {
  struct cand best = {0};
  struct src_tab t = {0};
  uint64_t now = tpx__now_ns();
  if (!s) src_tab_fill(&t, ep); /* one source: its count is the same for all */
  for (struct tpx_peer *p = ep->peers; p; p = p->next) {
    if (!unfinished(p) || proven(p) || (pre_hello && p->state != P_WAIT_HELLO) || (s && !same_src(&p->src, s)))
      continue;
    int *n = src_slot(&t, &p->src);
    struct cand c = {p, shown(p, now), n ? *n : 1};
    if (best.p && !worse(&c, &best)) continue;
    if (c.shown < 3 && waiting(p)) {
      c.shown = 3;
      if (best.p && !worse(&c, &best)) continue;
    }
    best = c;
  }
  free(t.e);
  return best.p;
}

static void evict(struct tpx_peer *v, const char *limit) {
  /* told in words naming the limit; logged with the other refused connections (peer_log.h) */
  tpx__peer_fail(v, TPX_EAGAIN, "peer %s: evicted during connection setup for a new connection: %s", v->where, limit);
}

int tpx__admit(tpx_endpoint_t *ep, const struct tpx_src *s, const char **why) {
  *why = NULL;
  const tpx_config_t *c = &ep->cfg;
  static const char share[] = "its source holds its share of the connections in setup (TPX_MAX_UNAUTH_PER_SOURCE)",
                    unauth[] = "too many connections without a handshake (TPX_MAX_UNAUTH)",
                    peers[] = "too many peers (TPX_MAX_PEERS)";
  /* Past its source's share, its own connection that has shown the least
   * makes room (a client behind the attacker's address is not locked out
   * by idle ones); one that has proved the key never does. */
  if (s->fam && src_count(ep, s) >= c->max_unauth_per_source) {
    struct tpx_peer *v = victim(ep, 0, s);
    if (!v) {
      *why = share;
      return 0;
    }
    evict(v, share);
    *why = share;
  }
  if (tpx__peer_count_live(ep, 1) >= c->max_unauth) {
    struct tpx_peer *v = victim(ep, 1, NULL);
    if (!v) {
      *why = unauth;
      return 0;
    }
    evict(v, unauth);
    *why = unauth;
  }
  if (tpx__peer_count_live(ep, 0) >= c->max_peers) {
    struct tpx_peer *v = victim(ep, 0, NULL);
    if (!v) {
      *why = peers;
      return 0;
    }
    evict(v, peers);
    *why = peers;
  }
  return 1;
}

/* ---- notifications ---- */
/* The endpoint's bound divided among the peers holding notifications (p
 * counted, holding or not). */
static uint64_t fair_share(tpx_endpoint_t *ep, const struct tpx_peer *p) {
  uint64_t n = 1;
  for (struct tpx_peer *q = ep->peers; q; q = q->next) n += q != p && q->notif_bytes;
  return ep->cfg.max_ep_notif_bytes / n;
}

/* The peer whose notifications cost the most, p excluded (dead ones too:
 * what they left is held until popped). */
static struct tpx_peer *noisiest(tpx_endpoint_t *ep, const struct tpx_peer *p) {
  struct tpx_peer *m = NULL;
  for (struct tpx_peer *q = ep->peers; q; q = q->next)
    if (q != p && q->notif_bytes && (!m || q->notif_bytes > m->notif_bytes)) m = q;
  return m;
}

/* The endpoint's bound (TPX_MAX_EP_NOTIF_BYTES): past it a peer above its
 * fair share goes with its notifications: p itself when p, with this one,
 * is above it and holds the most; else the one holding the most (which is
 * then above it: the bound is exceeded, so someone holds more than the
 * average). A peer within its fair share is never the one dropped. */
static int ep_room(struct tpx_peer *p, uint64_t c) {
  tpx_endpoint_t *ep = p->ep;
  size_t max = ep->cfg.max_ep_notif_bytes;
  while (ep->notif_bytes + c > max) {
    uint64_t share = fair_share(ep, p), mine = p->notif_bytes + c;
    struct tpx_peer *q = noisiest(ep, p);
    if (!q || (mine > share && q->notif_bytes <= mine) || q->notif_bytes <= share)
      return tpx_err_quiet(TPX_EAGAIN, "peer %s: the endpoint holds %llu bytes of notifications not popped "
                           "(TPX_MAX_EP_NOTIF_BYTES=%zu) and this peer the most (%llu, its fair share %llu); "
                           "dropped", p->where, (unsigned long long)ep->notif_bytes, max, (unsigned long long)mine,
                           (unsigned long long)share);
    tpx__peer_fail(q, TPX_EAGAIN, "peer %s: its notifications not popped (%llu bytes) were above its fair share "
                   "(%llu) when the endpoint reached TPX_MAX_EP_NOTIF_BYTES=%zu; dropped with them", q->where,
                   (unsigned long long)q->notif_bytes, (unsigned long long)share, max);
    tpx__notif_forget_peer(ep, q);
    if (q->notif_bytes) /* still held by its requests in flight: they go with it, not now */
      return tpx_err_quiet(TPX_EAGAIN, "peer %s: the endpoint holds %llu bytes of notifications not popped "
                           "(TPX_MAX_EP_NOTIF_BYTES=%zu); dropped", p->where, (unsigned long long)ep->notif_bytes,
                           max);
  }
  return 0;
}

int tpx__admit_notif(struct tpx_peer *p, uint32_t len) {
  const tpx_config_t *c = &p->ep->cfg;
  uint64_t cost = tpx__notif_cost(len);
  if (p->notif_n >= (uint32_t)c->max_notifs || p->notif_bytes + cost > c->max_notif_bytes)
    return tpx_err_quiet(TPX_EAGAIN, "peer %s: %u notifications (%llu bytes with their bookkeeping) not popped "
                         "yet (TPX_MAX_NOTIFS=%d, TPX_MAX_NOTIF_BYTES=%zu); dropped", p->where, p->notif_n,
                         (unsigned long long)p->notif_bytes, c->max_notifs, c->max_notif_bytes);
  return ep_room(p, cost);
}

/* ---- requests held ---- */
static uint64_t held_share(tpx_endpoint_t *ep, const struct tpx_peer *p) {
  uint64_t n = 1;
  for (struct tpx_peer *q = ep->peers; q; q = q->next) n += q != p && q->held_bytes;
  return ep->cfg.max_ep_held_bytes / n;
}

int tpx__admit_held(struct tpx_peer *p, uint64_t cost, const char *what) {
  tpx_endpoint_t *ep = p->ep;
  const tpx_config_t *c = &ep->cfg;
  uint64_t mine = p->held_bytes + cost;
  if (mine > c->max_held_bytes)
    return tpx_err_quiet(TPX_EAGAIN, "peer %s: %s: its %u requests held cost %llu bytes with this one, entries "
                         "included (TPX_MAX_HELD_BYTES=%zu); dropped", p->where, what, p->nserve,
                         (unsigned long long)mine, c->max_held_bytes);
  if (ep->held_bytes + cost <= c->max_ep_held_bytes) return 0;
  uint64_t share = held_share(ep, p);
  struct tpx_peer *q = NULL;
  for (struct tpx_peer *x = ep->peers; x; x = x->next)
    if (x != p && x->state != P_DEAD && x->held_bytes && (!q || x->held_bytes > q->held_bytes)) q = x;
  if (!q || (mine > share && q->held_bytes <= mine) || q->held_bytes <= share)
    return tpx_err_quiet(TPX_EAGAIN, "peer %s: %s: the endpoint's requests held cost %llu bytes "
                         "(TPX_MAX_EP_HELD_BYTES=%zu) and this peer's the most (%llu, its fair share %llu); dropped",
                         p->where, what, (unsigned long long)ep->held_bytes, c->max_ep_held_bytes,
                         (unsigned long long)mine, (unsigned long long)share);
  tpx__peer_fail(q, TPX_EAGAIN, "peer %s: its requests held (%llu bytes) were above its fair share (%llu) when "
                 "the endpoint reached TPX_MAX_EP_HELD_BYTES=%zu; dropped", q->where,
                 (unsigned long long)q->held_bytes, (unsigned long long)share, c->max_ep_held_bytes);
  return 0; /* its requests go as its channels close: the bound may be passed meanwhile */
}
