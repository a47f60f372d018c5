/* The public peer API (include/tpx/endpoint.h, second part): connect and
 * accept, connection info, and the peer handle's close and accessors. */
#include <arpa/inet.h>
#include <errno.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.h"
#include "common/ifname.h"
#include "common/log.h"
#include "common/ports.h"
#include "common/util.h"
#include "engine/control.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/listen.h"
#include "engine/peer.h"
#include "engine/progress.h"
#include "engine/redial.h"

/* ---- connect / accept ---- */
static int peer_settled(tpx_endpoint_t *ep, void *arg) {
  (void)ep;
  struct tpx_peer *p = arg;
  return p->state == P_READY || p->state == P_DEAD || p->state == P_CLOSING;
}

/* retries: the control connect rides out transient errors (redial.h);
 * without, its first failure ends it (one of several addresses to try). */
static int connect_one(tpx_endpoint_t *ep, const char *host, int port, int retries, tpx_peer_t **out) {
  pthread_mutex_lock(&ep->lock);
  int live = tpx__peer_count_live(ep, 0);
  pthread_mutex_unlock(&ep->lock);
  if (live >= ep->cfg.max_peers)
    return tpx_err(TPX_EAGAIN, "tpx_connect: endpoint %s has %d peers (TPX_MAX_PEERS)", ep->name, live);
  char portstr[16];
  snprintf(portstr, sizeof(portstr), "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  int g = getaddrinfo(host, portstr, &hints, &ai);
  if (g != 0 || !ai) return tpx_err(TPX_ENOENT, "tpx_connect: cannot resolve %s: %s", host, gai_strerror(g));
  if (ai->ai_addrlen > sizeof(struct sockaddr_storage)) {
    freeaddrinfo(ai);
    return tpx_err(TPX_EINVAL, "tpx_connect: %s: address too long", host);
  }
  char where[96];
  tpx__listen_fmt_addr(ai->ai_addr, where, sizeof(where));
  pthread_mutex_lock(&ep->lock);
  struct tpx_peer *p = tpx__peer_new(ep, -1, 0, where);
  if (!p) {
    pthread_mutex_unlock(&ep->lock);
    freeaddrinfo(ai);
    return tpx_err(TPX_ENOMEM, "tpx_connect: out of memory");
  }
  tpx__redial_start(p, ai->ai_addr, ai->ai_addrlen, retries);
  freeaddrinfo(ai);
  tpx__ep_wake(ep);
  uint64_t deadline = tpx__now_ns() + tpx__ms_to_ns(ep->cfg.connect_timeout_ms) + 50000000ull;
  tpx__ep_wait(ep, peer_settled, p, deadline);
  int rc = 0;
  if (p->state != P_READY) {
    if (p->state != P_DEAD)
      tpx__peer_fail(p, TPX_ETIMEDOUT, "peer %s: connection setup not done after %d ms", p->where,
                ep->cfg.connect_timeout_ms);
    rc = tpx_err(p->err ? p->err : TPX_ECLOSED, "tpx_connect: %s", p->errmsg);
  }
  pthread_mutex_unlock(&ep->lock);
  if (rc) tpx_peer_close(p);
  else *out = p;
  return rc;
}

int tpx_connect(tpx_endpoint_t *ep, const char *host, int port, tpx_peer_t **out) {
  if (!ep || !host || !out || port <= 0 || port > 65535) return tpx_err(TPX_EINVAL, "tpx_connect: bad argument");
  *out = NULL;
  return connect_one(ep, host, port, 1, out);
}

static int acceptq_ready(tpx_endpoint_t *ep, void *arg) {
  (void)arg;
  return ep->acceptq_n > 0;
}

int tpx_accept(tpx_endpoint_t *ep, int timeout_ms, tpx_peer_t **out) {
  if (!ep || !out) return tpx_err(TPX_EINVAL, "tpx_accept: NULL argument");
  *out = NULL;
  if (ep->listen_fd < 0) return tpx_err(TPX_EUSAGE, "tpx_accept: endpoint %s does not listen", ep->name);
  uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : tpx__now_ns() + tpx__ms_to_ns(timeout_ms);
  pthread_mutex_lock(&ep->lock);
  if (!ep->thread_on && timeout_ms == 0) (void)tpx__ep_pass(ep);
  int rc = 0;
  if (tpx__ep_wait(ep, acceptq_ready, NULL, deadline)) {
    struct tpx_peer *p = ep->acceptq[0];
    memmove(&ep->acceptq[0], &ep->acceptq[1], (size_t)(ep->acceptq_n - 1) * sizeof(p));
    ep->acceptq_n--;
    p->in_acceptq = 0;
    *out = p;
  } else {
    rc = tpx_err_quiet(TPX_ETIMEDOUT, "tpx_accept: no peer connected to %s within %d ms", ep->name, timeout_ms);
  }
  pthread_mutex_unlock(&ep->lock);
  return rc;
}

/* ---- connection info ---- */
/* Our addresses that peers may dial: the listen host when it names one,
 * else the addresses of the interfaces TPX_SOCKET_IFNAME selects, with the
 * transport's rule (common/ifname.h), so both planes use the same NICs. */
#define CAND_MAX 64
struct cand {
  char name[IFNAMSIZ];
  char addr[INET6_ADDRSTRLEN];
};

static int list_candidates(tpx_endpoint_t *ep, struct cand *c, int cap) {
  struct ifaddrs *ifa = NULL;
  int n = 0;
  if (getifaddrs(&ifa) != 0) return 0;
  for (struct ifaddrs *i = ifa; i && n < cap; i = i->ifa_next) {
    if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
    int fam = i->ifa_addr->sa_family;
    if (fam != AF_INET && !(fam == AF_INET6 && strcmp(ep->listen_host, "::") == 0)) continue;
    const void *a = fam == AF_INET ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
                                   : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
    if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL((const struct in6_addr *)a)) continue;
    snprintf(c[n].name, sizeof(c[n].name), "%s", i->ifa_name);
    if (inet_ntop(fam, a, c[n].addr, sizeof(c[n].addr))) n++;
  }
  freeifaddrs(ifa);
  return n;
}

static int our_addresses(tpx_endpoint_t *ep, struct tpx__conn_info *ci) {
  int wildcard = !ep->listen_host[0] || strcmp(ep->listen_host, "0.0.0.0") == 0 || strcmp(ep->listen_host, "::") == 0;
  if (!wildcard) {
    snprintf(ci->addr[ci->naddr++], CONN_ADDR_MAX, "%s", ep->listen_host);
    return 0;
  }
  struct cand c[CAND_MAX];
  const char *names[CAND_MAX];
  unsigned char sel[CAND_MAX];
  int n = list_candidates(ep, c, CAND_MAX);
  for (int i = 0; i < n; i++) names[i] = c[i].name;
  int rc = tpx__ifname_select(ep->cfg.socket_ifname, names, n, sel);
  if (rc < 0) return tpx_err(rc, "tpx_get_conn_info: TPX_SOCKET_IFNAME='%s' is malformed", ep->cfg.socket_ifname);
  for (int i = 0; i < n && ci->naddr < CONN_MAX_ADDRS; i++)
    if (sel[i]) snprintf(ci->addr[ci->naddr++], CONN_ADDR_MAX, "%s", c[i].addr);
  if (ci->naddr == 0) snprintf(ci->addr[ci->naddr++], CONN_ADDR_MAX, "127.0.0.1");
  return 0;
}

int tpx_get_conn_info(tpx_endpoint_t *ep, void *buf, size_t cap, size_t *len) {
  if (!ep || !buf || !len) return tpx_err(TPX_EINVAL, "tpx_get_conn_info: NULL argument");
  if (ep->listen_fd < 0) return tpx_err(TPX_EUSAGE, "tpx_get_conn_info: endpoint %s does not listen", ep->name);
  struct tpx__conn_info ci;
  memset(&ci, 0, sizeof(ci));
  ci.uuid = ep->uuid;
  ci.gpu = ep->gpu;
  ci.port = (uint16_t)ep->port;
  snprintf(ci.name, sizeof(ci.name), "%s", ep->name);
  int rc = our_addresses(ep, &ci);
  return rc ? rc : tpx_err_surface(tpx__conn_info_encode(&ci, buf, cap, len));
}

int tpx_load_remote_conn_info(tpx_endpoint_t *ep, const void *blob, size_t len, tpx_peer_t **out) {
  if (!ep || !blob || !out) return tpx_err(TPX_EINVAL, "tpx_load_remote_conn_info: NULL argument");
  *out = NULL;
  struct tpx__conn_info ci;
  int rc = tpx__conn_info_decode(blob, len, &ci);
  if (rc) return tpx_err_surface(rc);
  for (int i = 0; i < ci.naddr; i++) {
    rc = connect_one(ep, ci.addr[i], ci.port, i == ci.naddr - 1, out);
    if (rc == 0) {
      if ((*out)->uuid != ci.uuid) {
        tpx_peer_close(*out);
        *out = NULL;
        rc = tpx_err(TPX_ENOENT, "tpx_load_remote_conn_info: %s:%u is not endpoint %s", ci.addr[i], ci.port, ci.name);
        continue;
      }
      return 0;
    }
  }
  return rc;
}


void tpx_peer_close(tpx_peer_t *p) {
  if (!p) return;
  tpx_endpoint_t *ep = p->ep;
  pthread_mutex_lock(&ep->lock);
  if (!p->user_closed) {
    p->user_closed = 1;
    if (p->state != P_DEAD) tpx__peer_shutdown(p, TPX_ECANCELED);
    if (p->in_acceptq) { /* closed before tpx_accept handed it out */
      for (int i = 0; i < ep->acceptq_n; i++)
        if (ep->acceptq[i] == p) {
          memmove(&ep->acceptq[i], &ep->acceptq[i + 1], (size_t)(ep->acceptq_n - i - 1) * sizeof(p));
          ep->acceptq_n--;
          break;
        }
      p->in_acceptq = 0;
    }
    tpx__peer_unlist(p);
    tpx__peer_release(p);
  }
  pthread_mutex_unlock(&ep->lock);
}

int tpx_peer_status(const tpx_peer_t *p) {
  if (!p) return TPX_EINVAL;
  char why[sizeof(p->errmsg)];
  pthread_mutex_lock(&p->ep->lock); /* state, err and errmsg change together under it */
  int st = p->state, err = p->err, failed = st == P_DEAD || st == P_CLOSING;
  if (failed) memcpy(why, p->errmsg, sizeof(why)); /* only then: callers poll a live peer */
  pthread_mutex_unlock(&p->ep->lock);
  if (st == P_READY) return 0;
  if (!failed) return TPX_EINPROGRESS;
  /* The reason replaces an older call's detail in tpx_last_error, which a
   * caller reports with this code. */
  why[sizeof(why) - 1] = '\0';
  err = err ? err : TPX_ECLOSED;
  if (strstr(why, p->where)) return tpx_err_quiet(err, "%s", why);
  return tpx_err_quiet(err, "peer %s: %s", p->where, why[0] ? why : tpx_strerror(err));
}
const char *tpx_peer_name(const tpx_peer_t *p) { return p ? p->name : ""; }
int tpx_peer_gpu(const tpx_peer_t *p) { return p ? p->gpu : TPX_EINVAL; }
int tpx_peer_num_channels(const tpx_peer_t *p) { return p ? p->nch : 0; }

int tpx_peer_channel_stats(tpx_peer_t *p, int c, tpx_channel_stats_t *out) {
  if (!p || !out) return tpx_err(TPX_EINVAL, "tpx_peer_channel_stats: NULL argument");
  memset(out, 0, sizeof(*out));
  pthread_mutex_lock(&p->ep->lock);
  int rc = 0;
  if (c < 0 || c >= p->nch || !p->ch) {
    rc = tpx_err(TPX_EINVAL, "tpx_peer_channel_stats: channel %d of %d", c, p->nch);
  } else {
    const struct tpx__channel *ch = &p->ch[c];
    out->up = !ch->down;
    out->dev = ch->dev;
    out->adaptive = p->sched;
    out->losses = ch->losses;
    out->rejoins = ch->rejoins;
    out->slots = p->tx_pat.len;
    for (int k = 0; k < p->tx_pat.len; k++) out->share += p->tx_pat.ch[k] == c;
    out->rate_kbs = c < ROUTE_MAX_PAT ? p->stripe_rate[c] : 0;
    out->chunks_sent = ch->sq.done;
    out->chunks_recv = ch->rq.done;
    out->bytes_sent = ch->sq.bytes_done;
    out->bytes_recv = ch->rq.bytes_done;
  }
  pthread_mutex_unlock(&p->ep->lock);
  return rc;
}

tpx_peer_t *tpx_peer_find(tpx_endpoint_t *ep, const char *name) {
  if (!ep || !name) return NULL;
  tpx_peer_t *found = NULL;
  pthread_mutex_lock(&ep->lock);
  for (struct tpx_peer *p = ep->peers; p; p = p->next)
    if (p->state == P_READY && strcmp(p->name, name) == 0) {
      found = p;
      break;
    }
  pthread_mutex_unlock(&ep->lock);
  return found;
}
