/* CRC-32C of GPU memory (crc.h); the kernels are in crc_kernel.cu. */
#include "cuda/crc.h"

#include "common/error.h"

#ifndef TPX_HAVE_CUDA

int tpx__gpu_crc_create(int dev, tpx_gpu_crc_t **out) {
  (void)dev;
  *out = NULL;
  return tpx_err_quiet(TPX_ENOTSUP, "GPU checksums: built without CUDA support");
}
void tpx__gpu_crc_destroy(tpx_gpu_crc_t *c) { (void)c; }
int tpx__gpu_crc_start(tpx_gpu_crc_t *c, const void *p, uint64_t len, uint64_t *ticket) {
  (void)c;
  (void)p;
  (void)len;
  (void)ticket;
  return TPX_ENOTSUP;
}
int tpx__gpu_crc_poll(tpx_gpu_crc_t *c, uint64_t ticket, uint32_t *crc) {
  (void)c;
  (void)ticket;
  (void)crc;
  return TPX_ENOTSUP;
}
int tpx__gpu_crc_flush(tpx_gpu_crc_t *c) {
  (void)c;
  return TPX_ENOTSUP;
}
int tpx__gpu_crc_start_on(tpx_gpu_crc_t *c, struct tpx_gpu_stream *stream, const void *const *p, const uint64_t *len,
                          uint32_t n, uint64_t *tickets) {
  (void)c;
  (void)stream;
  (void)p;
  (void)len;
  (void)n;
  (void)tickets;
  return TPX_ENOTSUP;
}
void tpx__gpu_crc_drop(tpx_gpu_crc_t *c, uint64_t ticket) {
  (void)c;
  (void)ticket;
}

#else

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "cuda/crc_kernel.h"
#include "cuda/gpu.h"

#define SLOTS 4096u /* tickets in flight */
#define BATCHES 64u /* launches in flight */
#define SEGS (TPX_GPU_CRC_MAX_BYTES / TPX_CRC_SEG)

struct slot {
  uint64_t ticket;
  uint32_t batch; /* its launch, in batch[] */
  uint64_t bseq;  /* and that launch's number: once batch[] holds a later one, this one finished */
  int wanted;     /* started, neither polled done nor dropped */
};

/* A launch. Reused for a later one only once finished, whether its sums were
 * polled or not: results stay in out[] until their tickets are polled. */
struct batch {
  tpx_gpu_event_t *ev; /* recorded after the kernels; NULL: not launched */
  uint64_t seq;        /* which launch (nbatch when it was filled) */
  int done;            /* seen finished */
};

struct tpx_gpu_crc {
  int dev;
  tpx_gpu_stream_t *stream;
  tpx_gpu_evpool_t *pool;
  uint32_t *partials;      /* device: BATCHES * TPX_CRC_BATCH * SEGS words */
  uint32_t *out, *out_dev; /* pinned host: SLOTS words, and as the GPU writes them */
  tpx_crc_ops_t *ops_dev;  /* the operators, in device memory */
  struct slot slot[SLOTS];
  struct batch batch[BATCHES];
  uint64_t next;           /* the next ticket */
  uint64_t nbatch;         /* the batch being filled: nbatch % BATCHES */
  /* queued, not launched: the filling batch's chunks */
  const void *qp[TPX_CRC_BATCH];
  uint64_t qlen[TPX_CRC_BATCH];
  uint32_t qinit[TPX_CRC_BATCH], qidx[TPX_CRC_BATCH], nq;
  uint64_t init_len;       /* the last length's initial-value term */
  uint32_t init;
};

static tpx_crc_ops_t ops;
static pthread_once_t ops_once = PTHREAD_ONCE_INIT;

static void ops_init(void) {
  for (int k = 0; k < TPX_CRC_PIECE_LEVELS; k++)
    tpx__crc32c_zeros_op((uint64_t)(TPX_CRC_SEG / TPX_CRC_THREADS) << k, ops.piece[k]);
  for (int k = 0; k < TPX_CRC_SEG_LEVELS; k++) tpx__crc32c_zeros_op((uint64_t)TPX_CRC_SEG << k, ops.seg[k]);
}

static uint32_t init_term(tpx_gpu_crc_t *c, uint64_t len) {
  if (len != c->init_len) {
    uint32_t op[32], r = 0;
    tpx__crc32c_zeros_op(len, op);
    for (int i = 0; i < 32; i++) r ^= op[i]; /* op applied to 0xffffffff */
    c->init = r;
    c->init_len = len;
  }
  return c->init;
}

void tpx__gpu_crc_destroy(tpx_gpu_crc_t *c) {
  if (!c) return;
  tpx__gpu_stream_destroy(c->stream); /* waits for its work */
  for (uint32_t i = 0; i < BATCHES; i++) tpx__gpu_event_put(c->pool, c->batch[i].ev);
  tpx__gpu_evpool_destroy(c->pool);
  (void)tpx__gpu_free(c->dev, c->partials);
  (void)tpx__gpu_free(c->dev, c->ops_dev);
  (void)tpx__gpu_host_free(c->dev, c->out);
  (void)tpx__gpu_release(c->dev);
  free(c);
}

/* The queued chunks' kernels on st, and the batch's event after them. */
static int launch(tpx_gpu_crc_t *c, tpx_gpu_stream_t *st) {
  struct batch *b = &c->batch[c->nbatch % BATCHES];
  tpx_gpu_event_t *ev;
  int rc = tpx__gpu_event_get(c->pool, &ev);
  if (rc) return rc;
  tpx_gpu_guard_t g;
  if ((rc = tpx__gpu_guard_enter(c->dev, &g)) != 0) {
    tpx__gpu_event_put(c->pool, ev);
    return rc;
  }
  uint32_t *part = c->partials + (size_t)(c->nbatch % BATCHES) * TPX_CRC_BATCH * SEGS;
  int e = tpx__crc_kernel_launch(c->ops_dev, c->qp, c->qlen, c->qinit, c->qidx, c->nq, part, c->out_dev,
                                 tpx__gpu_stream_handle(st));
  tpx__gpu_guard_leave(&g);
  if (e == 0) rc = tpx__gpu_event_record(ev, st);
  if (e || rc) {
    tpx__gpu_event_put(c->pool, ev);
    (void)tpx__gpu_stream_sync(st);
    return e ? tpx_err_quiet(TPX_ECUDA, "GPU %d checksums: kernel launch failed (CUDA error %d)", c->dev, e) : rc;
  }
  b->ev = ev;
  c->nq = 0;
  c->nbatch++;
  return 0;
}

int tpx__gpu_crc_flush(tpx_gpu_crc_t *c) { return c->nq ? launch(c, c->stream) : 0; }

/* The kernels run here and give the known answer, or this GPU has no sums
 * (TPX_ENOTSUP: a GPU without a kernel image for it, a driver stand-in). */
static int self_test(tpx_gpu_crc_t *c) {
  uint8_t *in = (uint8_t *)(c->partials + TPX_CRC_BATCH * SEGS); /* batch 1's scratch as the input */
  int rc = tpx__gpu_memcpy(c->dev, in, "123456789", 9);
  if (rc) return rc;
  tpx_gpu_guard_t g;
  if ((rc = tpx__gpu_guard_enter(c->dev, &g)) != 0) return rc;
  const void *p[1] = {in};
  uint64_t len[1] = {9};
  uint32_t init[1] = {init_term(c, 9)}, idx[1] = {0};
  int e = tpx__crc_kernel_launch(c->ops_dev, p, len, init, idx, 1, c->partials, c->out_dev,
                                 tpx__gpu_stream_handle(c->stream));
  tpx__gpu_guard_leave(&g);
  if (e == 0 && (rc = tpx__gpu_stream_sync(c->stream)) != 0) return rc;
  if (e || __atomic_load_n(&c->out[0], __ATOMIC_ACQUIRE) != 0xe3069283u)
    return tpx_err_quiet(TPX_ENOTSUP, "GPU %d: the CRC-32C kernel %s", c->dev,
                         e ? "does not run here" : "gives a wrong known answer");
  return 0;
}

int tpx__gpu_crc_create(int dev, tpx_gpu_crc_t **out) {
  *out = NULL;
  (void)pthread_once(&ops_once, ops_init);
  int rc = tpx__gpu_retain(dev);
  if (rc) return rc;
  tpx_gpu_crc_t *c = calloc(1, sizeof(*c));
  if (!c) {
    (void)tpx__gpu_release(dev);
    return tpx_err_quiet(TPX_ENOMEM, "GPU %d checksums: out of memory", dev);
  }
  c->dev = dev;
  c->init_len = UINT64_MAX;
  rc = tpx__gpu_stream_create(dev, &c->stream);
  if (!rc) rc = tpx__gpu_evpool_create(dev, 16, &c->pool);
  if (!rc) rc = tpx__gpu_malloc(dev, (size_t)BATCHES * TPX_CRC_BATCH * SEGS * sizeof(uint32_t), (void **)&c->partials);
  if (!rc) rc = tpx__gpu_host_alloc(dev, SLOTS * sizeof(uint32_t), (void **)&c->out);
  if (!rc) rc = tpx__gpu_host_dev_ptr(dev, c->out, (void **)&c->out_dev);
  if (!rc) rc = tpx__gpu_malloc(dev, sizeof(ops), (void **)&c->ops_dev);
  if (!rc) rc = tpx__gpu_memcpy(dev, c->ops_dev, &ops, sizeof(ops));
  if (!rc) rc = self_test(c);
  if (rc) {
    tpx__gpu_crc_destroy(c);
    return rc;
  }
  *out = c;
  return 0;
}

/* Whether s's launch finished: 1 yes, 0 not yet (or not launched), < 0
 * failed. */
static int settle(tpx_gpu_crc_t *c, const struct slot *s) {
  struct batch *b = &c->batch[s->batch];
  if (b->seq != s->bseq || b->done) return 1;
  if (!b->ev) return 0;
  int q = tpx__gpu_event_query(b->ev);
  if (q == 1) b->done = 1;
  return q;
}

/* Queue one chunk into the filling batch (which first takes over its index
 * from a finished launch). */
static int queue(tpx_gpu_crc_t *c, const void *p, uint64_t len, uint64_t *ticket) {
  if (len == 0 || len > TPX_GPU_CRC_MAX_BYTES)
    return tpx_err_quiet(TPX_EINVAL, "GPU %d checksums: %llu bytes", c->dev, (unsigned long long)len);
  struct slot *s = &c->slot[c->next % SLOTS];
  struct batch *b = &c->batch[c->nbatch % BATCHES];
  if (s->wanted) return TPX_EAGAIN;
  if (c->nq == 0 && b->ev) { /* the index's last launch */
    int q = b->done ? 1 : tpx__gpu_event_query(b->ev);
    if (q < 0) return tpx_err_quiet(TPX_ECUDA, "GPU %d checksums: an earlier sum failed", c->dev);
    if (q == 0) return TPX_EAGAIN;
    tpx__gpu_event_put(c->pool, b->ev);
    b->ev = NULL;
  }
  if (c->nq == 0) {
    b->seq = c->nbatch;
    b->done = 0;
  }
  uint32_t i = (uint32_t)(c->next % SLOTS);
  c->qp[c->nq] = p;
  c->qlen[c->nq] = len;
  c->qinit[c->nq] = init_term(c, len);
  c->qidx[c->nq++] = i;
  s->ticket = c->next;
  s->batch = (uint32_t)(c->nbatch % BATCHES);
  s->bseq = c->nbatch;
  s->wanted = 1;
  *ticket = c->next++;
  return 0;
}

int tpx__gpu_crc_start(tpx_gpu_crc_t *c, const void *p, uint64_t len, uint64_t *ticket) {
  int rc = queue(c, p, len, ticket);
  return rc == 0 && c->nq == TPX_CRC_BATCH ? tpx__gpu_crc_flush(c) : rc;
}

int tpx__gpu_crc_start_on(tpx_gpu_crc_t *c, struct tpx_gpu_stream *stream, const void *const *p, const uint64_t *len,
                          uint32_t n, uint64_t *tickets) {
  int rc = tpx__gpu_crc_flush(c); /* a batch of its own */
  uint32_t k = 0;
  for (; k < n && rc == 0; k++) rc = queue(c, p[k], len[k], &tickets[k]);
  if (rc == 0) rc = launch(c, stream);
  if (rc == 0) return 0;
  /* none of them then: the caller sums them later, its own way */
  for (uint32_t i = 0; i < c->nq; i++) c->slot[c->qidx[i]].wanted = 0;
  c->next -= c->nq;
  c->nq = 0;
  return rc;
}

int tpx__gpu_crc_poll(tpx_gpu_crc_t *c, uint64_t ticket, uint32_t *crc) {
  struct slot *s = &c->slot[ticket % SLOTS];
  if (!s->wanted || s->ticket != ticket)
    return tpx_err_quiet(TPX_EINTERNAL, "GPU %d checksums: ticket %llu is not in flight", c->dev,
                         (unsigned long long)ticket);
  if (c->batch[s->batch].seq == s->bseq && !c->batch[s->batch].ev) { /* still queued: its caller waits */
    int rc = tpx__gpu_crc_flush(c);
    if (rc) return rc;
  }
  int q = settle(c, s);
  if (q < 0) {
    s->wanted = 0;
    return tpx_err_quiet(TPX_ECUDA, "GPU %d checksums: the kernel failed", c->dev);
  }
  if (q == 0) return 0;
  *crc = __atomic_load_n(&c->out[ticket % SLOTS], __ATOMIC_ACQUIRE);
  s->wanted = 0;
  return 1;
}

void tpx__gpu_crc_drop(tpx_gpu_crc_t *c, uint64_t ticket) {
  struct slot *s = &c->slot[ticket % SLOTS];
  if (!s->wanted || s->ticket != ticket) return;
  s->wanted = 0;
  struct batch *b = &c->batch[s->batch];
  if (b->seq != s->bseq || b->done) return;
  if (!b->ev && tpx__gpu_crc_flush(c) != 0) return;
  if (b->ev) (void)tpx__gpu_event_sync(b->ev); /* its bytes may go now */
}

#endif
