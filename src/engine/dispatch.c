/* The incoming control stream (dispatch.h). */
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>

#include "common/error.h"
#include "common/log.h"
#include "engine/ctl_seal.h"
#include "engine/control.h"
#include "engine/dispatch.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/failover.h"
#include "engine/handshake.h"
#include "engine/stripe.h"
#include "engine/integrity.h"
#include "engine/live.h"
#include "engine/initiator.h"
#include "engine/match.h"
#include "engine/target.h"
#include "engine/peer.h"
#include "engine/relisten.h"

/* A handler that leaves failing the peer to us. */
static int failed(struct tpx_peer *p, int rc) {
  if (rc < 0) tpx__peer_fail_last(p, rc);
  return rc;
}

static int on_ready_msg(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  switch (f->type) {
  case MSG_CTS: return tpx__match_on_cts(p, f);
  case MSG_SEND: return tpx__match_on_send(p, f);
  case MSG_WRITE: return tpx__target_on_write(p, f);
  case MSG_READ: return tpx__target_on_read(p, f);
  case MSG_READ_DATA: return tpx__initiator_on_read_data(p, f);
  case MSG_STATUS: return tpx__initiator_on_status(p, f);
  case MSG_NOTIF: return tpx__initiator_on_notif(p, f);
  case MSG_SCHED: return failed(p, tpx__stripe_on_sched(p, f));
  case MSG_CHAN: return failed(p, tpx__failover_on_frame(p, f));
  case MSG_PING: return tpx__live_on_ping(p, f);
  case MSG_SUM: return failed(p, tpx__sum_on_frame(p, f));
  default:
    tpx__peer_fail(p, TPX_EPROTO, "peer %s: unexpected message type %u", p->where, f->type);
    return TPX_EPROTO;
  }
}

/* Transport setup: frames wait until we are ready, an ERROR does not. 1 when
 * one failed the peer. */
static int setup_error(struct tpx_peer *p) {
  struct tpx__wire_error e;
  size_t at;
  if (p->state != P_NET_SETUP || tpx__wire_find_error(p->in, p->in_len, &e, &at) != 1) return 0;
  tpx__peer_fail_reported(p, &e);
  return 1;
}

static void on_frame(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  if (f->type == MSG_ERROR) {
    struct tpx__wire_error e;
    if (tpx__wire_get_error(f, &e) == 0) tpx__peer_fail_reported(p, &e);
    else tpx__peer_fail(p, TPX_EPROTO, "peer %s: malformed error message", p->where);
    return;
  }
  if (f->type == MSG_RELISTEN && p->state == P_NET_SETUP) { /* elsewhere unexpected */
    tpx__relisten_on_frame(p, f);
    return;
  }
  switch (p->state) {
  case P_WAIT_AUTH:
    if (f->type != MSG_AUTH) break;
    tpx__handshake_on_auth(p, f);
    return;
  case P_WAIT_HELLO:
    if (f->type == MSG_AUTH) {
      tpx__handshake_on_auth(p, f);
      return;
    }
    if (f->type != MSG_HELLO) break;
    tpx__handshake_on_hello(p, f);
    return;
  case P_WAIT_ACK:
    if (f->type != MSG_HELLO_ACK) break;
    tpx__handshake_on_hello_ack(p, f);
    return;
  case P_READY:
  case P_CLOSING:
    if (f->type == MSG_HELLO || f->type == MSG_HELLO_ACK) break;
    if (f->type == MSG_BYE) {
      p->bye_recv = 1;
      tpx__peer_remote_gone(p, "peer closed the connection");
      return;
    }
    if (p->bye_recv) {
      tpx__peer_fail(p, TPX_EPROTO, "peer %s: message type %u after goodbye", p->where, f->type);
      return;
    }
    (void)on_ready_msg(p, f);
    return;
  default: break;
  }
  tpx__peer_fail(p, TPX_EPROTO, "peer %s: unexpected message type %u in state %d", p->where, f->type, p->state);
}

int tpx__dispatch_parse(struct tpx_peer *p) {
  size_t off = 0;
  int did = 0;
  if (setup_error(p)) return 1;
  while (p->state != P_DEAD && p->state != P_CONNECTING) {
    struct tpx__wire_frame f;
    long n = tpx__wire_frame_parse(p->in + off, p->in_len - off, &f);
    if (n == 0) break;
    /* Transport setup: the peer's setup frames are read, what it sends once
     * ready waits (relisten.h says why an UP comes before those). */
    if (n > 0 && p->state == P_NET_SETUP && f.type != MSG_RELISTEN) break;
    if (n == TPX_EPROTO && !p->ep->cfg.encrypt && tpx__ctl_seal_is_record(p->in + off, p->in_len - off))
      n = tpx_err_quiet(TPX_EPROTO, "the peer encrypts its control connection (TPX_ENCRYPT=1 there) and this "
                                    "endpoint has TPX_ENCRYPT=0: set it alike on both");
    if (n < 0) {
      if (n == TPX_EVERSION && p->fd >= 0) {
        /* Frame headers are stable across versions, so the peer can read why. */
        (void)tpx__wire_put_error(&p->out, TPX_EVERSION, "protocol version mismatch");
      }
      tpx__peer_fail(p, (int)n, "peer %s: connection dropped: %s", p->where, tpx_last_error());
      return (int)n;
    }
    on_frame(p, &f);
    off += (size_t)n;
    did++;
    if (p->seal && tpx__ctl_seal_in_due(p->seal) && p->state != P_DEAD) { /* the peer's next bytes are records */
      int rc = tpx__ctl_seal_in_start(p->seal, &p->in, &p->in_len, &p->in_cap, off);
      if (rc) {
        tpx__peer_fail(p, rc, "peer %s: %s", p->where, tpx_last_error());
        return rc;
      }
    }
  }
  if (off > 0 && p->in) {
    memmove(p->in, p->in + off, p->in_len - off);
    p->in_len -= off;
  }
  return did;
}

static int read_all(struct tpx_peer *p) {
  int did = 0;
  for (;;) {
    if (p->fd < 0) return did;
    int r = tpx__ctl_read(p);
    if (r == 0) return did;
    if (r > 0) {
      did++;
      int rc = tpx__dispatch_parse(p);
      if (rc < 0) return rc;
      continue;
    }
    if (r != TPX_ECLOSED) {
      tpx__peer_fail_last(p, r);
      return r;
    }
    if (setup_error(p)) return did + 1; /* its reason came before its close */
    if (p->in_len > 0 && p->state != P_DEAD)
      TPX_DEBUG("peer %s: %zu unparsed control bytes at close", p->where, p->in_len);
    char why[64];
    snprintf(why, sizeof(why), "%s", tpx_last_error());
    tpx__peer_remote_gone(p, why);
    return did + 1;
  }
}

int tpx__dispatch_event(struct tpx_peer *p, uint32_t events) {
  if (p->fd < 0) return 0;
  int did = 0;
  if (p->state == P_CONNECTING) {
    if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
      tpx__handshake_connected(p);
      did++;
    }
    return did;
  }
  if (events & EPOLLOUT) {
    int rc = tpx__ctl_flush(p);
    if (rc) {
      tpx__peer_fail(p, rc, "peer %s: control connection broken", p->where);
      return 1;
    }
  }
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
    int r = read_all(p);
    did += r < 0 ? 1 : r;
  }
  return did;
}
