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

#define SLOTS 1024u
#define SEGS (TPX_GPU_CRC_MAX_BYTES / TPX_CRC_SEG)

struct slot {
  tpx_gpu_event_t *ev; /* recorded after the kernels; NULL once they finished */
  uint64_t ticket;
  int wanted;          /* started, neither polled done nor dropped */
};

struct tpx_gpu_crc {
  int dev;
  tpx_gpu_stream_t *stream;
  tpx_gpu_evpool_t *pool;
  uint32_t *partials;       /* device: SLOTS * SEGS words */
  uint32_t *out, *out_dev;  /* pinned host: SLOTS words, and as the GPU writes them */
  struct slot slot[SLOTS];
  uint64_t next;
  uint64_t init_len;        /* the last length's initial-value term */
  uint32_t init;
};

static tpx_crc_ops_t ops;
static pthread_once_t ops_once = PTHREAD_ONCE_INIT;

static void ops_init(void) {
  for (int k = 0; k < TPX_CRC_PIECE_LEVELS; k++) tpx__crc32c_zeros_op((uint64_t)(TPX_CRC_SEG / TPX_CRC_THREADS) << k, ops.piece[k]);
  for (int k = 0; k < TPX_CRC_SEG_LEVELS; k++) tpx__crc32c_zeros_op((uint64_t)TPX_CRC_SEG << k, ops.seg[k]);
}

void tpx__gpu_crc_destroy(tpx_gpu_crc_t *c) {
  if (!c) return;
  tpx__gpu_stream_destroy(c->stream); /* waits for its work */
  for (uint32_t i = 0; i < SLOTS; i++) tpx__gpu_event_put(c->pool, c->slot[i].ev);
  tpx__gpu_evpool_destroy(c->pool);
  (void)tpx__gpu_free(c->dev, c->partials);
  (void)tpx__gpu_host_free(c->dev, c->out);
  (void)tpx__gpu_release(c->dev);
  free(c);
}

static uint32_t init_term(tpx_gpu_crc_t *c, uint64_t len);

/* The kernels run here and give the known answer, or this GPU has no sums
 * (TPX_ENOTSUP: a GPU without a kernel image for it, a driver stand-in). */
static int self_test(tpx_gpu_crc_t *c) {
  uint8_t *in = (uint8_t *)(c->partials + SEGS); /* slot 1's scratch as the input */
  int rc = tpx__gpu_memcpy(c->dev, in, "123456789", 9);
  if (rc) return rc;
  tpx_gpu_guard_t g;
  if ((rc = tpx__gpu_guard_enter(c->dev, &g)) != 0) return rc;
  int e = tpx__crc_kernel_launch(in, 9, &ops, init_term(c, 9), c->partials, c->out_dev, tpx__gpu_stream_handle(c->stream));
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
  if (!rc) rc = tpx__gpu_malloc(dev, (size_t)SLOTS * SEGS * sizeof(uint32_t), (void **)&c->partials);
  if (!rc) rc = tpx__gpu_host_alloc(dev, SLOTS * sizeof(uint32_t), (void **)&c->out);
  if (!rc) rc = tpx__gpu_host_dev_ptr(dev, c->out, (void **)&c->out_dev);
  if (!rc) rc = self_test(c);
  if (rc) {
    tpx__gpu_crc_destroy(c);
    return rc;
  }
  *out = c;
  return 0;
}

/* A slot's event done: its result read (or dropped) and the slot free. */
static int settle(tpx_gpu_crc_t *c, struct slot *s) {
  if (!s->ev) return 1;
  int q = tpx__gpu_event_query(s->ev);
  if (q <= 0) return q; /* 0 running, < 0 failed */
  tpx__gpu_event_put(c->pool, s->ev);
  s->ev = NULL;
  return 1;
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

int tpx__gpu_crc_start(tpx_gpu_crc_t *c, const void *p, uint64_t len, uint64_t *ticket) {
  if (len == 0 || len > TPX_GPU_CRC_MAX_BYTES)
    return tpx_err_quiet(TPX_EINVAL, "GPU %d checksums: %llu bytes", c->dev, (unsigned long long)len);
  uint32_t i = (uint32_t)(c->next % SLOTS);
  struct slot *s = &c->slot[i];
  if (s->wanted) return TPX_EAGAIN;
  int q = settle(c, s); /* a dropped sum's work */
  if (q < 0) return tpx_err_quiet(TPX_ECUDA, "GPU %d checksums: an earlier sum failed", c->dev);
  if (q == 0) return TPX_EAGAIN;
  tpx_gpu_event_t *ev;
  int rc = tpx__gpu_event_get(c->pool, &ev);
  if (rc) return rc;
  tpx_gpu_guard_t g;
  if ((rc = tpx__gpu_guard_enter(c->dev, &g)) != 0) {
    tpx__gpu_event_put(c->pool, ev);
    return rc;
  }
  int e = tpx__crc_kernel_launch(p, len, &ops, init_term(c, len), c->partials + (size_t)i * SEGS, c->out_dev + i,
                                 tpx__gpu_stream_handle(c->stream));
  tpx__gpu_guard_leave(&g);
  if (e) {
    tpx__gpu_event_put(c->pool, ev);
    return tpx_err_quiet(TPX_ECUDA, "GPU %d checksums: kernel launch failed (CUDA error %d)", c->dev, e);
  }
  if ((rc = tpx__gpu_event_record(ev, c->stream)) != 0) {
    tpx__gpu_event_put(c->pool, ev);
    (void)tpx__gpu_stream_sync(c->stream); /* the slot's buffers are free again */
    return rc;
  }
  s->ev = ev;
  s->wanted = 1;
  s->ticket = c->next;
  *ticket = c->next++;
  return 0;
}

int tpx__gpu_crc_poll(tpx_gpu_crc_t *c, uint64_t ticket, uint32_t *crc) {
  struct slot *s = &c->slot[ticket % SLOTS];
  if (!s->wanted || s->ticket != ticket)
    return tpx_err_quiet(TPX_EINTERNAL, "GPU %d checksums: ticket %llu is not in flight", c->dev,
                         (unsigned long long)ticket);
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
  if (s->wanted && s->ticket == ticket) s->wanted = 0;
}

#endif
