/* Admission against the endpoint's limits (admit.h): incoming control
 * connections, held notifications. */
#include <netinet/in.h>
#include <string.h>

#include "common/error.h"
#include "engine/admit.h"
#include "engine/endpoint.h"
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

static int unauth(const struct tpx_peer *p) { return p->incoming && p->state == P_WAIT_HELLO; }

/* Slots without a handshake held by connections from s. */
static int src_count(const tpx_endpoint_t *ep, const struct tpx_src *s) {
  int n = 0;
  for (const struct tpx_peer *p = ep->peers; p; p = p->next) n += unauth(p) && same_src(&p->src, s);
  return n;
}

/* The oldest connection of the source holding the most slots. */
static struct tpx_peer *victim(tpx_endpoint_t *ep) {
  struct tpx_peer *best = NULL;
  int best_n = 0;
  for (struct tpx_peer *p = ep->peers; p; p = p->next) {
    if (!unauth(p)) continue;
    int n = p->src.fam ? src_count(ep, &p->src) : 1;
    if (n > best_n || (n == best_n && p->setup_deadline < best->setup_deadline)) {
      best = p;
      best_n = n;
    }
  }
  return best;
}

int tpx__admit(tpx_endpoint_t *ep, const struct tpx_src *s, const char **why) {
  *why = NULL;
  if (s->fam && src_count(ep, s) >= ep->cfg.max_unauth_per_source) {
    *why = "its source holds its share of the connections without a handshake (TPX_MAX_UNAUTH_PER_SOURCE)";
    return 0;
  }
  int full = tpx__peer_count_live(ep, 1) >= ep->cfg.max_unauth;
  struct tpx_peer *v = full ? victim(ep) : NULL;
  if (full && !v) {
    *why = "too many connections without a handshake (TPX_MAX_UNAUTH)";
    return 0;
  }
  if (tpx__peer_count_live(ep, 0) - (v != NULL) >= ep->cfg.max_peers) { /* nobody evicted for nothing */
    *why = "too many peers (TPX_MAX_PEERS)";
    return 0;
  }
  if (v) {
    /* quiet (ECANCELED): an attacker's evictions are counted in one line a second, not one each */
    tpx__peer_fail(v, TPX_ECANCELED, "peer %s: evicted before its handshake: every slot was taken "
                   "(TPX_MAX_UNAUTH) and it was the oldest of the source holding the most", v->where);
    *why = "the oldest connection without a handshake evicted for a new one (TPX_MAX_UNAUTH)";
  }
  return 1;
}

/* ---- notifications ---- */
/* The peer whose notifications cost the most (dead ones too: what they left
 * is held until popped). */
static struct tpx_peer *noisiest(tpx_endpoint_t *ep) {
  struct tpx_peer *m = NULL;
  for (struct tpx_peer *q = ep->peers; q; q = q->next)
    if (q->notif_bytes && (!m || q->notif_bytes > m->notif_bytes)) m = q;
  return m;
}

/* The endpoint's bound (TPX_MAX_EP_NOTIF_BYTES): past it the noisiest peer
 * goes with its notifications, unless p itself would then be the noisiest. */
static int ep_room(struct tpx_peer *p, uint64_t c) {
  tpx_endpoint_t *ep = p->ep;
  size_t max = ep->cfg.max_ep_notif_bytes;
  while (ep->notif_bytes + c > max) {
    struct tpx_peer *q = noisiest(ep);
    if (!q || q == p || q->notif_bytes <= p->notif_bytes + c)
      return tpx_err_quiet(TPX_EAGAIN, "peer %s: the endpoint holds %llu bytes of notifications not popped "
                           "(TPX_MAX_EP_NOTIF_BYTES=%zu) and this peer the most (%llu); dropped", p->where,
                           (unsigned long long)ep->notif_bytes, max, (unsigned long long)p->notif_bytes + c);
    tpx__peer_fail(q, TPX_EAGAIN, "peer %s: its notifications not popped (%llu bytes) were the endpoint's largest "
                   "share when it reached TPX_MAX_EP_NOTIF_BYTES=%zu; dropped with them", q->where,
                   (unsigned long long)q->notif_bytes, max);
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
