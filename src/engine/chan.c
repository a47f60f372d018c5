/* Per-comm request rings: capacity checked before posting, FIFO head-only
 * testing with tri-state release, a deadline per request, receive consume
 * stage before irecvConsumed. Progress is per comm, never per transfer. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/engine.h"

static const char *kind_name(int k) {
  switch (k) {
  case K_WRITE: return "write";
  case K_READ: return "read";
  case K_SEND: return "send";
  case K_RECV: return "recv";
  case K_IN_WRITE: return "incoming write";
  case K_SERVE_READ: return "served read";
  default: return "op";
  }
}

int cq_init(struct cq *q, int ch, int is_recv, uint32_t window) {
  memset(q, 0, sizeof(*q));
  q->ring = calloc(window, sizeof(*q->ring));
  if (!q->ring) return tpx_err(TPX_ENOMEM, "channel %d: out of memory", ch);
  q->cap = window;
  q->ch = ch;
  q->is_recv = is_recv;
  q->slot = -1;
  return 0;
}

void cq_free(struct cq *q) {
  gpu_cq_free(q);
  free(q->ring);
  q->ring = NULL;
}

void cq_enqueue(struct tpx_peer *p, struct cq *q, struct link *l) {
  p->ep->queued++;
  l->next = NULL;
  l->queued = 1;
  if (q->pend_tail) q->pend_tail->next = l;
  else q->pend = l;
  q->pend_tail = l;
}

static void account(struct tpx_peer *p, struct op *o, int delta) {
  o->inflight += delta;
  p->inflight += delta;
  p->ep->inflight += delta;
}

/* Post the next pending chunk. 1 posted, 0 back-pressure, < 0 peer failed. */
static int cq_post_one(struct tpx_peer *p, struct cq *q) {
  tpx_endpoint_t *ep = p->ep;
  tpx_net_t *net = ep->net;
  struct link *l = q->pend;
  struct op *o = l->op;
  uint64_t len = plan_len(o->ents, o->chunk, &l->cur);
  struct tpx_mem *m;
  uint64_t off;
  if (o->discard) { /* refused incoming write: land in scratch, never in user memory */
    m = ep->scratch;
    off = 0;
  } else {
    const struct xent *e = &o->ents[l->cur.e];
    m = e->mem;
    off = e->off + l->cur.off;
  }
  void *mh = NULL;
  void *data = m->base + off;
  /* GPU memory may go through pinned staging instead (gpu_path.h). */
  int gp = ep->gpath ? gpu_post_prep(p, q, l, m, off, len, &data, &mh) : GPU_POST_DEFAULT;
  if (gp == GPU_POST_WAIT) return 0;
  if (gp < 0) {
    peer_fail(p, gp, "peer %s channel %d: GPU path for chunk %llu of %s: %s", p->where, q->ch,
              (unsigned long long)l->cur.idx, kind_name(o->kind), tpx_last_error());
    return -1;
  }
  int rc = gp == GPU_POST_STAGED ? 0 : mem_mhandle(m, q->slot, q->comm, off, &mh);
  if (rc) {
    peer_fail(p, rc, "peer %s channel %d: registering memory for chunk %llu of %s failed", p->where,
              q->ch, (unsigned long long)l->cur.idx, kind_name(o->kind));
    return -1;
  }
  void *req = NULL;
  if (q->is_recv) {
    size_t sz = (size_t)len;
    int tag = 0; /* tags are ignored: matching is FIFO per comm */
    rc = net->ops->irecv(net, q->comm, 1, &data, &sz, &tag, &mh, &req);
  } else {
    rc = net->ops->isend(net, q->comm, data, (size_t)len, 0, mh, &req);
  }
  if (rc) {
    peer_fail(p, rc, "peer %s channel %d: %s of chunk %llu (%llu bytes) of %s failed", p->where,
              q->ch, q->is_recv ? "irecv" : "isend", (unsigned long long)l->cur.idx,
              (unsigned long long)len, kind_name(o->kind));
    return -1;
  }
  if (!req) return 0;
  if (ep->gpath) gpu_post_done(p, q, m, off, len, mh, gp);
  struct rslot *s = &q->ring[q->tail % q->cap];
  s->req = req;
  s->op = o;
  s->data = data;
  s->len = len;
  s->chunk = l->cur.idx;
  s->deadline = tpx_now_ns() + ms_to_ns(ep->cfg.timeout_ms);
  s->state = RS_POSTED;
  q->tail++;
  q->posted++;
  account(p, o, 1);
  TPX_TRACE("peer %s channel %d: %s chunk %llu of %s %llu (%llu bytes)", p->where, q->ch,
            q->is_recv ? "irecv" : "isend", (unsigned long long)l->cur.idx, kind_name(o->kind),
            (unsigned long long)o->id, (unsigned long long)len);
  if (!plan_advance(o->ents, o->nents, o->chunk, &l->cur, o->nch)) {
    q->pend = l->next;
    if (!q->pend) q->pend_tail = NULL;
    l->next = NULL;
    l->queued = 0;
    p->ep->queued--;
  }
  return 1;
}

/* Test the oldest not-done request, then release finished heads. Returns the
 * number of state changes, or < 0 when the peer failed. */
static int cq_drain(struct tpx_peer *p, struct cq *q) {
  tpx_endpoint_t *ep = p->ep;
  tpx_net_t *net = ep->net;
  int did = 0;
  while (q->test < q->tail) {
    struct rslot *s = &q->ring[q->test % q->cap];
    int done = 0;
    int rc = net->ops->test(net, s->req, &done, NULL);
    if (rc == TPX_ESYSTEM && done) {
      /* TCPX: the peer closed after this request's data arrived. */
      TPX_DEBUG("peer %s channel %d: chunk %llu done as the peer closed", p->where, q->ch,
                (unsigned long long)s->chunk);
      rc = 0;
    }
    if (rc == 0 && done) {
      TPX_TRACE("peer %s channel %d: %s chunk %llu of %s %llu done in the transport", p->where, q->ch,
                q->is_recv ? "recv" : "send", (unsigned long long)s->chunk, kind_name(s->op->kind),
                (unsigned long long)s->op->id);
      s->state = RS_NET_DONE;
      q->test++;
      did++;
      if (q->is_recv) {
        if (ep->consume) {
          int c = ep->consume->start(p, q, s);
          if (c < 0) {
            peer_fail(p, c, "peer %s channel %d: consume of chunk %llu failed", p->where, q->ch,
                      (unsigned long long)s->chunk);
            return -1;
          }
        } else {
          s->state = RS_CONSUMED;
        }
      }
      continue;
    }
    if (rc == 0 || rc == TPX_ESYSTEM) { /* not ready (rc 2 + done 0 may be transient) */
      if (tpx_now_ns() > s->deadline) {
        struct op *o = s->op;
        peer_fail(p, TPX_ETIMEDOUT,
                  "peer %s channel %d: %s chunk %llu of %s %llu not done after %d ms%s", p->where,
                  q->ch, q->is_recv ? "recv" : "send", (unsigned long long)s->chunk,
                  kind_name(o->kind), (unsigned long long)o->id, ep->cfg.timeout_ms,
                  rc ? " (peer closed)" : "");
        return -1;
      }
      break;
    }
    struct op *o = s->op;
    peer_fail(p, rc, "peer %s channel %d: test of %s chunk %llu of %s %llu failed", p->where,
              q->ch, q->is_recv ? "recv" : "send", (unsigned long long)s->chunk,
              kind_name(o->kind), (unsigned long long)o->id);
    return -1;
  }
  while (q->head < q->test) {
    struct rslot *s = &q->ring[q->head % q->cap];
    if (q->is_recv) {
      if (s->state != RS_CONSUMED) {
        int c = ep->consume ? ep->consume->poll(p, q, s) : 1;
        if (c < 0) {
          peer_fail(p, c, "peer %s channel %d: consume of chunk %llu failed", p->where, q->ch,
                    (unsigned long long)s->chunk);
          return -1;
        }
        if (c == 0) break;
        s->state = RS_CONSUMED;
      }
      if (net->ops->irecv_consumed) {
        int rc = net->ops->irecv_consumed(net, q->comm, 1, s->req);
        if (rc) {
          peer_fail(p, rc, "peer %s channel %d: irecvConsumed of chunk %llu failed", p->where, q->ch,
                    (unsigned long long)s->chunk);
          return -1;
        }
      }
    }
    struct op *o = s->op;
    if (q->is_recv)
      TPX_TRACE("peer %s channel %d: recv chunk %llu of %s %llu landed", p->where, q->ch,
                (unsigned long long)s->chunk, kind_name(o->kind), (unsigned long long)o->id);
    s->req = NULL;
    s->op = NULL;
    q->head++;
    q->done++;
    did++;
    account(p, o, -1);
    op_chunk_done(o);
    if (p->state == P_DEAD) return -1;
  }
  return did;
}

int cq_progress(struct tpx_peer *p, struct cq *q) {
  if (!q->comm) return 0;
  int did = cq_drain(p, q);
  if (did < 0) return did;
  if (q->gpu && q->pend) gpu_cq_ahead(p, q); /* staging copies of the next sends */
  while (q->pend && q->tail - q->head < q->cap) { /* capacity checked BEFORE posting */
    int r = cq_post_one(p, q);
    if (r < 0) return r;
    if (r == 0) break;
    did++;
    r = cq_drain(p, q); /* drain this comm right after every post */
    if (r < 0) return r;
    did += r;
  }
  return did;
}

int peer_data_progress(struct tpx_peer *p) {
  int did = 0;
  for (int c = 0; c < p->nch; c++) {
    struct channel *ch = &p->ch[c];
    int r = cq_progress(p, &ch->sq);
    if (r < 0) return did;
    did += r;
    r = cq_progress(p, &ch->rq);
    if (r < 0) return did;
    did += r;
  }
  return did;
}

/* Forget every request and pending chunk (the comm is being closed, which
 * frees the transport's requests). */
void cq_purge(struct tpx_peer *p, struct cq *q) {
  gpu_cq_purge(p, q); /* GPU copies / unpacks touching memory end first */
  for (uint64_t i = q->head; i < q->tail; i++) {
    struct rslot *s = &q->ring[i % q->cap];
    if (s->op) account(p, s->op, -1);
    s->op = NULL;
    s->req = NULL;
  }
  q->head = q->test = q->tail = 0;
  for (struct link *l = q->pend, *n; l; l = n) {
    n = l->next;
    l->next = NULL;
    l->queued = 0;
    p->ep->queued--;
  }
  q->pend = q->pend_tail = NULL;
}
