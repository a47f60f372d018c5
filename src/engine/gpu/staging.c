/* Host staging for GPU memory over transports that take only host pointers.
 *
 * Each comm direction owns one pinned, GPU-mapped arena registered once with
 * that comm and used as a byte ring (common/ring.h). Allocation follows posting
 * order and release follows the ring's FIFO release, so the ring needs only two
 * positions. Sends: device-to-host copies of the next chunks are started ahead
 * (up to GPU_PRE_MAX, as far as the arena allows), SM copies through the
 * GPU's unpacker, up to COPY_BATCH chunks per launch (or, with
 * TPX_UNPACK=d2d or host, one copy-engine copy per chunk on a persistent
 * stream with a pooled event);
 * a chunk is posted once its copy finished, so later copies run while it is
 * on the wire. Receives: the irecv lands in the arena; the host-to-device
 * copies of the chunks completed since the last look are launched together,
 * and a slot is released when its copy is done, while later chunks keep
 * arriving. No allocation, stream or event creation, and no synchronisation
 * per chunk. */
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "common/timeline.h"
#include "engine/gpu/gpu_mem.h"
#include "engine/gpu/gpu_path_int.h"
#include "engine/mem.h"
#include "engine/gpu/pack_runs.h"
#include "engine/route.h"
#include "topo/topo.h"

#define ARENA_MAX (1ull << 30) /* v7 regMr takes an int size */
/* SM staging copies: up to this many chunks of a comm per launch, one
 * completion for them all. The progress thread's launches and event queries
 * are what hold the posts back at the start of a GPU transfer
 * (docs/notes/gpu-vs-host-memory.md). */
#define COPY_BATCH 4
/* Packed chunks (pack_runs.h): entries per launch. */
#define PACK_RUN_MAX 512

static int arena_setup(struct tpx__gpu_window *gq, int dev) {
  if (gq->arena) return 0;
  if (!gq->comm) return tpx_err_quiet(TPX_ECLOSED, "channel %d: comm closed", gq->ch);
  /* TPX_STAGING_BYTES is the floor; a full window of chunks fits (sends:
   * two, so the next window is already copied when slots free up), and any
   * chunk (the peer's size may differ from ours) twice. */
  tpx_endpoint_t *ep = gq->g->ep;
  uint64_t sz = ep->cfg.staging_bytes;
  uint64_t win = (uint64_t)ep->window * tpx__config_chunk_for(&ep->cfg, 0, 1, ep->ncpu) * (gq->is_recv ? 1 : 2);
  if (sz < win) sz = win < (256ull << 20) ? win : (256ull << 20);
  if (sz < 2ull * WIRE_MAX_CHUNK) sz = 2ull * WIRE_MAX_CHUNK;
  if (sz > ARENA_MAX) sz = ARENA_MAX;
  sz = (sz + GPU_PAGE - 1) & ~(uint64_t)(GPU_PAGE - 1);
  void *a = NULL;
  tpx_numa_pref_t pref; /* pinned pages are touched here: on the endpoint's NUMA node when known */
  tpx__numa_prefer_enter(ep->numa, &pref);
  int rc = tpx__gpu_host_alloc(dev, (size_t)sz, &a);
  tpx__numa_prefer_leave(&pref);
  if (rc)
    return tpx_err_quiet(rc, "channel %d: pinned staging of %llu bytes (TPX_STAGING_BYTES) on GPU %d: %s", gq->ch,
                   (unsigned long long)sz, dev, tpx_last_error());
  void *mh = NULL;
  struct tpx__gpu_bind b;
  rc = tpx__gpu_bind_enter(ep, dev, &b);
  if (rc == 0) rc = gq->net->ops->reg_mr(gq->net, gq->comm, a, (size_t)sz, TPX_PTR_HOST, &mh);
  tpx__gpu_bind_leave(&b);
  if (rc) {
    tpx__gpu_host_free(dev, a);
    return tpx_err_quiet(rc, "channel %d: registering %llu bytes of staging with the transport failed", gq->ch,
                   (unsigned long long)sz);
  }
  void *adev = NULL;
  if ((rc = tpx__gpu_host_dev_ptr(dev, a, &adev)) != 0) {
    gq->net->ops->dereg_mr(gq->net, gq->comm, mh);
    tpx__gpu_host_free(dev, a);
    return rc;
  }
  gq->arena = a;
  gq->arena_dev = adev;
  tpx__ring_init(&gq->aring, sz, 1);
  gq->adev = dev;
  gq->amh = mh;
  TPX_DEBUG("channel %d: %s staging of %llu bytes (GPU %d)", gq->ch, gq->is_recv ? "receive" : "send",
            (unsigned long long)sz, dev);
  return 0;
}

/* Room for len contiguous bytes? 1 yes (*sp), 0 not until earlier chunks
 * are released, < 0 never (the arena is sized for two of the largest chunk,
 * so this is a bug). */
static int arena_fit(const struct tpx__gpu_window *gq, uint64_t len, tpx_ring_span_t *sp) {
  int r = tpx__ring_fit(&gq->aring, len, sp);
  if (r < 0)
    return tpx_err_quiet(TPX_EINTERNAL, "channel %d: a %llu-byte chunk cannot fit the %llu-byte staging arena", gq->ch,
                   (unsigned long long)len, (unsigned long long)gq->aring.size);
  return r;
}

/* Ring slots the engine released since the last look give their bytes back. */
void tpx__stage_reclaim(struct tpx__gpu_window *gq, struct tpx__window *q) {
  while (gq->rel_pos < q->head) {
    struct tpx__gslot *s = &gq->slots[gq->rel_pos % gq->cap];
    if (s->aend) {
      tpx__ring_release(&gq->aring, s->aend);
      s->aend = 0;
    }
    gq->rel_pos++;
  }
}

/* ---- staging copies ----
 * With TPX_UNPACK=kernel (the default): SM copies through the GPU's
 * unpacker, up to COPY_BATCH chunks per launch, each a fragment whose kernel
 * reads or writes the pinned arena through its mapping (one copy-engine
 * copy per 512 KiB chunk costs more per transfer than the batched launches;
 * docs/notes/gpu-vs-host-memory.md). Otherwise one cudaMemcpyAsync per
 * chunk on a persistent stream of the copy direction with a pooled event. */

/* One copy-engine copy: 0 queued (*ev), < 0 error. */
static int copy_start(struct tpx__gpu_window *gq, int dev, void *dst, const void *src, uint64_t len, int h2d,
                      tpx_gpu_event_t **ev) {
  struct tpx__gpu_dev *d = gq->g->devs[dev];
  if (!d) return tpx_err_quiet(TPX_EINTERNAL, "channel %d: GPU %d was never set up", gq->ch, dev);
  *ev = NULL;
  tpx_gpu_event_t *e = NULL;
  int rc = tpx__gpu_event_get(d->pool, &e);
  if (rc) return rc;
  tpx_gpu_stream_t *st = (h2d ? d->h2d : d->d2h)[gq->ch % GPU_NSTREAMS];
  rc = tpx__gpu_memcpy_async(st, dst, src, (size_t)len);
  if (rc == 0) rc = tpx__gpu_event_record(e, st);
  if (rc) {
    tpx__gpu_event_put(d->pool, e);
    return rc;
  }
  *ev = e;
  return 0;
}

/* 1 done (event returned to its pool), 0 not yet, < 0 the copy failed. */
static int copy_poll(struct tpx__gpu_window *gq, int dev, int kern, tpx_gpu_event_t **ev, uint64_t ticket) {
  struct tpx__gpu_dev *d = gq->g->devs[dev];
  if (kern) return tpx__unpacker_done(d->unpacker, ticket);
  int r = tpx__gpu_event_query(*ev);
  if (r == 1) {
    tpx__gpu_event_put(d->pool, *ev);
    *ev = NULL;
  }
  return r;
}

/* Teardown: wait for a copy still running. */
static void copy_wait(struct tpx__gpu_window *gq, int dev, int kern, tpx_gpu_event_t **ev, uint64_t ticket) {
  struct tpx__gpu_dev *d = gq->g->devs[dev];
  int rc = 0;
  if (kern) {
    rc = tpx__unpacker_wait(d->unpacker, ticket, 30000);
  } else if (*ev) {
    rc = tpx__gpu_event_sync(*ev);
    tpx__gpu_event_put(d->pool, *ev);
    *ev = NULL;
  }
  if (rc) TPX_WARN("channel %d: staging copy on GPU %d at teardown: %s", gq->ch, dev, tpx_last_error());
}

/* ---- packed chunks ----
 * A chunk holding several entries (plan.h's packed plan) with pieces in GPU
 * memory: its GPU pieces move between their memory and the chunk's arena
 * bytes in runs (pack_runs.h), one unpacker launch each (kernel, or one
 * cudaMemcpyBatchAsync in d2d mode), usually one per chunk; its host pieces
 * are copied by the CPU. The runs share the GPU's unpacker, whose tickets
 * complete in order, so the last one stands for the chunk. */

/* The runs of the chunk at c, to the arena at aoff (gather) or from it:
 * 1 queued (*dev, *ticket), 0 the unpacker is full before the first launch
 * (nothing queued), < 0. */
static int packed_copy(struct tpx__gpu_window *gq, const struct tpx__xent *ents, const struct tpx__cursor *c,
                       uint64_t aoff, int gather, int *dev, uint64_t *ticket) {
  struct tpx__pack_walk w;
  tpx__pack_walk_init(&w, ents, c);
  tpx_unpack_meta_t meta[PACK_RUN_MAX];
  struct tpx__pack_run r;
  int runs = 0, rc;
  while ((rc = tpx__pack_next_run(&w, gather, gq->arena + aoff, aoff, meta, PACK_RUN_MAX, &r)) == 1) {
    if (runs && r.dev != *dev)
      return tpx_err_quiet(TPX_EINTERNAL, "channel %d: packed chunk %llu on GPUs %d and %d", gq->ch,
                           (unsigned long long)c->idx, *dev, r.dev);
    tpx_unpack_chunk_t u = gather ? (tpx_unpack_chunk_t){meta, meta, r.n, r.lo, (size_t)r.span, gq->arena_dev,
                                                         (size_t)gq->aring.size}
                                  : (tpx_unpack_chunk_t){meta, meta, r.n, gq->arena_dev, (size_t)gq->aring.size,
                                                         r.lo, (size_t)r.span};
    uint64_t t = 0;
    rc = tpx__gpu_unpack_submit(gq->g, r.dev, &u, &t);
    if (rc == TPX_EAGAIN && runs) {
      /* Part of the chunk is queued: make room by waiting for it (its
       * launches are this unpacker's latest), then queue the rest. */
      rc = tpx__unpacker_wait(gq->g->devs[r.dev]->unpacker, *ticket, gq->g->ep->cfg.timeout_ms);
      if (rc == 0) rc = tpx__gpu_unpack_submit(gq->g, r.dev, &u, &t);
      if (rc == TPX_EAGAIN) rc = tpx_err_quiet(TPX_EINTERNAL, "GPU %d: the unpacker stayed full", r.dev);
    }
    if (rc == TPX_EAGAIN) return 0;
    if (rc)
      return tpx_err_quiet(rc, "channel %d: %s of packed chunk %llu (%u pieces, GPU %d) failed: %s", gq->ch,
                           gather ? "gather" : "scatter", (unsigned long long)c->idx, r.n, r.dev, tpx_last_error());
    *dev = r.dev;
    *ticket = t;
    runs++;
  }
  if (rc < 0) return tpx_err_quiet(rc, "channel %d: packed chunk %llu: %s", gq->ch, (unsigned long long)c->idx,
                                   tpx_last_error());
  if (!runs) /* staged only for a GPU piece (tpx__pack_gpu_mem) */
    return tpx_err_quiet(TPX_EINTERNAL, "channel %d: packed chunk %llu has no GPU piece", gq->ch,
                         (unsigned long long)c->idx);
  return 1;
}

/* ---- send side ---- */

/* A started staging copy joins the pre-queue. */
static void pre_push(struct tpx__gpu_window *gq, const struct tpx__gpre *e) {
  gq->pre[(gq->pre_head + gq->pre_n) % GPU_PRE_MAX] = *e;
  gq->pre_n++;
  TPX_TL(TL_D2H_START, gq->ch, e->o->id, e->idx, e->len);
  gq->g->staged_out += e->len;
}

/* Copy-engine staging: start the copy of one chunk into the arena. 1
 * started, 0 no room, < 0. */
static int stage_one(struct tpx__gpu_window *gq, struct tpx__op *o, const struct tpx__cursor *c) {
  const struct tpx__xent *e = &o->ents[c->e];
  struct tpx_mem *m = e->mem;
  uint64_t len = tpx__plan_len(o->ents, o->chunk, c);
  tpx_ring_span_t sp;
  int fit = arena_fit(gq, len, &sp);
  if (fit <= 0) return fit;
  tpx_gpu_event_t *ev = NULL;
  int rc = copy_start(gq, m->device, gq->arena_dev + sp.off, m->base + e->off + c->off, len, 0, &ev);
  if (rc < 0)
    return tpx_err_quiet(rc, "channel %d: device-to-host copy of chunk %llu (%llu bytes, GPU %d) failed: %s", gq->ch,
                   (unsigned long long)c->idx, (unsigned long long)len, m->device, tpx_last_error());
  tpx__ring_take(&gq->aring, &sp);
  pre_push(gq, &(struct tpx__gpre){o, c->idx, sp.off, sp.end, len, m->device, 1, 0, ev, 0});
  return 1;
}

/* A packed chunk's gather into the arena: 1 started, 0 no room or the
 * unpacker is full, < 0. */
static int stage_packed(struct tpx__gpu_window *gq, struct tpx__op *o, const struct tpx__cursor *c) {
  tpx_ring_span_t sp;
  int fit = arena_fit(gq, c->len, &sp);
  if (fit <= 0) return fit;
  int dev = -1;
  uint64_t ticket = 0;
  int r = packed_copy(gq, o->ents, c, sp.off, 1, &dev, &ticket);
  if (r <= 0) return r;
  tpx__ring_take(&gq->aring, &sp);
  pre_push(gq, &(struct tpx__gpre){o, c->idx, sp.off, sp.end, c->len, dev, 1, 1, NULL, ticket});
  return 1;
}

/* The chunk at c in GPU memory (staged): the registration of its (first
 * GPU) piece, or NULL. */
static struct tpx_mem *chunk_gpu(const struct tpx__op *o, const struct tpx__cursor *c) {
  if (tpx__plan_gathered(o->ents, c)) return tpx__pack_gpu_mem(o->ents, c);
  struct tpx_mem *m = o->ents[c->e].mem;
  return m->type == TPX_MEM_CUDA ? m : NULL;
}

/* Several sends' staging copies as one SM launch: chunks of one GPU, next
 * to each other in the comm's order, each an entry {offset from the lowest
 * source, length, offset in the arena} (source offsets are 32 bits: a run
 * spans less than 4 GiB); they share one ticket, so each is posted once the
 * whole launch is done. The arena space is taken as entries are added and
 * given back (the ring as it was) when the launch cannot be queued. */
struct out_batch {
  int dev;
  uint32_t n;
  const uint8_t *lo, *hi; /* sources' span */
  tpx_ring_t ring;        /* the arena before the first entry */
  const uint8_t *src[COPY_BATCH];
  struct tpx__gpre p[COPY_BATCH];
};

/* 1 queued (or empty), 0 the unpacker is full (arena given back), < 0. */
static int out_flush(struct tpx__gpu_window *gq, struct out_batch *b) {
  if (b->n == 0) return 1;
  uint32_t n = b->n;
  b->n = 0;
  tpx_unpack_meta_t e[COPY_BATCH];
  for (uint32_t i = 0; i < n; i++)
    e[i] = (tpx_unpack_meta_t){(uint32_t)(b->src[i] - b->lo), (uint32_t)b->p[i].len, b->p[i].aoff};
  tpx_unpack_chunk_t c = {e, e, n, b->lo, (size_t)(b->hi - b->lo), gq->arena_dev, (size_t)gq->aring.size};
  uint64_t ticket = 0;
  int rc = tpx__gpu_unpack_submit(gq->g, b->dev, &c, &ticket);
  if (rc) {
    gq->aring = b->ring;
    if (rc == TPX_EAGAIN) return 0;
    return tpx_err_quiet(rc,
                         "channel %d: device-to-host copy of chunks %llu..%llu (GPU %d) failed: %s",
                         gq->ch, (unsigned long long)b->p[0].idx,
                         (unsigned long long)b->p[n - 1].idx, b->dev, tpx_last_error());
  }
  for (uint32_t i = 0; i < n; i++) {
    b->p[i].ticket = ticket;
    pre_push(gq, &b->p[i]);
  }
  return 1;
}

/* Add the chunk at c to the batch (after queueing the batch when the chunk
 * cannot join it): 1 added, 0 no arena room or the unpacker is full, < 0. */
static int out_add(struct tpx__gpu_window *gq, struct out_batch *b, struct tpx__op *o, const struct tpx__cursor *c) {
  const struct tpx__xent *e = &o->ents[c->e];
  uint64_t len = tpx__plan_len(o->ents, o->chunk, c);
  const uint8_t *src = e->mem->base + e->off + c->off;
  if (b->n) {
    const uint8_t *lo = src < b->lo ? src : b->lo, *hi = src + len > b->hi ? src + len : b->hi;
    if (e->mem->device != b->dev || (uint64_t)(hi - lo) > UINT32_MAX) {
      int r = out_flush(gq, b);
      if (r <= 0) return r;
    }
  }
  tpx_ring_span_t sp;
  int fit = arena_fit(gq, len, &sp);
  if (fit <= 0) return fit;
  if (b->n == 0) {
    b->dev = e->mem->device;
    b->lo = src;
    b->hi = src + len;
    b->ring = gq->aring;
  }
  if (src < b->lo) b->lo = src;
  if (src + len > b->hi) b->hi = src + len;
  tpx__ring_take(&gq->aring, &sp);
  b->src[b->n] = src;
  b->p[b->n] = (struct tpx__gpre){o, c->idx, sp.off, sp.end, len, e->mem->device, 1, 1, NULL, 0};
  b->n++;
  return 1;
}

/* Copy ahead: the pre-queue holds the first pre_n CUDA chunks of the
 * comm's pending sequence; extend it by at most max_new copies (launches of
 * up to COPY_BATCH chunks each) while there is room. Small steps per call,
 * called for every comm on every pass, keep the copies close to the
 * transfer's chunk order across channels, so no channel waits behind
 * another's whole window of copies at the start. */
int tpx__stage_ahead(struct tpx__window *q, struct tpx__gpu_window *gq, int setup, int max_new) {
  uint32_t seen = 0;
  int budget = 2 * GPU_PRE_MAX + 16; /* chunks looked at (host chunks in between are skipped) */
  int sm = gq->g->stage_sm[0];
  if (sm) max_new = 1; /* one launch per comm and pass: the comms' first chunks come in turn */
  int npacked = 0;     /* packed chunks staged, each its own launch: COPY_BATCH of them count as one */
  struct out_batch b;
  b.n = 0;
  int r = 1;
  for (struct tpx__wlink *l = q->pend; l && gq->pre_n + b.n < GPU_PRE_MAX; l = l->next) {
    struct tpx__op *o = l->op;
    struct tpx__cursor c = l->cur;
    for (;;) {
      struct tpx_mem *m = chunk_gpu(o, &c);
      if (m) {
        if (seen >= gq->pre_n) {
          if (!gq->arena) {
            if (!setup) return 0;
            int rc = arena_setup(gq, m->device);
            if (rc) return rc;
          }
          if (tpx__plan_gathered(o->ents, &c)) { /* its own launch(es), after the batch before it */
            if ((r = out_flush(gq, &b)) <= 0) return r;
            if ((r = stage_packed(gq, o, &c)) <= 0) return r;
            if (gq->pre_n >= GPU_PRE_MAX || (++npacked % COPY_BATCH == 0 && --max_new <= 0)) return 0;
          } else if (!sm) {
            r = stage_one(gq, o, &c);
            if (r <= 0) return r;
            if (gq->pre_n >= GPU_PRE_MAX || --max_new <= 0) return 0;
          } else {
            r = out_add(gq, &b, o, &c);
            if (r <= 0) break;
            if (b.n == COPY_BATCH || gq->pre_n + b.n >= GPU_PRE_MAX) {
              if ((r = out_flush(gq, &b)) <= 0) return r;
              if (gq->pre_n >= GPU_PRE_MAX || --max_new <= 0) return 0;
            }
          }
        }
        seen++;
      }
      if (--budget <= 0) break;
      if (!tpx__route_advance(l, &c)) break;
    }
    if (r <= 0 || budget <= 0) break;
  }
  if (r < 0) {
    if (b.n) gq->aring = b.ring;
    return r;
  }
  r = out_flush(gq, &b);
  return r < 0 ? r : 0;
}

int tpx__stage_send_prep(struct tpx__window *q, struct tpx__gpu_window *gq, struct tpx__wlink *l, void **data,
                         void **mh) {
  /* Copy-engine copies: each post starts the next one. SM copies: the next
   * launch comes with the comm's next pass (tpx__gpu_window_ahead), so every
   * comm's first launch is queued before any comm's second. */
  int rc = gq->pre_n && gq->g->stage_sm[0] ? 0 : tpx__stage_ahead(q, gq, 1, 1);
  if (rc < 0) return rc;
  if (gq->pre_n == 0) return GPU_POST_WAIT; /* no staging room until sends complete */
  struct tpx__gpre *e = &gq->pre[gq->pre_head];
  if (e->o != l->op || e->idx != l->cur.idx)
    return tpx_err_quiet(TPX_EINTERNAL, "channel %d: staging out of step (chunk %llu staged, %llu to post)", gq->ch,
                   (unsigned long long)e->idx, (unsigned long long)l->cur.idx);
  if (e->busy) {
    int r = copy_poll(gq, e->dev, e->kern, &e->ev, e->ticket);
    if (r < 0)
      return tpx_err_quiet(r, "channel %d: device-to-host copy of chunk %llu failed: %s", gq->ch,
                     (unsigned long long)e->idx, tpx_last_error());
    if (r == 0) return GPU_POST_WAIT;
    e->busy = 0;
    TPX_TL(TL_D2H_DONE, gq->ch, e->o->id, e->idx, e->len);
  }
  *data = gq->arena + e->aoff;
  *mh = gq->amh;
  return GPU_POST_STAGED;
}

void tpx__stage_send_done(struct tpx__gpu_window *gq, struct tpx__gslot *s) {
  struct tpx__gpre *e = &gq->pre[gq->pre_head];
  s->aoff = e->aoff;
  s->aend = e->aend;
  gq->pre_head = (gq->pre_head + 1) % GPU_PRE_MAX;
  gq->pre_n--;
}

/* ---- receive side ---- */

int tpx__stage_recv_prep(struct tpx__gpu_window *gq, struct tpx_mem *m, uint64_t len, void **data, void **mh) {
  if (!gq->arena) {
    int rc = arena_setup(gq, m->device);
    if (rc) return rc;
  }
  int fit = arena_fit(gq, len, &gq->tsp);
  if (fit < 0) return fit;
  if (fit == 0) return GPU_POST_WAIT;
  *data = gq->arena + gq->tsp.off;
  *mh = gq->amh;
  return GPU_POST_STAGED;
}

void tpx__stage_recv_done(struct tpx__gpu_window *gq, struct tpx__gslot *s) {
  s->aoff = gq->tsp.off;
  s->aend = gq->tsp.end;
  tpx__ring_take(&gq->aring, &gq->tsp);
}

int tpx__stage_in_start(struct tpx__gpu_window *gq, struct tpx__gslot *s) {
  s->busy = 1;
  gq->g->staged_in += s->len;
  TPX_TL(TL_H2D_START, gq->ch, (uintptr_t)s->dst, 0, s->len);
  if (gq->g->stage_sm[1] || s->pents) { /* launched with the others of this pass (in_batch) */
    s->deferred = 1;
    return 0;
  }
  s->kern = 0;
  int rc = copy_start(gq, s->dev, s->dst, gq->arena_dev + s->aoff, s->len, 1, &s->ev);
  if (rc < 0)
    return tpx_err_quiet(rc, "channel %d: host-to-device copy of %llu bytes to GPU %d failed: %s", gq->ch,
                   (unsigned long long)s->len, s->dev, tpx_last_error());
  return 0;
}

/* Receives waiting for their copy to the GPU, from s on in ring order (they
 * completed in that order), launched together in runs of up to
 * COPY_BATCH, each run one SM launch from the arena into the GPU buffers
 * (entries relative to the lowest destination). 0, or < 0. */
static int in_batch(struct tpx__gpu_window *gq, struct tpx__gslot *s) {
  uint32_t at = (uint32_t)(s - gq->slots);
  struct tpx__gslot *run[COPY_BATCH];
  tpx_unpack_meta_t e[COPY_BATCH];
  for (uint32_t i = 0; i < gq->cap;) {
    uint32_t n = 0;
    for (; i < gq->cap && n < COPY_BATCH; i++) {
      struct tpx__gslot *x = &gq->slots[(at + i) % gq->cap];
      if (!x->busy || x->mode != GS_STAGE_IN) {
        i = gq->cap;
        break;
      }
      if (!x->deferred) continue;
      if (x->pents) { /* a packed chunk: its own launch(es), after the run before it */
        if (n) break;
        int dev = -1;
        uint64_t ticket = 0;
        int r = packed_copy(gq, x->pents, &x->pcur, x->aoff, 0, &dev, &ticket);
        if (r <= 0) return r; /* 0: still deferred, the next poll */
        x->dev = dev;
        x->kern = 1;
        x->ticket = ticket;
        x->deferred = 0;
        continue;
      }
      if (n && x->dev != run[0]->dev) break;
      run[n++] = x;
    }
    if (n == 0) return 0;
    uint8_t *lo, *hi;
    tpx__gslot_span(run, n, &lo, &hi);
    for (uint32_t k = 0; k < n; k++)
      e[k] = (tpx_unpack_meta_t){run[k]->aoff, (uint32_t)run[k]->len, (uint64_t)(run[k]->dst - lo)};
    tpx_unpack_chunk_t c = {e, e, n, gq->arena_dev, (size_t)gq->aring.size, lo, (size_t)(hi - lo)};
    uint64_t ticket = 0;
    int rc = tpx__gpu_unpack_submit(gq->g, run[0]->dev, &c, &ticket);
    if (rc == TPX_EAGAIN) return 0; /* still deferred: the next poll */
    if (rc)
      return tpx_err_quiet(rc, "channel %d: host-to-device copy of %u chunks to GPU %d failed: %s",
                           gq->ch, n, run[0]->dev, tpx_last_error());
    for (uint32_t k = 0; k < n; k++) {
      run[k]->kern = 1;
      run[k]->ticket = ticket;
      run[k]->deferred = 0;
    }
  }
  return 0;
}

int tpx__stage_poll(struct tpx__gpu_window *gq, struct tpx__gslot *s) {
  if (!s->busy) return 1;
  if (gq->g->stage_sm[1] || s->deferred) { /* launch what completed since the last pass, the head's or later */
    int rc = in_batch(gq, s);
    if (rc) return rc;
    if (s->deferred) return 0;
  }
  int r = copy_poll(gq, s->dev, s->kern, &s->ev, s->ticket);
  if (r < 0)
    return tpx_err_quiet(r, "channel %d: host-to-device copy to GPU %d failed: %s", gq->ch, s->dev, tpx_last_error());
  if (r == 0) return 0;
  s->busy = 0;
  TPX_TL(TL_H2D_DONE, gq->ch, (uintptr_t)s->dst, 0, s->len);
  return 1;
}

void tpx__stage_slot_wait(struct tpx__gpu_window *gq, struct tpx__gslot *s) {
  if (s->busy && !s->deferred) copy_wait(gq, s->dev, s->kern, &s->ev, s->ticket);
  s->busy = 0;
  s->deferred = 0;
}

/* ---- teardown ---- */

void tpx__stage_purge(struct tpx__gpu_window *gq) {
  while (gq->pre_n) {
    struct tpx__gpre *e = &gq->pre[gq->pre_head];
    if (e->busy) copy_wait(gq, e->dev, e->kern, &e->ev, e->ticket);
    gq->pre_head = (gq->pre_head + 1) % GPU_PRE_MAX;
    gq->pre_n--;
  }
  if (gq->amh && gq->comm) {
    int rc = gq->net->ops->dereg_mr(gq->net, gq->comm, gq->amh);
    if (rc) TPX_WARN("channel %d: deregistering staging failed: %s", gq->ch, tpx_strerror(rc));
  }
  gq->amh = NULL;
  tpx__ring_release_all(&gq->aring);
}

void tpx__stage_free(struct tpx__gpu_window *gq) {
  if (!gq->arena) return;
  if (tpx__gpu_host_free(gq->adev, gq->arena))
    TPX_WARN("channel %d: freeing staging on GPU %d: %s", gq->ch, gq->adev, tpx_last_error());
  gq->arena = NULL;
}
