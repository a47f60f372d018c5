/* Host staging for GPU memory over transports that take only host pointers.
 *
 * Each comm direction owns one pinned, GPU-mapped arena registered once with
 * that comm and used as a byte ring. Allocation follows posting order and
 * release follows the ring's FIFO release, so the ring needs only a head and
 * a tail. Sends: device-to-host copies of the next chunks are started ahead
 * (up to GPU_PRE_MAX, as far as the arena allows) on a persistent stream,
 * each with a pooled event; a chunk is posted once its copy finished, so the
 * copy of chunk k+1 runs while chunk k is on the wire. Receives: the irecv
 * lands in the arena; at completion one host-to-device copy per chunk is
 * queued and the slot is released when its event fires, while later chunks
 * keep arriving. No allocation, stream or event creation, and no
 * synchronisation per chunk. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "engine/gpu_path_int.h"

#define ARENA_MAX (1ull << 30) /* v7 regMr takes an int size */

static int arena_setup(struct gpu_cq *gq, int dev) {
  if (gq->arena) return 0;
  if (!gq->comm) return tpx_err(TPX_ECLOSED, "channel %d: comm closed", gq->ch);
  /* TPX_STAGING_BYTES is the floor; a full window of chunks fits (sends:
   * two, so the next window is already copied when slots free up), and any
   * chunk (the peer's size may differ from ours) twice. */
  tpx_endpoint_t *ep = gq->g->ep;
  uint64_t sz = ep->cfg.staging_bytes, win = (uint64_t)ep->window * ep->cfg.chunk_bytes * (gq->is_recv ? 1 : 2);
  if (sz < win) sz = win < (256ull << 20) ? win : (256ull << 20);
  if (sz < 2ull * WIRE_MAX_CHUNK) sz = 2ull * WIRE_MAX_CHUNK;
  if (sz > ARENA_MAX) sz = ARENA_MAX;
  sz = (sz + GPU_PAGE - 1) & ~(uint64_t)(GPU_PAGE - 1);
  void *a = NULL;
  int rc = tpx_gpu_host_alloc(dev, (size_t)sz, &a);
  if (rc)
    return tpx_err(rc, "channel %d: pinned staging of %llu bytes (TPX_STAGING_BYTES) on GPU %d: %s", gq->ch,
                   (unsigned long long)sz, dev, tpx_last_error());
  void *mh = NULL;
  rc = gq->net->ops->reg_mr(gq->net, gq->comm, a, (size_t)sz, TPX_PTR_HOST, &mh);
  if (rc) {
    tpx_gpu_host_free(dev, a);
    return tpx_err(rc, "channel %d: registering %llu bytes of staging with the transport failed", gq->ch,
                   (unsigned long long)sz);
  }
  gq->arena = a;
  gq->asize = (size_t)sz;
  gq->adev = dev;
  gq->amh = mh;
  gq->a_head = gq->a_tail = 0;
  TPX_DEBUG("channel %d: %s staging of %llu bytes (GPU %d)", gq->ch, gq->is_recv ? "receive" : "send",
            (unsigned long long)sz, dev);
  return 0;
}

/* Room for len contiguous bytes after the tail? Wrapping skips the end. */
static int arena_fit(const struct gpu_cq *gq, uint64_t len, uint64_t *off, uint64_t *end) {
  uint64_t t = gq->a_tail, o = t % gq->asize;
  if (o + len > gq->asize) {
    t += gq->asize - o;
    o = 0;
  }
  if (t + len - gq->a_head > gq->asize) return 0;
  *off = o;
  *end = t + len;
  return 1;
}

/* Ring slots the engine released since the last look give their bytes back. */
void stage_reclaim(struct gpu_cq *gq, struct cq *q) {
  while (gq->rel_pos < q->head) {
    struct gslot *s = &gq->slots[gq->rel_pos % gq->cap];
    if (s->aend) {
      gq->a_head = s->aend;
      s->aend = 0;
    }
    gq->rel_pos++;
  }
}

/* ---- send side ---- */

/* Start the copy of one chunk into the arena. 1 started, 0 no room, < 0. */
static int stage_one(struct gpu_cq *gq, struct op *o, const struct cursor *c) {
  const struct xent *e = &o->ents[c->e];
  struct tpx_mem *m = e->mem;
  uint64_t len = plan_len(o->ents, o->chunk, c);
  uint64_t off, end;
  if (!arena_fit(gq, len, &off, &end)) return 0;
  struct gpu_dev *d = gq->g->devs[m->device];
  if (!d) return tpx_err(TPX_EINTERNAL, "channel %d: GPU %d was never set up", gq->ch, m->device);
  tpx_gpu_event_t *ev = NULL;
  int rc = tpx_gpu_event_get(d->pool, &ev);
  if (rc) return rc;
  tpx_gpu_stream_t *st = d->d2h[gq->ch % GPU_NSTREAMS];
  rc = tpx_gpu_memcpy_async(st, gq->arena + off, m->base + e->off + c->off, (size_t)len);
  if (rc == 0) rc = tpx_gpu_event_record(ev, st);
  if (rc) {
    tpx_gpu_event_put(d->pool, ev);
    return tpx_err(rc, "channel %d: device-to-host copy of chunk %llu (%llu bytes, GPU %d) failed: %s", gq->ch,
                   (unsigned long long)c->idx, (unsigned long long)len, m->device, tpx_last_error());
  }
  struct gpre *p = &gq->pre[(gq->pre_head + gq->pre_n) % GPU_PRE_MAX];
  *p = (struct gpre){o, c->idx, off, end, len, m->device, ev};
  gq->pre_n++;
  gq->a_tail = end;
  gq->g->staged_out += len;
  return 1;
}

/* Copy ahead: the pre-queue holds the first pre_n CUDA chunks of the
 * comm's pending sequence; extend it while there is room. */
int stage_ahead(struct cq *q, struct gpu_cq *gq, int setup) {
  uint32_t seen = 0;
  int budget = 2 * GPU_PRE_MAX + 16; /* chunks looked at (host chunks in between are skipped) */
  for (struct link *l = q->pend; l && gq->pre_n < GPU_PRE_MAX; l = l->next) {
    struct op *o = l->op;
    struct cursor c = l->cur;
    for (;;) {
      struct tpx_mem *m = o->ents[c.e].mem;
      if (m->type == TPX_MEM_CUDA) {
        if (seen >= gq->pre_n) {
          if (!gq->arena) {
            if (!setup) return 0;
            int rc = arena_setup(gq, m->device);
            if (rc) return rc;
          }
          int r = stage_one(gq, o, &c);
          if (r <= 0) return r;
          if (gq->pre_n >= GPU_PRE_MAX) return 0;
        }
        seen++;
      }
      if (--budget <= 0) return 0;
      if (!plan_advance(o->ents, o->nents, o->chunk, &c, o->nch)) break;
    }
  }
  return 0;
}

int stage_send_prep(struct cq *q, struct gpu_cq *gq, struct link *l, void **data, void **mh) {
  int rc = stage_ahead(q, gq, 1);
  if (rc < 0) return rc;
  if (gq->pre_n == 0) return GPU_POST_WAIT; /* no staging room until sends complete */
  struct gpre *e = &gq->pre[gq->pre_head];
  if (e->o != l->op || e->idx != l->cur.idx)
    return tpx_err(TPX_EINTERNAL, "channel %d: staging out of step (chunk %llu staged, %llu to post)", gq->ch,
                   (unsigned long long)e->idx, (unsigned long long)l->cur.idx);
  if (e->ev) {
    int r = tpx_gpu_event_query(e->ev);
    if (r < 0)
      return tpx_err(r, "channel %d: device-to-host copy of chunk %llu failed: %s", gq->ch,
                     (unsigned long long)e->idx, tpx_last_error());
    if (r == 0) return GPU_POST_WAIT;
    tpx_gpu_event_put(gq->g->devs[e->dev]->pool, e->ev);
    e->ev = NULL;
  }
  *data = gq->arena + e->aoff;
  *mh = gq->amh;
  return GPU_POST_STAGED;
}

void stage_send_done(struct gpu_cq *gq, struct gslot *s) {
  struct gpre *e = &gq->pre[gq->pre_head];
  s->aoff = e->aoff;
  s->aend = e->aend;
  gq->pre_head = (gq->pre_head + 1) % GPU_PRE_MAX;
  gq->pre_n--;
}

/* ---- receive side ---- */

int stage_recv_prep(struct gpu_cq *gq, struct tpx_mem *m, uint64_t len, void **data, void **mh) {
  if (!gq->arena) {
    int rc = arena_setup(gq, m->device);
    if (rc) return rc;
  }
  if (!arena_fit(gq, len, &gq->t_off, &gq->t_end)) return GPU_POST_WAIT;
  *data = gq->arena + gq->t_off;
  *mh = gq->amh;
  return GPU_POST_STAGED;
}

void stage_recv_done(struct gpu_cq *gq, struct gslot *s) {
  s->aoff = gq->t_off;
  s->aend = gq->t_end;
  gq->a_tail = gq->t_end;
}

int stage_in_start(struct gpu_cq *gq, struct gslot *s) {
  struct gpu_dev *d = gq->g->devs[s->dev];
  tpx_gpu_event_t *ev = NULL;
  int rc = tpx_gpu_event_get(d->pool, &ev);
  if (rc) return rc;
  tpx_gpu_stream_t *st = d->h2d[gq->ch % GPU_NSTREAMS];
  rc = tpx_gpu_memcpy_async(st, s->dst, gq->arena + s->aoff, (size_t)s->len);
  if (rc == 0) rc = tpx_gpu_event_record(ev, st);
  if (rc) {
    tpx_gpu_event_put(d->pool, ev);
    return tpx_err(rc, "channel %d: host-to-device copy of %llu bytes to GPU %d failed: %s", gq->ch,
                   (unsigned long long)s->len, s->dev, tpx_last_error());
  }
  s->ev = ev;
  s->busy = 1;
  gq->g->staged_in += s->len;
  return 0;
}

int stage_poll(struct gpu_cq *gq, struct gslot *s) {
  if (!s->busy) return 1;
  int r = tpx_gpu_event_query(s->ev);
  if (r < 0)
    return tpx_err(r, "channel %d: host-to-device copy to GPU %d failed: %s", gq->ch, s->dev, tpx_last_error());
  if (r == 0) return 0;
  tpx_gpu_event_put(gq->g->devs[s->dev]->pool, s->ev);
  s->ev = NULL;
  s->busy = 0;
  return 1;
}

/* ---- teardown ---- */

void stage_purge(struct gpu_cq *gq) {
  while (gq->pre_n) {
    struct gpre *e = &gq->pre[gq->pre_head];
    if (e->ev) {
      if (tpx_gpu_event_sync(e->ev)) TPX_WARN("channel %d: staging copy failed at teardown: %s", gq->ch, tpx_last_error());
      tpx_gpu_event_put(gq->g->devs[e->dev]->pool, e->ev);
    }
    gq->pre_head = (gq->pre_head + 1) % GPU_PRE_MAX;
    gq->pre_n--;
  }
  if (gq->amh && gq->comm) {
    int rc = gq->net->ops->dereg_mr(gq->net, gq->comm, gq->amh);
    if (rc) TPX_WARN("channel %d: deregistering staging failed: %s", gq->ch, tpx_strerror(rc));
  }
  gq->amh = NULL;
  gq->a_head = gq->a_tail;
}

void stage_free(struct gpu_cq *gq) {
  if (!gq->arena) return;
  if (tpx_gpu_host_free(gq->adev, gq->arena))
    TPX_WARN("channel %d: freeing staging on GPU %d: %s", gq->ch, gq->adev, tpx_last_error());
  gq->arena = NULL;
}
