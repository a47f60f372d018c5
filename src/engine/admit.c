/* Admission of incoming control connections (admit.h). */
#include <netinet/in.h>
#include <string.h>

#include "common/error.h"
#include "engine/admit.h"
#include "engine/endpoint.h"
#include "engine/fail.h"
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
