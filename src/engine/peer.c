/* The peer object's lifetime (peer.h): creation on a control connection,
 * the endpoint's list, references, and the final free. */
#include <stdio.h>
#include <stdlib.h>
#include <sys/epoll.h>

#include "common/error.h"
#include "common/hmac.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/ctl_seal.h"
#include "engine/window.h"
#include "engine/control.h"
#include "engine/core.h"
#include "engine/notif.h"
#include "engine/peer.h"

struct tpx_peer *tpx__peer_new(tpx_endpoint_t *ep, int fd, int incoming, const char *where) {
  struct tpx_peer *p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  p->ep = ep;
  p->fd = fd;
  p->incoming = incoming;
  p->refs = 1; /* the user's handle (or the accept queue on its behalf) */
  p->state = incoming ? P_WAIT_HELLO : P_CONNECTING;
  p->setup_deadline = tpx__now_ns() + tpx__ms_to_ns(ep->cfg.connect_timeout_ms);
  p->gpu = -1;
  snprintf(p->where, sizeof(p->where), "%s", where);
  p->next = ep->peers;
  if (ep->peers) ep->peers->prev = p;
  ep->peers = p;
  p->listed = 1;
  ep->setups++;
  tpx__ctl_epoll_set(ep, p, EPOLLIN | (incoming ? 0 : EPOLLOUT));
  return p;
}

void tpx__peer_unlist(struct tpx_peer *p) {
  tpx_endpoint_t *ep = p->ep;
  if (!p->listed) return;
  if (p->prev) p->prev->next = p->next;
  else ep->peers = p->next;
  if (p->next) p->next->prev = p->prev;
  p->next = p->prev = NULL;
  p->listed = 0;
}

void tpx__peer_channel_free(struct tpx__channel *ch) {
  free(ch->dial);
  ch->dial = NULL;
  tpx__window_free(&ch->sq);
  tpx__window_free(&ch->rq);
}

static void channels_free(struct tpx_peer *p) {
  for (int c = 0; c < p->nch; c++) tpx__peer_channel_free(&p->ch[c]);
  free(p->ch);
  p->ch = NULL;
}

void tpx__peer_release(struct tpx_peer *p) {
  if (--p->refs > 0) return;
  if (p->state != P_DEAD) /* every path shuts a peer down before its last reference goes */
    TPX_ERROR("peer %s: freed while not closed (state %d)", p->where, p->state);
  tpx__peer_unlist(p);
  tpx__notif_forget_peer(p->ep, p); /* its notifications would name a freed peer */
  channels_free(p);
  free(p->ids);
  free(p->cts);
  tpx__wbuf_free(&p->out);
  tpx__ctl_seal_free(p->seal);
  free(p->in);
  tpx__cleanse(p->auth_skey, sizeof(p->auth_skey));
  free(p);
}

int tpx__peer_admit(struct tpx_peer *p, const char *what) {
  int max = p->ep->cfg.max_ctl_queue;
  if ((uint64_t)p->nserve + p->cts_n < (uint64_t)max) return 0;
  return tpx_err_quiet(TPX_EAGAIN, "peer %s: %s: it has %u requests and %u receive announcements held "
                       "(TPX_MAX_CTL_QUEUE=%d); dropped", p->where, what, p->nserve, p->cts_n, max);
}

int tpx__peer_count_live(const tpx_endpoint_t *ep, int only_unauth) {
  int n = 0;
  for (const struct tpx_peer *p = ep->peers; p; p = p->next)
    n += only_unauth ? p->state == P_WAIT_HELLO : p->state != P_DEAD;
  return n;
}

void tpx__peer_sweep(tpx_endpoint_t *ep) {
  for (struct tpx_peer *p = ep->peers, *n; p; p = n) {
    n = p->next;
    if (p->incoming && p->state == P_DEAD && !p->ever_ready && !p->in_acceptq && p->refs == 1) {
      tpx__peer_unlist(p);
      tpx__peer_release(p);
    }
  }
}
