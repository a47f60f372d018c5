/* Connection setup (handshake.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "common/error.h"
#include "common/log.h"
#include "common/printable.h"
#include "engine/admit.h"
#include "engine/auth.h"
#include "engine/channel.h"
#include "engine/control.h"
#include "engine/dial.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/gpu/gpu_path.h"
#include "engine/handshake.h"
#include "engine/integrity.h"
#include "engine/live.h"
#include "engine/peer.h"
#include "engine/redial.h"
#include "engine/relisten.h"
#include "engine/stripe.h"
#include "net/caps.h"

static int send_hello(struct tpx_peer *p, int ack) {
  tpx_endpoint_t *ep = p->ep;
  uint8_t *handles = malloc((size_t)p->nch * TPX_NET_HANDLE_BYTES);
  if (!handles) return tpx_err_quiet(TPX_ENOMEM, "peer %s: out of memory", p->where);
  for (int c = 0; c < p->nch; c++)
    memcpy(handles + (size_t)c * TPX_NET_HANDLE_BYTES, p->ch[c].my_handle, TPX_NET_HANDLE_BYTES);
  uint32_t flags = HELLO_F_PACK | (tpx__net_iov_ok(ep->net) ? HELLO_F_IOV : 0) | tpx__relisten_flag(p) |
                   (tpx__gpu_pack_ok(ep) ? HELLO_F_PACK_GPU : 0) | (ep->cfg.stripe ? HELLO_F_SCHED : 0) |
                   tpx__live_flag(ep) | tpx__sum_flag(p);
  struct tpx__wire_hello h = {ep->uuid, ep->gpu, (uint16_t)p->nch, flags, {0}, handles};
  snprintf(h.name, sizeof(h.name), "%s", ep->name);
  int rc = tpx__ctl_send(p, tpx__wire_put_hello(&p->out, ack, &h));
  free(handles);
  return rc;
}

/* Connector: channels listen, HELLO offers their handles. */
static void start_hello(struct tpx_peer *p) {
  tpx_endpoint_t *ep = p->ep;
  int rc = tpx__channels_alloc(p, ep->nchan);
  if (rc == 0) rc = tpx__channels_listen(p, 0, p->nch);
  if (rc == 0) rc = send_hello(p, 0);
  if (rc) {
    tpx__peer_fail(p, rc, "peer %s: handshake failed: %s", p->where, tpx_last_error());
    return;
  }
  p->state = P_WAIT_ACK;
}

void tpx__handshake_connected(struct tpx_peer *p) {
  tpx_endpoint_t *ep = p->ep;
  int soerr = 0;
  socklen_t sl = sizeof(soerr);
  if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0) soerr = errno;
  if (soerr) {
    tpx__redial_failed(p, soerr); /* another attempt, or the peer fails */
    return;
  }
  tpx__ctl_epoll_set(ep, p, EPOLLIN);
  if (!ep->cfg.auth_key_len) {
    start_hello(p);
    return;
  }
  int rc = tpx__auth_start(p); /* the handles wait until the acceptor proved the key */
  if (rc) tpx__peer_fail(p, rc, "peer %s: authentication failed: %s", p->where, tpx_last_error());
}

void tpx__handshake_on_auth(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  if (tpx__auth_on_frame(p, f) == 1) start_hello(p);
}

static void accept_identity(struct tpx_peer *p, const struct tpx__wire_hello *h) {
  p->uuid = h->uuid;
  p->gpu = h->gpu;
  p->pack = (h->flags & HELLO_F_PACK) != 0; /* other bits: features we do not know, ignored */
  p->pack_iov = p->pack && (h->flags & HELLO_F_IOV) != 0;
  p->pack_gpu = p->pack && (h->flags & HELLO_F_PACK_GPU) != 0;
  tpx__relisten_agree(p, h->flags);
  p->sched = p->ep->cfg.stripe && (h->flags & HELLO_F_SCHED) != 0;
  tpx__live_agree(p, h->flags);
  tpx__sum_agree(p, h->flags);
  tpx__printable(p->name, sizeof(p->name), h->name, sizeof(h->name)); /* the peer's: hostile (printable.h) */
  char where[sizeof(p->where)], name[41];
  tpx__printable(name, sizeof(name), h->name, sizeof(h->name));
  snprintf(where, sizeof(where), "%s (%.50s)", name, p->where);
  memcpy(p->where, where, sizeof(where));
}

static void take_handles(struct tpx_peer *p, const struct tpx__wire_hello *h) {
  for (int c = 0; c < p->nch; c++)
    memcpy(p->ch[c].dial->handle, h->handles + (size_t)c * TPX_NET_HANDLE_BYTES, TPX_NET_HANDLE_BYTES);
}

void tpx__handshake_on_hello(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  tpx_endpoint_t *ep = p->ep;
  struct tpx__wire_hello h;
  if (tpx__auth_hello_ok(p) != 0) return; /* before anything of it is looked at */
  int rc = tpx__wire_get_hello(f, &h);
  if (rc) {
    tpx__peer_fail(p, rc, "peer %s: bad hello: %s", p->where, tpx_last_error());
    return;
  }
  accept_identity(p, &h);
  int n = h.nch < ep->nchan ? h.nch : ep->nchan;
  if ((rc = tpx__dial_check(p, h.handles, n)) != 0) { /* before anything is dialled */
    tpx__peer_fail_last(p, rc);
    return;
  }
  rc = tpx__channels_alloc(p, n);
  if (rc == 0) rc = tpx__channels_listen(p, 0, n);
  if (rc) {
    tpx__peer_fail(p, rc, "peer %s: channel setup failed: %s", p->where, tpx_last_error());
    return;
  }
  take_handles(p, &h);
  rc = send_hello(p, 1);
  if (rc) {
    tpx__peer_fail(p, rc, "peer %s: hello reply failed: %s", p->where, tpx_last_error());
    return;
  }
  TPX_INFO("endpoint %s: peer %s (gpu %d) connecting with %d channel(s)", ep->name, p->where, p->gpu, n);
  p->state = P_NET_SETUP;
}

void tpx__handshake_on_hello_ack(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  tpx_endpoint_t *ep = p->ep;
  struct tpx__wire_hello h;
  int rc = tpx__wire_get_hello(f, &h);
  if (rc) {
    tpx__peer_fail(p, rc, "peer %s: bad hello reply: %s", p->where, tpx_last_error());
    return;
  }
  if (h.nch > p->nch) {
    tpx__peer_fail(p, TPX_EPROTO, "peer %s: agreed %u channels, we offered %d", p->where, h.nch, p->nch);
    return;
  }
  accept_identity(p, &h);
  if ((rc = tpx__dial_check(p, h.handles, h.nch)) != 0) { /* before anything is dialled */
    tpx__peer_fail_last(p, rc);
    return;
  }
  tpx__channels_trim(p, h.nch); /* channels the peer did not take: their listen comms go now */
  take_handles(p, &h);
  TPX_INFO("endpoint %s: connected to %s (gpu %d) with %d channel(s)", ep->name, p->where, p->gpu, p->nch);
  p->state = P_NET_SETUP;
}

static int became_ready(struct tpx_peer *p) {
  tpx_endpoint_t *ep = p->ep;
  p->state = P_READY;
  p->ever_ready = 1;
  tpx__stripe_init(p);
  if (!ep->cfg.auth_key_len) tpx__admit_good(p); /* (with a key: when it proved it, auth.c) */
  ep->setups--;
  if (p->fd >= 0) tpx__ctl_epoll_set(ep, p, p->ev | EPOLLIN); /* reading may have stopped during setup */
  if (p->incoming && !p->user_closed) {
    if (ep->acceptq_n == ep->acceptq_cap) {
      int ncap = ep->acceptq_cap ? ep->acceptq_cap * 2 : 16;
      struct tpx_peer **q = realloc(ep->acceptq, (size_t)ncap * sizeof(*q));
      if (!q) {
        tpx__peer_fail(p, TPX_ENOMEM, "peer %s: accept queue: out of memory", p->where);
        return TPX_ENOMEM;
      }
      ep->acceptq = q;
      ep->acceptq_cap = ncap;
    }
    ep->acceptq[ep->acceptq_n++] = p;
    p->in_acceptq = 1;
  }
  TPX_DEBUG("endpoint %s: peer %s ready", ep->name, p->where);
  tpx__ep_signal(ep);
  return 1;
}

/* A peer whose transport connect/accept found nothing new is asked again
 * after a wait that doubles from SETUP_WAIT_MIN_NS up to SETUP_WAIT_MAX_NS
 * (any progress resets it): peers stuck in setup (a HELLO whose side never
 * connects back) cost the progress thread a bounded number of steps each,
 * not one per pass; a setup that moves is stepped every pass. */
#define SETUP_WAIT_MIN_NS 100000ull    /* 100 us */
#define SETUP_WAIT_MAX_NS 16000000ull  /* 16 ms */

static void setup_wait(struct tpx_peer *p, int moved, uint64_t now) {
  uint64_t w = p->setup_wait ? 2 * p->setup_wait : SETUP_WAIT_MIN_NS;
  p->setup_wait = moved ? 0 : w < SETUP_WAIT_MAX_NS ? w : SETUP_WAIT_MAX_NS;
  p->setup_next = now + p->setup_wait;
}

/* Our transport connect or accept failed during setup: when the peer
 * failed the setup first (its close reset our connects), its reason is
 * already on the control connection, and is the one to report. 1 when it
 * was (the peer failed with it). */
static int peer_reported(struct tpx_peer *p) {
  for (int i = 0; i < 16 && p->fd >= 0 && tpx__ctl_read(p) > 0; i++) {
  }
  struct tpx__wire_error e;
  size_t at;
  if (tpx__wire_find_error(p->in, p->in_len, &e, &at) == 1) {
    tpx__peer_fail_reported(p, &e);
    return 1;
  }
  return 0;
}

int tpx__handshake_step(struct tpx_peer *p, int *did, uint64_t now) {
  *did = 0;
  if (p->state != P_NET_SETUP || now < p->setup_next) return 0;
  int sent = tpx__relisten_step(p, now); /* fresh handles and asks whose pause ended */
  if (sent < 0) {
    tpx__peer_fail(p, sent, "%s", tpx_last_error());
    return sent;
  }
  struct tpx__chan_fail f;
  int rc = tpx__channels_connect(p, did, &f);
  if (rc < 0 && tpx__relisten_failed(p, &f)) rc = 0, ++*did;
  if (rc < 0) {
    char own[512]; /* reading the control connection may record other details */
    snprintf(own, sizeof(own), "%s", tpx_last_error());
    if (!peer_reported(p)) tpx__peer_fail(p, rc, "%s", own);
    return rc;
  }
  setup_wait(p, *did + sent > 0, now);
  if (rc == 1) rc = tpx__relisten_all_up(p); /* and the peer's comms (its UP), when fresh handles were agreed */
  if (rc < 0) tpx__peer_fail(p, rc, "%s", tpx_last_error());
  return rc == 1 ? became_ready(p) : rc;
}
