/* Integrity's stage in a window (sum_stage.h). */
#include "engine/sum_stage.h"

#include "common/crc32c.h"
#include "common/crcpool.h"
#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/gpu/gpu_path.h"
#include "engine/integrity.h"
#include "engine/pack.h"

/* Below this a chunk is summed in place: handing it over costs more. */
#define POOL_MIN (64u << 10)

enum wsum {
  WSUM_NONE = 0,  /* receive: not computed (unchecked); send: its sum went out */
  WSUM_HAVE,      /* computed into s->sum */
  WSUM_CPU_LATER, /* receive: the CPU's once consumed (an UNPACK gather into host memory) */
  WSUM_POOL,      /* on the checksum threads: s->sum_ticket */
  WSUM_GPU_LATER, /* the GPU's kernel's, to start (receive: once consumed) */
  WSUM_GPU        /* running on GPU s->sum_dev: s->sum_ticket */
};

/* A sum is in: a napping progress thread passes again at once. */
static void sum_done(void *arg) { tpx__ep_wake(arg); }

/* The endpoint's checksum threads, started with the first chunk worth them:
 * TPX_INTEGRITY_THREADS, by default a quarter of its CPUs, 1..8. NULL: sums
 * in place, by default below 4 CPUs (where every thread already competes
 * for them and a hand-over only adds its own cost), or when none could
 * start. */
static tpx_crcpool_t *pool(tpx_endpoint_t *ep) {
  int n = ep->cfg.integrity_threads ? ep->cfg.integrity_threads : ep->ncpu < 4 ? 0 : TPX_MIN(ep->ncpu / 4, 8);
  if (n == 0) return NULL;
  if (!ep->sumpool && !ep->sumpool_none) {
    if (tpx__crcpool_create(n, sum_done, ep, &ep->sumpool) != 0) {
      TPX_INFO("endpoint %s: no checksum threads (%s): chunks are summed in place", ep->name, tpx_last_error());
      ep->sumpool_none = 1;
    }
  }
  return ep->sumpool;
}

void tpx__sum_stage_fini(tpx_endpoint_t *ep) {
  tpx__crcpool_destroy(ep->sumpool);
  ep->sumpool = NULL;
}

/* The CPU's sum of bytes it sees: on the threads (WSUM_POOL) or in place. */
static void cpu_sum(struct tpx_peer *p, struct tpx__wslot *s, const void *at, const struct iovec *iov, int nv) {
  tpx_crcpool_t *tp = s->len >= POOL_MIN ? pool(p->ep) : NULL;
  if (tp && tpx__crcpool_start(tp, at, s->len, iov, nv, &s->sum_ticket) == 0) {
    s->sum_have = WSUM_POOL;
    return;
  }
  s->sum = tpx__crc32c_pieces(at, s->len, iov, nv);
  s->sum_have = WSUM_HAVE;
}

/* Drive a sum running apart: 1 done (WSUM_HAVE, or WSUM_NONE where the GPU
 * has no kernel), 0 not yet, < 0 error. */
static int drive(struct tpx_peer *p, struct tpx__window *q, struct tpx__wslot *s) {
  tpx_endpoint_t *ep = p->ep;
  switch (s->sum_have) {
  case WSUM_POOL:
    if (!tpx__crcpool_poll(ep->sumpool, s->sum_ticket, &s->sum)) return 0;
    s->sum_have = WSUM_HAVE;
    return 1;
  case WSUM_GPU_LATER: {
    int rc = tpx__gpu_recv_sum_taken(q, s, &s->sum_ticket) ? 0 /* queued with its unpack */
             : s->sum_dev >= 0 ? tpx__gpu_sum_start(ep, s->sum_dev, s->sum_at, s->len, &s->sum_ticket) : TPX_ENOTSUP;
    if (rc == TPX_EAGAIN) return 0;
    if (rc == TPX_ENOTSUP) { /* no kernel on this GPU: unchecked */
      s->sum_have = WSUM_NONE;
      return 1;
    }
    if (rc) return rc;
    s->sum_have = WSUM_GPU;
  } /* fall through */
  case WSUM_GPU: {
    int r = tpx__gpu_sum_poll(ep, s->sum_dev, s->sum_ticket, &s->sum);
    if (r == 1) s->sum_have = WSUM_HAVE;
    return r;
  }
  default: return 1;
  }
}

void tpx__sum_stage_landed(struct tpx_peer *p, struct tpx__window *q, struct tpx__wslot *s, int consumed) {
  const void *at;
  int dev;
  int view = tpx__gpu_recv_view(q, s, &at, &dev);
  s->sum_have = WSUM_NONE;
  if (view == GPU_VIEW_NONE) {
    s->sum_have = WSUM_GPU_LATER;
    s->sum_dev = (int16_t)dev;
    s->sum_at = at;
    return;
  }
  if (view == GPU_VIEW_CONSUMED && !consumed) {
    s->sum_have = WSUM_CPU_LATER;
    return;
  }
  struct iovec iov[TPX_NET_IOV_MAX];
  int nv = s->nv ? tpx__pack_iov(p->ep->net, s->op, &s->pcur, iov) : 0;
  cpu_sum(p, s, at, iov, nv);
}

int tpx__sum_stage_recv_ok(struct tpx_peer *p, struct tpx__window *q, struct tpx__wslot *s) {
  struct tpx__op *o = s->op;
  if (!p->sum || o->discard) return 1;
  if (s->sum_have == WSUM_CPU_LATER) tpx__sum_stage_landed(p, q, s, 1);
  int r = drive(p, q, s);
  if (r < 0)
    return tpx_err_quiet(r, "peer %s channel %d: checksum of chunk %llu of %s %llu: %s", p->where, q->ch,
                         (unsigned long long)s->chunk, tpx__op_kind_name(o->kind), (unsigned long long)o->id,
                         tpx_last_error());
  if (r == 1) r = tpx__sum_check(p, o, s->chunk, q->ch, s->sum_have == WSUM_HAVE, s->sum);
  if (r == 0 && tpx__now_ns() > s->deadline)
    return tpx_err_quiet(TPX_ETIMEDOUT, "peer %s channel %d: no checksum for chunk %llu of %s %llu after %d ms",
                         p->where, q->ch, (unsigned long long)s->chunk, tpx__op_kind_name(o->kind),
                         (unsigned long long)o->id, p->ep->cfg.timeout_ms);
  return r;
}

int tpx__sum_stage_sent(struct tpx_peer *p, struct tpx__window *q, struct tpx__wslot *s, int dev,
                        const struct iovec *iov) {
  s->sum_have = WSUM_NONE;
  if (dev < 0) {
    cpu_sum(p, s, s->data, iov, s->nv);
  } else if (p->ep->gpath) { /* GPU memory sent as it is: its GPU sums it */
    s->sum_have = WSUM_GPU_LATER;
    s->sum_dev = (int16_t)dev;
    s->sum_at = s->data;
  }
  int r = tpx__sum_stage_send_ok(p, q, s);
  return r < 0 ? r : 0;
}

int tpx__sum_stage_send_ok(struct tpx_peer *p, struct tpx__window *q, struct tpx__wslot *s) {
  if (s->sum_have == WSUM_NONE) return 1;
  int r = drive(p, q, s);
  if (r < 0)
    return tpx_err_quiet(r, "peer %s channel %d: checksum of chunk %llu: %s", p->where, q->ch,
                         (unsigned long long)s->chunk, tpx_last_error());
  if (r == 0) return 0;
  int have = s->sum_have == WSUM_HAVE;
  s->sum_have = WSUM_NONE;
  r = tpx__sum_sent(p, s->op, s->chunk, have, s->sum);
  return r < 0 ? r : 1;
}

void tpx__sum_stage_drop(struct tpx_peer *p, struct tpx__wslot *s) {
  if (s->sum_have == WSUM_POOL) tpx__crcpool_drop(p->ep->sumpool, s->sum_ticket);
  if (s->sum_have == WSUM_GPU) tpx__gpu_sum_drop(p->ep, s->sum_dev, s->sum_ticket);
  s->sum_have = WSUM_NONE;
}
