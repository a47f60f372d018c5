/* A peer's channels (channel.h): allocation, transport listen, connect and
 * accept, close, and data progress through their windows. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "engine/abandon.h"
#include "engine/channel.h"
#include "engine/core.h"
#include "engine/gpu/gpu_path.h"
#include "engine/mem.h"
#include "engine/op.h"
#include "engine/peer.h"
#include "engine/placement.h"

int tpx__channels_alloc(struct tpx_peer *p, int n) {
  tpx_endpoint_t *ep = p->ep;
  p->ch = calloc((size_t)n, sizeof(*p->ch));
  if (!p->ch) return tpx_err_quiet(TPX_ENOMEM, "peer %s: out of memory", p->where);
  p->nch = n;
  for (int c = 0; c < n; c++) {
    struct tpx__channel *ch = &p->ch[c];
    ch->idx = c;
    ch->dev = tpx__placement_dev(ep, c); /* round robin over the GPU's NICs */
    ch->dial = calloc(1, sizeof(*ch->dial));
    if (!ch->dial) return tpx_err_quiet(TPX_ENOMEM, "peer %s: out of memory", p->where);
    int rc = tpx__window_init(&ch->sq, c, 0, (uint32_t)ep->window);
    if (rc == 0) rc = tpx__window_init(&ch->rq, c, 1, (uint32_t)ep->window);
    if (rc) return rc;
  }
  return 0;
}

int tpx__channels_listen(struct tpx_peer *p, int from, int to) {
  tpx_net_t *net = p->ep->net;
  struct tpx__gpu_bind b;
  int rc = tpx__gpu_bind_enter(p->ep, -1, &b); /* the plugin binds the listen comm to the current GPU */
  for (int c = from; c < to && rc == 0; c++) {
    struct tpx__channel *ch = &p->ch[c];
    memset(ch->my_handle, 0, sizeof(ch->my_handle));
    const uint8_t *key = p->net_key; /* data sockets bound to the session (auth.c hands it over) */
    rc = key ? net->ops->listen_keyed(net, ch->dev, key, ch->my_handle, &ch->listen_comm)
             : net->ops->listen(net, ch->dev, ch->my_handle, &ch->listen_comm);
    if (rc) rc = tpx_err_quiet(rc, "peer %s channel %d: listen on net device %d failed", p->where, c, ch->dev);
    else if (!ch->listen_comm)
      rc = tpx_err_quiet(TPX_EINTERNAL, "peer %s channel %d: listen returned no comm", p->where, c);
  }
  tpx__gpu_bind_leave(&b);
  return rc;
}


void tpx__channels_trim(struct tpx_peer *p, int n) {
  tpx_net_t *net = p->ep->net;
  for (int c = n; c < p->nch; c++) {
    struct tpx__channel *ch = &p->ch[c];
    if (ch->listen_comm) net->ops->close_listen(net, ch->listen_comm);
    ch->listen_comm = NULL;
    tpx__peer_channel_free(ch); /* trimmed before anything was dialled */
  }
  p->nch = n;
}

/* One direction's comm came up: give it its registration-cache slot. */
static int comm_up(struct tpx_peer *p, struct tpx__window *q, void *comm) {
  q->comm = comm;
  q->slot = tpx__mem_slot_alloc(p->ep, comm);
  if (q->slot < 0) return tpx_err_quiet(TPX_ENOMEM, "peer %s channel %d: out of memory", p->where, q->ch);
  return 0;
}

static int failed(struct tpx__chan_fail *f, int c, int accept, int code) {
  f->ch = c;
  f->accept = accept;
  f->code = code;
  return code;
}

/* Connect / accept of channel c; the caller binds the GPU. 1 both comms up,
 * 0 not yet (did: comms that came up), < 0 error (f says which call). */
static int channel_connect_one(struct tpx_peer *p, int c, int *did, struct tpx__chan_fail *f) {
  tpx_net_t *net = p->ep->net;
  struct tpx__channel *ch = &p->ch[c];
  int all = 1;
  if (!ch->sq.comm && ch->rt.want_handle) {
    all = 0;
  } else if (!ch->sq.comm) {
    void *comm = NULL;
    const uint8_t *key = p->net_key;
    struct tpx__dial_buf *d = ch->dial;
    tpx__err_clear(); /* a failure names the transport's reason, or only its code */
    int rc = key ? net->ops->connect_keyed(net, ch->dev, key, d->handle, &comm, &d->dev)
                 : net->ops->connect(net, ch->dev, d->handle, &comm, &d->dev);
    d->started = rc == 0 && !comm; /* ended either way: a comm, or the transport's failure */
    if (rc) /* the transport's reason (e.g. a keyed handle, TPX_EAUTH) stays in the message */
      return failed(f, c, 0, tpx_err_quiet(rc, "peer %s channel %d: connect on net device %d failed: %.200s",
                                           p->where, c, ch->dev,
                                           tpx_last_error()[0] ? tpx_last_error() : tpx_strerror(rc)));
    if (comm && (rc = comm_up(p, &ch->sq, comm)) != 0) return rc;
    if (comm) ++*did;
    else all = 0;
  }
  if (!ch->rq.comm && !ch->listen_comm) { /* listening anew after a failed accept (rt) */
    all = 0;
  } else if (!ch->rq.comm) {
    void *comm = NULL;
    tpx__err_clear();
    int rc = net->ops->accept(net, ch->listen_comm, &comm, &ch->recv_dev);
    if (rc) /* the transport's reason stays in the message, as for connect */
      return failed(f, c, 1, tpx_err_quiet(rc, "peer %s channel %d: accept on net device %d failed: %.200s",
                                           p->where, c, ch->dev,
                                           tpx_last_error()[0] ? tpx_last_error() : tpx_strerror(rc)));
    if (!comm) return 0;
    if ((rc = comm_up(p, &ch->rq, comm)) != 0) return rc;
    ++*did;
    rc = net->ops->close_listen(net, ch->listen_comm); /* one accept per listen */
    if (rc) TPX_WARN("peer %s channel %d: closeListen failed: %s", p->where, c, tpx_strerror(rc));
    ch->listen_comm = NULL;
  }
  return all;
}

/* One pass of connect/accept over the channels; the caller binds the GPU. */
static int channels_connect_pass(struct tpx_peer *p, int *did, struct tpx__chan_fail *f) {
  int all = 1;
  *did = 0;
  for (int c = 0; c < p->nch; c++) {
    int n = 0;
    int r = channel_connect_one(p, c, &n, f);
    *did += n;
    if (r < 0) return r;
    if (r == 0) all = 0;
  }
  return all;
}

int tpx__channel_connect(struct tpx_peer *p, int c) {
  struct tpx__gpu_bind b;
  struct tpx__chan_fail f;
  int did = 0;
  int rc = tpx__gpu_bind_enter(p->ep, -1, &b);
  if (rc == 0) rc = channel_connect_one(p, c, &did, &f);
  tpx__gpu_bind_leave(&b);
  return rc;
}

int tpx__channels_connect(struct tpx_peer *p, int *did, struct tpx__chan_fail *f) {
  struct tpx__gpu_bind b;
  *did = 0;
  f->ch = -1;
  int rc = tpx__gpu_bind_enter(p->ep, -1, &b); /* connect/accept bind comms to the current GPU */
  if (rc == 0) rc = channels_connect_pass(p, did, f);
  tpx__gpu_bind_leave(&b);
  return rc;
}

/* The first connect still in progress from channel c on is given up, and
 * what the transport says it went through goes to why. */
static void abort_why(struct tpx_peer *p, int c, char *why, size_t cap) {
  tpx_net_t *net = p->ep->net;
  while (c < p->nch && !(p->ch[c].dial && p->ch[c].dial->started)) c++;
  if (c >= p->nch || !net->ops->connect_abort) return;
  struct tpx__channel *ch = &p->ch[c];
  tpx__err_clear();
  int rc = net->ops->connect_abort(net, ch->dial->handle);
  ch->dial->started = 0;
  if (rc != 0 || !tpx_last_error()[0]) return;
  char tail[64]; /* the code's name the detail ends with: the caller names its own */
  snprintf(tail, sizeof(tail), " (%s)", tpx_strerror(TPX_ETIMEDOUT));
  size_t n = strlen(tpx_last_error()), t = strlen(tail);
  if (n >= t && strcmp(tpx_last_error() + n - t, tail) == 0) n -= t;
  snprintf(why, cap, "channel %d: %.*s", c, (int)n, tpx_last_error());
}

/* Channel ch's plugin connects and accepts that failed, appended to why
 * (short: it travels in the peer's report, at most WIRE_MAX_ERRMSG bytes). */
static void retry_why(const struct tpx__channel *ch, char *why, size_t cap) {
  const struct {
    const struct tpx_retry *r;
    const char *what;
  } runs[] = {{&ch->rt.acc, "accept"}, {&ch->rt.conn, "connect"}, {&ch->rt.peer_acc, "peer's accept"},
              {&ch->rt.peer_conn, "peer's connect"}};
  int first = 1;
  for (size_t i = 0; i < sizeof(runs) / sizeof(runs[0]); i++) {
    size_t n = strlen(why);
    if (!runs[i].r->failed || n + 1 >= cap) continue;
    char causes[160];
    tpx__retry_causes(runs[i].r, causes, sizeof(causes));
    if (first)
      snprintf(why + n, cap - n, "%schannel %d: %s on net device %d failed: %s", n ? "; " : "", ch->idx,
               runs[i].what, ch->dev, causes);
    else
      snprintf(why + n, cap - n, "; %s: %s", runs[i].what, causes);
    first = 0;
  }
}

void tpx__channels_setup_why(struct tpx_peer *p, int c, char *why, size_t cap) {
  why[0] = '\0';
  abort_why(p, c, why, cap);
  for (int i = c < p->nch ? c : 0; i < p->nch && (i == c || c >= p->nch); i++) retry_why(&p->ch[i], why, cap);
}

static void close_comm(struct tpx_peer *p, struct tpx__window *q) {
  tpx_net_t *net = p->ep->net;
  if (!q->comm) return;
  if (q->slot >= 0) tpx__mem_slot_release(p->ep, q->slot);
  int rc = q->is_recv ? net->ops->close_recv(net, q->comm) : net->ops->close_send(net, q->comm);
  if (rc) TPX_WARN("peer %s channel %d: close%s failed: %s", p->where, q->ch, q->is_recv ? "Recv" : "Send",
                   tpx_strerror(rc));
  q->comm = NULL;
  q->slot = -1;
}

int tpx__channel_drop_send(struct tpx_peer *p, struct tpx__channel *ch) {
  close_comm(p, &ch->sq);
  if (ch->dial && ch->dial->started) tpx__abandon_connect(p, ch); /* may take the buffer */
  if (!ch->dial && !(ch->dial = calloc(1, sizeof(*ch->dial))))
    return tpx_err_quiet(TPX_ENOMEM, "peer %s channel %d: out of memory", p->where, ch->idx);
  memset(ch->dial, 0, sizeof(*ch->dial));
  return 0;
}

void tpx__channel_drop_recv(struct tpx_peer *p, struct tpx__channel *ch) {
  tpx_net_t *net = p->ep->net;
  close_comm(p, &ch->rq);
  if (!ch->listen_comm) return;
  int rc = net->ops->close_listen(net, ch->listen_comm);
  if (rc) TPX_WARN("peer %s channel %d: closeListen failed: %s", p->where, ch->idx, tpx_strerror(rc));
  ch->listen_comm = NULL;
}

void tpx__channels_close(struct tpx_peer *p) {
  tpx_net_t *net = p->ep->net;
  for (int c = 0; c < p->nch; c++) {
    struct tpx__channel *ch = &p->ch[c];
    tpx__window_purge(p, &ch->sq);
    tpx__window_purge(p, &ch->rq);
    close_comm(p, &ch->sq);
    close_comm(p, &ch->rq);
    if (ch->dial && ch->dial->started) tpx__abandon_connect(p, ch);
    if (ch->listen_comm) {
      int rc = net->ops->close_listen(net, ch->listen_comm);
      if (rc) TPX_WARN("peer %s channel %d: closeListen failed: %s", p->where, c, tpx_strerror(rc));
      ch->listen_comm = NULL;
    }
  }
}

int tpx__channel_progress(struct tpx_peer *p, int c) {
  struct tpx__channel *ch = &p->ch[c];
  int r = tpx__window_progress(p, &ch->sq, tpx__op_chunk_done);
  if (r < 0) return r;
  int s = tpx__window_progress(p, &ch->rq, tpx__op_chunk_done);
  return s < 0 ? s : r + s;
}

int tpx__channels_busy(const struct tpx_peer *p) {
  if (p->inflight) return 1;
  for (int c = 0; c < p->nch; c++)
    if (p->ch[c].sq.pend || p->ch[c].rq.pend) return 1;
  return 0;
}
