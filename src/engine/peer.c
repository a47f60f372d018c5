/* Peers: the control connection (non-blocking, framed), the handshake that
 * exchanges identities and net handles, transport connect/accept per channel,
 * failure and graceful close. */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/engine.h"

#define IN_INITIAL (64 * 1024)

struct tpx_peer *peer_new(tpx_endpoint_t *ep, int fd, int incoming, const char *where) {
  struct tpx_peer *p = calloc(1, sizeof(*p));
  if (!p) return NULL;
  p->ep = ep;
  p->fd = fd;
  p->incoming = incoming;
  p->refs = 1; /* the user's handle (or the accept queue on its behalf) */
  p->state = incoming ? P_WAIT_HELLO : P_CONNECTING;
  p->setup_deadline = tpx_now_ns() + ms_to_ns(ep->cfg.connect_timeout_ms);
  p->gpu = -1;
  snprintf(p->where, sizeof(p->where), "%s", where);
  p->next = ep->peers;
  if (ep->peers) ep->peers->prev = p;
  ep->peers = p;
  p->listed = 1;
  ep->setups++;
  ep_epoll_set(ep, p, EPOLLIN | (incoming ? 0 : EPOLLOUT));
  return p;
}

static void unlist(struct tpx_peer *p) {
  tpx_endpoint_t *ep = p->ep;
  if (!p->listed) return;
  if (p->prev) p->prev->next = p->next;
  else ep->peers = p->next;
  if (p->next) p->next->prev = p->prev;
  p->next = p->prev = NULL;
  p->listed = 0;
}

static int in_setup(int st) { return st >= P_CONNECTING && st <= P_NET_SETUP; }

/* ---- output ---- */
int peer_flush(struct tpx_peer *p) {
  if (p->fd < 0) return TPX_ECLOSED;
  while (p->out_off < p->out.len) {
    ssize_t n = send(p->fd, p->out.p + p->out_off, p->out.len - p->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p->out_off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (!(p->ev & EPOLLOUT)) ep_epoll_set(p->ep, p, p->ev | EPOLLOUT);
      return 0;
    }
    return tpx_err(TPX_ECLOSED, "peer %s: control send failed: %s", p->where, strerror(errno));
  }
  p->out_off = 0;
  p->out.len = 0;
  if (p->ev & EPOLLOUT && p->state != P_CONNECTING) ep_epoll_set(p->ep, p, p->ev & ~(uint32_t)EPOLLOUT);
  return 0;
}

/* After appending a frame: flush it; a failure of either step fails the peer. */
int peer_send_frame_done(struct tpx_peer *p, int rc) {
  if (rc == 0) rc = peer_flush(p);
  if (rc) peer_fail(p, rc, "peer %s: control message not sent", p->where);
  return rc;
}

/* ---- channels ---- */
static int channels_alloc(struct tpx_peer *p, int n) {
  tpx_endpoint_t *ep = p->ep;
  p->ch = calloc((size_t)n, sizeof(*p->ch));
  if (!p->ch) return tpx_err(TPX_ENOMEM, "peer %s: out of memory", p->where);
  p->nch = n;
  for (int c = 0; c < n; c++) {
    struct channel *ch = &p->ch[c];
    ch->idx = c;
    ch->dev = (c + (ep->gpu > 0 ? ep->gpu : 0)) % ep->ndev; /* round robin over devices */
    int rc = cq_init(&ch->sq, c, 0, (uint32_t)ep->window);
    if (rc == 0) rc = cq_init(&ch->rq, c, 1, (uint32_t)ep->window);
    if (rc) return rc;
  }
  return 0;
}

/* Listen once per channel; the handles are kept for the whole setup. */
static int channels_listen(struct tpx_peer *p, int from, int to) {
  tpx_net_t *net = p->ep->net;
  for (int c = from; c < to; c++) {
    struct channel *ch = &p->ch[c];
    memset(ch->my_handle, 0, sizeof(ch->my_handle));
    int rc = net->ops->listen(net, ch->dev, ch->my_handle, &ch->listen_comm);
    if (rc) return tpx_err(rc, "peer %s channel %d: listen on net device %d failed", p->where, c, ch->dev);
    if (!ch->listen_comm)
      return tpx_err(TPX_EINTERNAL, "peer %s channel %d: listen returned no comm", p->where, c);
  }
  return 0;
}

static void close_comms(struct tpx_peer *p) {
  tpx_endpoint_t *ep = p->ep;
  tpx_net_t *net = ep->net;
  for (int c = 0; c < p->nch; c++) {
    struct channel *ch = &p->ch[c];
    cq_purge(p, &ch->sq);
    cq_purge(p, &ch->rq);
    if (ch->sq.comm) {
      if (ch->sq.slot >= 0) ep_slot_release(ep, ch->sq.slot);
      int rc = net->ops->close_send(net, ch->sq.comm);
      if (rc) TPX_WARN("peer %s channel %d: closeSend failed: %s", p->where, c, tpx_strerror(rc));
      ch->sq.comm = NULL;
      ch->sq.slot = -1;
    }
    if (ch->rq.comm) {
      if (ch->rq.slot >= 0) ep_slot_release(ep, ch->rq.slot);
      int rc = net->ops->close_recv(net, ch->rq.comm);
      if (rc) TPX_WARN("peer %s channel %d: closeRecv failed: %s", p->where, c, tpx_strerror(rc));
      ch->rq.comm = NULL;
      ch->rq.slot = -1;
    }
    if (ch->listen_comm) {
      int rc = net->ops->close_listen(net, ch->listen_comm);
      if (rc) TPX_WARN("peer %s channel %d: closeListen failed: %s", p->where, c, tpx_strerror(rc));
      ch->listen_comm = NULL;
    }
  }
}

static void drop_fd(struct tpx_peer *p, int graceful) {
  if (p->fd < 0) return;
  tpx_endpoint_t *ep = p->ep;
  ep_epoll_set(ep, p, 0);
  if (graceful && !p->eof) {
    /* Our last frames go out, then FIN; read until the peer's FIN so that
     * no unread bytes turn our close into a RST that could destroy data the
     * peer has not read yet. */
    (void)peer_flush(p);
    shutdown(p->fd, SHUT_WR);
    ep_closing_add(ep, p->fd);
  } else {
    close(p->fd);
  }
  p->fd = -1;
}

void peer_fail(struct tpx_peer *p, int err, const char *fmt, ...) {
  if (p->state == P_DEAD) return;
  char msg[200];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  tpx_endpoint_t *ep = p->ep;
  int quiet = (err == TPX_ECLOSED || err == TPX_ECANCELED);
  if (quiet) TPX_DEBUG("%s (%s)", msg, tpx_strerror(err));
  else TPX_ERROR("%s (%s)", msg, tpx_strerror(err));
  snprintf(p->errmsg, sizeof(p->errmsg), "%s", msg);
  if (in_setup(p->state)) ep->setups--;
  int was_up = p->state == P_READY || p->state == P_CLOSING;
  p->state = P_DEAD;
  p->err = err;
  /* Tell the peer why, unless it is the one that went away. */
  if (p->fd >= 0 && !p->eof && err != TPX_ECLOSED && err != TPX_ECANCELED) {
    (void)wire_put_error(&p->out, err, msg);
  } else if (p->fd >= 0 && !p->eof && err == TPX_ECANCELED && was_up && !p->bye_sent) {
    (void)wire_put_bye(&p->out);
    p->bye_sent = 1;
  }
  drop_fd(p, 1);
  close_comms(p);
  peer_fail_ops(p, err, 0);
  ep_signal(ep);
}

/* Graceful close by the user. */
void peer_shutdown(struct tpx_peer *p, int err) {
  peer_fail(p, err, "peer %s: closed locally", p->where);
}

static void on_remote_gone(struct tpx_peer *p, const char *why) {
  if (in_setup(p->state)) {
    peer_fail(p, TPX_ECLOSED, "peer %s: %s during connection setup", p->where, why);
    return;
  }
  if (p->state != P_READY) return;
  TPX_DEBUG("peer %s: %s; finishing transfers in flight", p->where, why);
  p->state = P_CLOSING;
  p->err = TPX_ECLOSED;
  snprintf(p->errmsg, sizeof(p->errmsg), "peer %s: %s", p->where, why);
  peer_fail_ops(p, TPX_ECLOSED, 1);
  peer_check_closing(p);
  ep_signal(p->ep);
}

/* CLOSING and nothing left in flight: release the transport resources. */
void peer_check_closing(struct tpx_peer *p) {
  if (p->state != P_CLOSING) return;
  if (p->inflight) return;
  for (int c = 0; c < p->nch; c++)
    if (p->ch[c].sq.pend || p->ch[c].rq.pend) return;
  peer_fail(p, TPX_ECLOSED, "%s", p->errmsg);
}

/* ---- handshake ---- */
static int send_hello(struct tpx_peer *p, int ack) {
  tpx_endpoint_t *ep = p->ep;
  uint8_t *handles = malloc((size_t)p->nch * TPX_NET_HANDLE_BYTES);
  if (!handles) return tpx_err(TPX_ENOMEM, "peer %s: out of memory", p->where);
  for (int c = 0; c < p->nch; c++)
    memcpy(handles + (size_t)c * TPX_NET_HANDLE_BYTES, p->ch[c].my_handle, TPX_NET_HANDLE_BYTES);
  struct wire_hello h = {ep->uuid, ep->gpu, (uint16_t)p->nch, 0, {0}, handles};
  snprintf(h.name, sizeof(h.name), "%s", ep->name);
  int rc = wire_put_hello(&p->out, ack, &h);
  free(handles);
  if (rc == 0) rc = peer_flush(p);
  return rc;
}

/* The dialled TCP connection is up: listen on our channels, say hello. */
static void on_connected(struct tpx_peer *p) {
  tpx_endpoint_t *ep = p->ep;
  int soerr = 0;
  socklen_t sl = sizeof(soerr);
  if (getsockopt(p->fd, SOL_SOCKET, SO_ERROR, &soerr, &sl) != 0) soerr = errno;
  if (soerr) {
    peer_fail(p, TPX_ECLOSED, "peer %s: control connect failed: %s", p->where, strerror(soerr));
    return;
  }
  ep_epoll_set(ep, p, EPOLLIN);
  int rc = channels_alloc(p, ep->cfg.num_channels);
  if (rc == 0) rc = channels_listen(p, 0, p->nch);
  if (rc == 0) rc = send_hello(p, 0);
  if (rc) {
    peer_fail(p, rc, "peer %s: handshake failed: %s", p->where, tpx_last_error());
    return;
  }
  p->state = P_WAIT_ACK;
}

static void accept_identity(struct tpx_peer *p, const struct wire_hello *h) {
  p->uuid = h->uuid;
  p->gpu = h->gpu;
  snprintf(p->name, sizeof(p->name), "%s", h->name);
  char where[sizeof(p->where)];
  snprintf(where, sizeof(where), "%.40s (%.50s)", h->name, p->where);
  memcpy(p->where, where, sizeof(where));
}

static void on_hello(struct tpx_peer *p, const struct wire_frame *f) {
  tpx_endpoint_t *ep = p->ep;
  struct wire_hello h;
  int rc = wire_get_hello(f, &h);
  if (rc) {
    peer_fail(p, rc, "peer %s: bad hello: %s", p->where, tpx_last_error());
    return;
  }
  accept_identity(p, &h);
  int n = h.nch < ep->cfg.num_channels ? h.nch : ep->cfg.num_channels;
  rc = channels_alloc(p, n);
  if (rc == 0) rc = channels_listen(p, 0, n);
  if (rc) {
    peer_fail(p, rc, "peer %s: channel setup failed: %s", p->where, tpx_last_error());
    return;
  }
  for (int c = 0; c < n; c++)
    memcpy(p->ch[c].peer_handle, h.handles + (size_t)c * TPX_NET_HANDLE_BYTES, TPX_NET_HANDLE_BYTES);
  rc = send_hello(p, 1);
  if (rc) {
    peer_fail(p, rc, "peer %s: hello reply failed", p->where);
    return;
  }
  TPX_INFO("endpoint %s: peer %s (gpu %d) connecting with %d channel(s)", ep->name, p->where, p->gpu, n);
  p->state = P_NET_SETUP;
}

static void on_hello_ack(struct tpx_peer *p, const struct wire_frame *f) {
  tpx_endpoint_t *ep = p->ep;
  struct wire_hello h;
  int rc = wire_get_hello(f, &h);
  if (rc) {
    peer_fail(p, rc, "peer %s: bad hello reply: %s", p->where, tpx_last_error());
    return;
  }
  if (h.nch > p->nch) {
    peer_fail(p, TPX_EPROTO, "peer %s: agreed %u channels, we offered %d", p->where, h.nch, p->nch);
    return;
  }
  accept_identity(p, &h);
  /* Channels the peer did not take: their listen comms go now. */
  for (int c = h.nch; c < p->nch; c++) {
    struct channel *ch = &p->ch[c];
    if (ch->listen_comm) ep->net->ops->close_listen(ep->net, ch->listen_comm);
    ch->listen_comm = NULL;
    cq_free(&ch->sq);
    cq_free(&ch->rq);
  }
  p->nch = h.nch;
  for (int c = 0; c < p->nch; c++)
    memcpy(p->ch[c].peer_handle, h.handles + (size_t)c * TPX_NET_HANDLE_BYTES, TPX_NET_HANDLE_BYTES);
  TPX_INFO("endpoint %s: connected to %s (gpu %d) with %d channel(s)", ep->name, p->where, p->gpu, p->nch);
  p->state = P_NET_SETUP;
}

static void became_ready(struct tpx_peer *p) {
  tpx_endpoint_t *ep = p->ep;
  p->state = P_READY;
  p->ever_ready = 1;
  ep->setups--;
  if (p->incoming && !p->user_closed) {
    if (ep->acceptq_n == ep->acceptq_cap) {
      int ncap = ep->acceptq_cap ? ep->acceptq_cap * 2 : 16;
      struct tpx_peer **q = realloc(ep->acceptq, (size_t)ncap * sizeof(*q));
      if (!q) {
        peer_fail(p, TPX_ENOMEM, "peer %s: accept queue: out of memory", p->where);
        return;
      }
      ep->acceptq = q;
      ep->acceptq_cap = ncap;
    }
    ep->acceptq[ep->acceptq_n++] = p;
    p->in_acceptq = 1;
  }
  TPX_DEBUG("endpoint %s: peer %s ready", ep->name, p->where);
  ep_signal(ep);
  (void)peer_parse(p); /* frames that arrived while the channels came up */
}

int peer_setup_step(struct tpx_peer *p) {
  if (p->state != P_NET_SETUP) return 0;
  tpx_endpoint_t *ep = p->ep;
  tpx_net_t *net = ep->net;
  int all = 1, did = 0;
  for (int c = 0; c < p->nch; c++) {
    struct channel *ch = &p->ch[c];
    if (!ch->sq.comm) {
      void *comm = NULL;
      int rc = net->ops->connect(net, ch->dev, ch->peer_handle, &comm, &ch->send_dev);
      if (rc) {
        peer_fail(p, rc, "peer %s channel %d: connect on net device %d failed", p->where, c, ch->dev);
        return -1;
      }
      if (comm) {
        ch->sq.comm = comm;
        ch->sq.slot = ep_slot_alloc(ep, comm);
        did++;
        if (ch->sq.slot < 0) {
          peer_fail(p, TPX_ENOMEM, "peer %s channel %d: out of memory", p->where, c);
          return -1;
        }
      } else {
        all = 0;
      }
    }
    if (!ch->rq.comm) {
      void *comm = NULL;
      int rc = net->ops->accept(net, ch->listen_comm, &comm, &ch->recv_dev);
      if (rc) {
        peer_fail(p, rc, "peer %s channel %d: accept on net device %d failed", p->where, c, ch->dev);
        return -1;
      }
      if (comm) {
        ch->rq.comm = comm;
        ch->rq.slot = ep_slot_alloc(ep, comm);
        did++;
        if (ch->rq.slot < 0) {
          peer_fail(p, TPX_ENOMEM, "peer %s channel %d: out of memory", p->where, c);
          return -1;
        }
        rc = net->ops->close_listen(net, ch->listen_comm); /* one accept per listen */
        if (rc) TPX_WARN("peer %s channel %d: closeListen failed: %s", p->where, c, tpx_strerror(rc));
        ch->listen_comm = NULL;
      } else {
        all = 0;
      }
    }
  }
  if (all) {
    became_ready(p);
    return 1;
  }
  return did;
}

void peer_deadlines(struct tpx_peer *p, uint64_t now) {
  if (in_setup(p->state)) {
    if (now > p->setup_deadline) {
      int c = 0;
      if (p->state == P_NET_SETUP)
        while (c < p->nch && p->ch[c].sq.comm && p->ch[c].rq.comm) c++;
      peer_fail(p, TPX_ETIMEDOUT, "peer %s: connection setup not done after %d ms (%s%s%d)",
                p->where, p->ep->cfg.connect_timeout_ms,
                p->state == P_CONNECTING ? "control connect" :
                p->state == P_NET_SETUP ? "transport connect/accept" : "handshake",
                p->state == P_NET_SETUP ? ", channel " : ", state ",
                p->state == P_NET_SETUP ? c : p->state);
    }
    return;
  }
  if (p->state != P_READY && p->state != P_CLOSING) return;
  for (struct op *o = p->active; o; o = o->next) {
    if ((o->phase == PH_WAIT_ACK || (o->kind == K_READ && o->phase == PH_WAIT_HDR)) &&
        o->deadline && now > o->deadline) {
      peer_fail(p, TPX_ETIMEDOUT, "peer %s: %s %llu got no %s after %d ms", p->where,
                o->kind == K_WRITE ? "write" : "read", (unsigned long long)o->id,
                o->kind == K_WRITE ? "acknowledgement" : "answer", p->ep->cfg.timeout_ms);
      return;
    }
  }
}

/* ---- input ---- */
static void on_frame(struct tpx_peer *p, const struct wire_frame *f) {
  if (f->type == MSG_ERROR) {
    struct wire_error e;
    if (wire_get_error(f, &e) == 0) {
      int code = e.code < 0 && e.code >= TPX_EUNKNOWN ? e.code : TPX_EREMOTE;
      peer_fail(p, code == TPX_ECLOSED || code == TPX_ECANCELED ? TPX_EREMOTE : code,
                "peer %s reported: %s", p->where, e.msg);
    } else {
      peer_fail(p, TPX_EPROTO, "peer %s: malformed error message", p->where);
    }
    return;
  }
  switch (p->state) {
  case P_WAIT_HELLO:
    if (f->type != MSG_HELLO) break;
    on_hello(p, f);
    return;
  case P_WAIT_ACK:
    if (f->type != MSG_HELLO_ACK) break;
    on_hello_ack(p, f);
    return;
  case P_READY:
  case P_CLOSING:
    if (f->type == MSG_HELLO || f->type == MSG_HELLO_ACK) break;
    if (f->type == MSG_BYE) {
      p->bye_recv = 1;
      on_remote_gone(p, "peer closed the connection");
      return;
    }
    if (p->bye_recv) {
      peer_fail(p, TPX_EPROTO, "peer %s: message type %u after goodbye", p->where, f->type);
      return;
    }
    (void)peer_on_msg(p, f);
    return;
  default: break;
  }
  peer_fail(p, TPX_EPROTO, "peer %s: unexpected message type %u in state %d", p->where, f->type, p->state);
}

/* Handle every complete frame in the input buffer. Frames wait while the
 * channels are coming up (they may already refer to them). */
int peer_parse(struct tpx_peer *p) {
  size_t off = 0;
  int did = 0;
  while (p->state != P_DEAD && p->state != P_NET_SETUP && p->state != P_CONNECTING) {
    struct wire_frame f;
    long n = wire_frame_parse(p->in + off, p->in_len - off, &f);
    if (n == 0) break;
    if (n < 0) {
      if (n == TPX_EVERSION && p->fd >= 0) {
        /* Frame headers are stable across versions, so the peer can read why. */
        (void)wire_put_error(&p->out, TPX_EVERSION, "protocol version mismatch");
      }
      peer_fail(p, (int)n, "peer %s: %s; connection dropped", p->where, tpx_last_error());
      return -1;
    }
    on_frame(p, &f);
    off += (size_t)n;
    did++;
  }
  if (off > 0 && p->in) {
    memmove(p->in, p->in + off, p->in_len - off);
    p->in_len -= off;
  }
  return did;
}

static int peer_read(struct tpx_peer *p) {
  int did = 0;
  for (;;) {
    if (p->fd < 0) return did;
    size_t want = IN_INITIAL;
    struct wire_frame f;
    if (p->in_len >= WIRE_HDR_BYTES && wire_frame_parse(p->in, p->in_len, &f) == 0)
      want = WIRE_HDR_BYTES + (size_t)f.len; /* room for the whole frame */
    if (want < IN_INITIAL) want = IN_INITIAL;
    if (p->in_cap < want) {
      uint8_t *n = realloc(p->in, want);
      if (!n) {
        peer_fail(p, TPX_ENOMEM, "peer %s: out of memory for control input", p->where);
        return -1;
      }
      p->in = n;
      p->in_cap = want;
    }
    if (p->in_len == p->in_cap) {
      /* Full and not parseable yet (setup in progress): read later. */
      return did;
    }
    ssize_t n = recv(p->fd, p->in + p->in_len, p->in_cap - p->in_len, MSG_DONTWAIT);
    if (n > 0) {
      p->in_len += (size_t)n;
      did++;
      if (peer_parse(p) < 0) return -1;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return did;
    /* EOF or reset */
    int e = n < 0 ? errno : 0;
    p->eof = 1;
    (void)peer_flush(p);
    ep_epoll_set(p->ep, p, 0);
    close(p->fd);
    p->fd = -1;
    if (p->in_len > 0 && p->state != P_DEAD)
      TPX_DEBUG("peer %s: %zu unparsed control bytes at close", p->where, p->in_len);
    on_remote_gone(p, e ? "control connection reset" : "peer closed the control connection");
    return did + 1;
  }
}

int peer_on_event(struct tpx_peer *p, uint32_t events) {
  if (p->fd < 0) return 0;
  int did = 0;
  if (p->state == P_CONNECTING) {
    if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP)) {
      on_connected(p);
      did++;
    }
    return did;
  }
  if (events & EPOLLOUT) {
    int rc = peer_flush(p);
    if (rc) {
      peer_fail(p, rc, "peer %s: control connection broken", p->where);
      return 1;
    }
  }
  if (events & (EPOLLIN | EPOLLERR | EPOLLHUP)) {
    int r = peer_read(p);
    did += r < 0 ? 1 : r;
  }
  return did;
}

/* ---- lifetime ---- */
/* Incoming connections that never became peers (garbage, timeouts, failed
 * handshakes) are nobody's handle: free them. Lock held, outside any pass
 * over the peer list. */
void peer_sweep(tpx_endpoint_t *ep) {
  for (struct tpx_peer *p = ep->peers, *n; p; p = n) {
    n = p->next;
    if (p->incoming && p->state == P_DEAD && !p->ever_ready && !p->in_acceptq && p->refs == 1) {
      unlist(p);
      peer_release(p);
    }
  }
}

void peer_release(struct tpx_peer *p) {
  if (--p->refs > 0) return;
  tpx_endpoint_t *ep = p->ep;
  if (p->state != P_DEAD) peer_shutdown(p, TPX_ECANCELED);
  unlist(p);
  for (int c = 0; c < p->nch; c++) {
    cq_free(&p->ch[c].sq);
    cq_free(&p->ch[c].rq);
  }
  free(p->ch);
  free(p->ids);
  free(p->cts);
  wbuf_free(&p->out);
  free(p->in);
  (void)ep;
  free(p);
}

void tpx_peer_close(tpx_peer_t *p) {
  if (!p) return;
  tpx_endpoint_t *ep = p->ep;
  pthread_mutex_lock(&ep->lock);
  if (!p->user_closed) {
    p->user_closed = 1;
    if (p->state != P_DEAD) peer_shutdown(p, TPX_ECANCELED);
    if (p->in_acceptq) { /* closed before tpx_accept handed it out */
      for (int i = 0; i < ep->acceptq_n; i++)
        if (ep->acceptq[i] == p) {
          memmove(&ep->acceptq[i], &ep->acceptq[i + 1], (size_t)(ep->acceptq_n - i - 1) * sizeof(p));
          ep->acceptq_n--;
          break;
        }
      p->in_acceptq = 0;
    }
    unlist(p);
    peer_release(p);
  }
  pthread_mutex_unlock(&ep->lock);
}

int tpx_peer_status(const tpx_peer_t *p) {
  if (!p) return TPX_EINVAL;
  int st = p->state;
  if (st == P_READY) return 0;
  if (st == P_DEAD || st == P_CLOSING) return p->err ? p->err : TPX_ECLOSED;
  return TPX_EINPROGRESS;
}
const char *tpx_peer_name(const tpx_peer_t *p) { return p ? p->name : ""; }
int tpx_peer_gpu(const tpx_peer_t *p) { return p ? p->gpu : -1; }
int tpx_peer_num_channels(const tpx_peer_t *p) { return p ? p->nch : 0; }

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
