/* The sliding window of one comm direction (window.h): capacity checked
 * before posting, FIFO head-only testing with tri-state release, a deadline
 * per request, the receive consume stage before irecvConsumed. Progress is
 * per comm, never per transfer. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/timeline.h"
#include "common/util.h"
#include "engine/core.h"
#include "engine/gpu/gpu_path.h"
#include "engine/gpu/pack_runs.h"
#include "engine/sum_stage.h"
#include "engine/mem.h"
#include "engine/pack.h"
#include "engine/route.h"
#include "engine/window.h"
#include "net/caps.h"

int tpx__window_init(struct tpx__window *q, int ch, int is_recv, uint32_t cap) {
  memset(q, 0, sizeof(*q));
  q->ring = calloc(cap, sizeof(*q->ring));
  if (!q->ring) return tpx_err_quiet(TPX_ENOMEM, "channel %d: out of memory", ch);
  q->cap = cap;
  q->ch = ch;
  q->is_recv = is_recv;
  q->slot = -1;
  return 0;
}

void tpx__window_free(struct tpx__window *q) {
  tpx__gpu_window_free(q);
  tpx__pack_free(&q->pack);
  free(q->ring);
  q->ring = NULL;
}

void tpx__window_enqueue(struct tpx_peer *p, struct tpx__window *q, struct tpx__wlink *l) {
  p->ep->queued++;
  l->next = NULL;
  l->queued = 1;
  if (q->pend_tail) q->pend_tail->next = l;
  else q->pend = l;
  q->pend_tail = l;
}

static void account(struct tpx_peer *p, struct tpx__op *o, int delta) {
  o->inflight += delta;
  p->inflight += delta;
  p->ep->inflight += delta;
}

static const char *dir(const struct tpx__window *q) { return q->is_recv ? "recv" : "send"; }

/* Where the chunk at l->cur moves from / to: *m and *off (the first
 * piece's, or the pack ring's), with *nv pieces in iov for a vectored
 * request (0: one buffer) and *packed 1 for the ring, 2 for GPU staging's
 * arena. 1 ready, 0 the ring is full, < 0 error. */
static int chunk_where(struct tpx_peer *p, struct tpx__window *q, struct tpx__wlink *l, struct iovec *iov, int *nv,
                       int *packed, struct tpx_mem **m, uint64_t *off) {
  struct tpx__op *o = l->op;
  const struct tpx__xent *e = &o->ents[l->cur.e];
  *nv = *packed = 0;
  int gathered = tpx__plan_gathered(o->ents, &l->cur);
  if (gathered) *nv = tpx__pack_iov(p->ep->net, o, &l->cur, iov);
  if (*nv == 0 && gathered && !o->discard && p->ep->gpath) {
    /* Pieces in GPU memory: GPU staging gathers / scatters the chunk in its
     * arena (gpu/pack_runs.h); m is its first GPU piece's registration. */
    struct tpx_mem *gm = tpx__pack_gpu_mem(o->ents, &l->cur);
    if (gm) {
      *m = gm;
      *off = 0;
      *packed = 2;
      return 1;
    }
  }
  if (*nv == 0 && (o->discard || gathered)) {
    /* Several entries: through the pack ring. A refused incoming write lands
     * there too, never in user memory, and is dropped at release: each
     * chunk in flight has its own span, so the transport's I/O threads never
     * write the same bytes at once. */
    int r = tpx__pack_prep(p->ep, &q->pack, !q->is_recv, o->ents, &l->cur, m, off);
    if (r < 0)
      return tpx_err_quiet(r, "peer %s channel %d: chunk %llu of %s: %s", p->where, q->ch,
                           (unsigned long long)l->cur.idx, tpx__op_kind_name(o->kind),
                           tpx_last_error());
    *packed = r;
    return r; /* 0: its ring is full until earlier chunks of this comm leave */
  }
  *m = e->mem;
  *off = e->off + l->cur.off;
  return 1;
}

/* The transport request for a chunk: one buffer, or nv pieces. */
static int post_req(tpx_net_t *net, struct tpx__window *q, void *data, uint64_t len, void *mh, const struct iovec *iov,
                    int nv, void **req) {
  if (nv) /* the pieces' memory needs no handle: host memory, a transport of our own (caps.iov) */
    return q->is_recv ? net->ops->irecvv(net, q->comm, iov, nv, 0, NULL, req)
                      : net->ops->isendv(net, q->comm, iov, nv, 0, NULL, req);
  if (!q->is_recv) return net->ops->isend(net, q->comm, data, (size_t)len, 0, mh, req);
  size_t sz = (size_t)len;
  int tag = 0; /* tags are ignored: matching is FIFO per comm */
  return net->ops->irecv(net, q->comm, 1, &data, &sz, &tag, &mh, req);
}

/* Post the next pending chunk. 1 posted, 2 posted from GPU staging, 0
 * back-pressure, < 0 error. */
static int post_one(struct tpx_peer *p, struct tpx__window *q) {
  tpx_endpoint_t *ep = p->ep;
  tpx_net_t *net = ep->net;
  struct tpx__wlink *l = q->pend;
  struct tpx__op *o = l->op;
  uint64_t len = tpx__plan_len(o->ents, o->chunk, &l->cur);
  struct tpx_mem *m;
  uint64_t off;
  int packed, nv;
  struct iovec iov[TPX_NET_IOV_MAX];
  int w = chunk_where(p, q, l, iov, &nv, &packed, &m, &off);
  if (w <= 0) return w;
  void *mh = NULL;
  void *data = m->base + off;
  /* GPU memory may go through pinned staging instead (gpu/gpu_path.h). */
  int gp = ep->gpath ? tpx__gpu_post_prep(p, q, l, m, off, len, &data, &mh) : GPU_POST_DEFAULT;
  if (gp == GPU_POST_WAIT) return 0;
  if (gp < 0)
    return tpx_err_quiet(gp, "peer %s channel %d: GPU path for chunk %llu of %s: %s", p->where, q->ch,
                         (unsigned long long)l->cur.idx, tpx__op_kind_name(o->kind), tpx_last_error());
  if (packed == 2 && gp != GPU_POST_STAGED) /* only sides that stage take packed GPU plans (target.c) */
    return tpx_err_quiet(TPX_EINTERNAL, "peer %s channel %d: packed chunk %llu of %s in GPU memory is not staged",
                         p->where, q->ch, (unsigned long long)l->cur.idx, tpx__op_kind_name(o->kind));
  if (packed == 2) packed = 0; /* the arena is the GPU path's: no pack ring span */
  int rc = gp == GPU_POST_STAGED || nv ? 0 : tpx__mem_mhandle(m, q->slot, q->comm, off, &mh);
  if (rc)
    return tpx_err_quiet(rc, "peer %s channel %d: registering memory for chunk %llu of %s failed: %s", p->where,
                         q->ch, (unsigned long long)l->cur.idx, tpx__op_kind_name(o->kind), tpx_last_error());
  void *req = NULL;
  rc = post_req(net, q, data, len, mh, iov, nv, &req);
  if (rc)
    return tpx_err_quiet(rc, "peer %s channel %d: i%s of chunk %llu (%llu bytes) of %s failed", p->where, q->ch,
                         dir(q), (unsigned long long)l->cur.idx, (unsigned long long)len, tpx__op_kind_name(o->kind));
  if (!req) return 0;
  if (ep->gpath) tpx__gpu_post_done(p, q, l, m, off, len, mh, gp);
  struct tpx__wslot *s = &q->ring[q->tail % q->cap];
  s->req = req;
  s->op = o;
  s->data = data;
  s->len = len;
  s->chunk = l->cur.idx;
  s->deadline = tpx__now_ns() + tpx__ms_to_ns(ep->cfg.timeout_ms);
  s->state = WS_POSTED;
  s->pack_end = packed ? tpx__pack_commit(q->pack) : 0;
  s->nv = (uint16_t)nv;
  if (packed || nv) s->pcur = l->cur;
  if (q->tail == q->head) { /* the window goes busy */
    q->busy_since = tpx__now_ns();
    q->moved_ns = q->busy_since;
  }
  q->tail++;
  q->posted++;
  account(p, o, 1);
  s->sum_have = 0;
  if (!q->is_recv && p->sum) { /* its sum: where the CPU sees the bytes, else its GPU's */
    int cpu = nv || packed || gp == GPU_POST_STAGED || m->type != TPX_MEM_CUDA;
    if ((rc = tpx__sum_stage_sent(p, q, s, cpu ? -1 : m->device, iov)) != 0) return rc;
  }
  TPX_TL(q->is_recv ? TL_RECV_POST : TL_SEND_POST, q->ch, o->id, l->cur.idx, len);
  TPX_TRACE("peer %s channel %d: i%s chunk %llu of %s %llu (%llu bytes)", p->where, q->ch, dir(q),
            (unsigned long long)l->cur.idx, tpx__op_kind_name(o->kind), (unsigned long long)o->id,
            (unsigned long long)len);
  if (!tpx__route_advance(l, &l->cur)) {
    q->pend = l->next;
    if (!q->pend) q->pend_tail = NULL;
    l->next = NULL;
    l->queued = 0;
    p->ep->queued--;
  }
  return gp == GPU_POST_STAGED ? 2 : 1;
}

/* Test the oldest not-done request, as long as they come back done. Returns
 * the number of state changes, or < 0. */
static int test_head(struct tpx_peer *p, struct tpx__window *q) {
  tpx_endpoint_t *ep = p->ep;
  tpx_net_t *net = ep->net;
  int did = 0;
  while (q->test < q->tail) {
    struct tpx__wslot *s = &q->ring[q->test % q->cap];
    struct tpx__op *o = s->op;
    int done = 0;
    size_t got = SIZE_MAX; /* left alone by transports that do not report sizes (TCPX) */
    int rc = net->ops->test(net, s->req, &done, q->is_recv ? &got : NULL);
    if (rc == 0 && done && got != SIZE_MAX && got != s->len) /* every byte of a chunk is sent, once */
      return tpx_err_quiet(TPX_EPROTO, "peer %s channel %d: chunk %llu of %s %llu: the peer sent %zu bytes, "
                           "the chunk has %llu", p->where, q->ch, (unsigned long long)s->chunk,
                           tpx__op_kind_name(o->kind), (unsigned long long)o->id, got, (unsigned long long)s->len);
    if (rc == 0 && done) {
      TPX_TRACE("peer %s channel %d: %s chunk %llu of %s %llu done in the transport", p->where, q->ch, dir(q),
                (unsigned long long)s->chunk, tpx__op_kind_name(o->kind), (unsigned long long)o->id);
      TPX_TL(q->is_recv ? TL_RECV_DONE : TL_SEND_DONE, q->ch, o->id, s->chunk, 0);
      s->state = WS_NET_DONE;
      q->test++;
      did++;
      if (!q->is_recv) continue;
      if (p->sum && !o->discard) {
        tpx__sum_stage_landed(p, q, s, 0);
        s->deadline = tpx__now_ns() + tpx__ms_to_ns(ep->cfg.timeout_ms); /* for its sender's sum */
      }
      if (!ep->consume) {
        s->state = WS_CONSUMED;
        continue;
      }
      int c = ep->consume->start(p, q, s);
      if (c < 0)
        return tpx_err_quiet(c, "peer %s channel %d: consume of chunk %llu failed: %s", p->where, q->ch,
                             (unsigned long long)s->chunk, tpx_last_error());
      continue;
    }
    if (rc == 0 || rc == TPX_ESYSTEM) { /* not ready (rc 2 + done 0 may be transient) */
      if (tpx__now_ns() > s->deadline)
        return tpx_err_quiet(TPX_ETIMEDOUT, "peer %s channel %d: %s chunk %llu of %s %llu not done after %d ms%s",
                             p->where, q->ch, dir(q), (unsigned long long)s->chunk, tpx__op_kind_name(o->kind),
                             (unsigned long long)o->id, ep->cfg.timeout_ms, rc ? " (peer closed)" : "");
      break;
    }
    return tpx_err_quiet(rc, "peer %s channel %d: test of %s chunk %llu of %s %llu failed", p->where, q->ch, dir(q),
                         (unsigned long long)s->chunk, tpx__op_kind_name(o->kind), (unsigned long long)o->id);
  }
  return did;
}

/* Release finished heads in ring order: a receive only once consumed,
 * checked and handed back (irecvConsumed). Each release reports its chunk
 * upward. */
static int release_heads(struct tpx_peer *p, struct tpx__window *q, window_done_fn done) {
  tpx_endpoint_t *ep = p->ep;
  tpx_net_t *net = ep->net;
  int did = 0;
  while (q->head < q->test) {
    struct tpx__wslot *s = &q->ring[q->head % q->cap];
    if (q->is_recv) {
      if (s->state != WS_CONSUMED) {
        int c = ep->consume ? ep->consume->poll(p, q, s) : 1;
        if (c < 0)
          return tpx_err_quiet(c, "peer %s channel %d: consume of chunk %llu failed: %s", p->where, q->ch,
                               (unsigned long long)s->chunk, tpx_last_error());
        if (c == 0) break;
        s->state = WS_CONSUMED;
      }
      int k = tpx__sum_stage_recv_ok(p, q, s);
      if (k < 0) return k;
      if (k == 0) break;
      if (net->ops->irecv_consumed) {
        int rc = net->ops->irecv_consumed(net, q->comm, 1, s->req);
        if (rc)
          return tpx_err_quiet(rc, "peer %s channel %d: irecvConsumed of chunk %llu failed", p->where, q->ch,
                               (unsigned long long)s->chunk);
      }
    }
    if (!q->is_recv && p->sum) {
      int k = tpx__sum_stage_send_ok(p, q, s);
      if (k < 0) return k;
      if (k == 0) break;
    }
    struct tpx__op *o = s->op;
    if (s->pack_end) { /* a packed receive's bytes go to their entries now */
      tpx__pack_release(q->pack, s->pack_end, o->ents, &s->pcur, q->is_recv && !o->discard ? s->data : NULL);
      s->pack_end = 0;
    }
    if (q->is_recv) {
      TPX_TL(TL_RECV_LANDED, q->ch, o->id, s->chunk, 0);
      TPX_TRACE("peer %s channel %d: recv chunk %llu of %s %llu landed", p->where, q->ch,
                (unsigned long long)s->chunk, tpx__op_kind_name(o->kind), (unsigned long long)o->id);
    }
    s->req = NULL;
    s->op = NULL;
    q->head++;
    q->done++;
    q->bytes_done += s->len;
    q->moved_ns = tpx__now_ns();
    if (q->head == q->tail && q->busy_since) { /* idle again */
      q->busy_ns += q->moved_ns - q->busy_since;
      q->busy_since = 0;
    }
    did++;
    account(p, o, -1);
    int rc = done(o, q->ch);
    if (rc < 0) return rc;
  }
  return did;
}

static int drain(struct tpx_peer *p, struct tpx__window *q, window_done_fn done) {
  int a = test_head(p, q);
  if (a < 0) return a;
  int b = release_heads(p, q, done);
  return b < 0 ? b : a + b;
}

/* Sends staged from GPU memory: at most this many posts per comm and pass.
 * Each post starts the next staging copy, and those finish about as fast as
 * the loop launches them, so without a bound one comm posts its whole window
 * while every other comm's sockets wait for their first chunk
 * (docs/notes/gpu-vs-host-memory.md). */
#define STAGED_POSTS_PER_PASS 4

int tpx__window_progress(struct tpx_peer *p, struct tpx__window *q, window_done_fn done) {
  if (!q->comm) return 0;
  int did = drain(p, q, done);
  if (did < 0) return did;
  if (q->gpu && q->pend) tpx__gpu_window_ahead(p, q); /* staging copies of the next sends */
  int staged = STAGED_POSTS_PER_PASS;
  while (q->pend && q->tail - q->head < q->cap) { /* capacity checked BEFORE posting */
    int r = post_one(p, q);
    if (r < 0) return r;
    if (r == 0) break;
    did++;
    int last = r == 2 && --staged == 0;
    r = drain(p, q, done); /* drain this comm right after every post */
    if (r < 0) return r;
    did += r;
    if (last) break;
  }
  return did;
}

void tpx__window_purge(struct tpx_peer *p, struct tpx__window *q) {
  tpx__gpu_window_purge(p, q); /* GPU copies / unpacks touching memory end first */
  for (uint64_t i = q->head; i < q->tail; i++) {
    struct tpx__wslot *s = &q->ring[i % q->cap];
    if (s->op) account(p, s->op, -1);
    tpx__sum_stage_drop(p, s);
    s->op = NULL;
    s->req = NULL;
    s->pack_end = 0;
  }
  tpx__pack_purge(q->pack);
  q->head = q->test = q->tail = 0;
  q->busy_since = 0;
  for (struct tpx__wlink *l = q->pend, *n; l; l = n) {
    n = l->next;
    l->next = NULL;
    l->queued = 0;
    p->ep->queued--;
  }
  q->pend = q->pend_tail = NULL;
}
