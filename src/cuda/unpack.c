/* The GPU unpacker: persistent streams, pooled events, persistent descriptor
 * buffers. See unpack.h; the entries and their validation are the TCPX
 * contract's (tcpx/contract.h). The kernel itself is in unpack_kernel.cu. */
#include "cuda/unpack.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "cuda/gpu.h"
#include "tcpx/contract.h"

void tpx__unpacker_opts_default(tpx_unpack_opts_t *o) {
  memset(o, 0, sizeof *o);
  o->mode = TPX_UNPACK_KERNEL;
  o->desc = TPX_UNPACK_DESC_DEFAULT;
  o->max_frags = TPX_UNPACK_MAX_FRAGS;
  o->max_inflight = 32;
  o->threads = 256;
  o->nstreams = TPX_UNPACK_NSTREAMS_DEFAULT;
  o->d2d_batch = 1;
  o->host_stage_bytes = 4u << 20;
}

#ifndef TPX_HAVE_CUDA

int tpx__unpacker_create(int dev, const tpx_unpack_opts_t *opts, tpx_unpacker_t **out) {
  (void)dev;
  (void)opts;
  if (out) *out = NULL;
  return tpx_err_quiet(TPX_ENOTSUP, "GPU unpack: built without CUDA support (use tpx__tcpx_unpack_cpu)");
}
void tpx__unpacker_destroy(tpx_unpacker_t *u) { (void)u; }
int tpx__unpacker_submit(tpx_unpacker_t *u, const tpx_unpack_chunk_t *c, uint64_t *ticket) {
  (void)u;
  (void)c;
  (void)ticket;
  return tpx_err_quiet(TPX_ENOTSUP, "GPU unpack: built without CUDA support");
}
int tpx__unpacker_done(tpx_unpacker_t *u, uint64_t ticket) {
  (void)u;
  (void)ticket;
  return TPX_ENOTSUP;
}
int tpx__unpacker_wait(tpx_unpacker_t *u, uint64_t ticket, int timeout_ms) {
  (void)u;
  (void)ticket;
  (void)timeout_ms;
  return TPX_ENOTSUP;
}
int tpx__unpacker_sync(tpx_unpacker_t *u) {
  (void)u;
  return TPX_ENOTSUP;
}
void *tpx__unpacker_stream(tpx_unpacker_t *u) {
  (void)u;
  return NULL;
}
int tpx__unpacker_nstreams(const tpx_unpacker_t *u) {
  (void)u;
  return 0;
}
void *tpx__unpacker_stream_at(tpx_unpacker_t *u, int i) {
  (void)u;
  (void)i;
  return NULL;
}
int tpx__unpacker_device(const tpx_unpacker_t *u) {
  (void)u;
  return TPX_GPU_NONE;
}
struct tpx_gpu_stream *tpx__unpacker_ticket_stream(tpx_unpacker_t *u, uint64_t ticket) {
  (void)u;
  (void)ticket;
  return NULL;
}
void tpx__unpacker_get_stats(tpx_unpacker_t *u, tpx_unpack_stats_t *st) {
  (void)u;
  if (st) memset(st, 0, sizeof *st);
}

#else

#include <cuda_runtime_api.h>

#include "cuda/unpack_kernel.h"

/* A fragment is cut into slices of at most this many bytes, one warp each,
 * so that a few large fragments still spread over the whole GPU. */
#ifndef SLICE_BYTES
#define SLICE_BYTES 8192u
#endif

struct inflight {
  uint64_t ticket;
  tpx_gpu_event_t *ev;
};

struct tpx_unpacker {
  int dev;
  tpx_unpack_opts_t o;
  int ns;                                     /* streams in use */
  tpx_gpu_stream_t *streams[TPX_UNPACK_MAX_STREAMS];
  cudaStream_t cs[TPX_UNPACK_MAX_STREAMS];
  tpx_gpu_evpool_t *pool;
  int max_blocks;
  /* kernel mode: pinned staging ring of max_inflight slots x max_frags
   * entries (slot = ticket % max_inflight, free again once its ticket has
   * retired), its device mapping, and (desc=copy) a device ring of the same
   * shape; desc=param: a host scratch block of TPX_UNPACK_PARAM_MAX. */
  tpx_unpack_meta_t *stage;
  tpx_unpack_meta_t *stage_dev;
  tpx_unpack_meta_t *desc_dev;
  tpx_unpack_meta_t *param;
  /* d2d batch arrays (max_frags each) */
  void **b_dst;
  const void **b_src;
  size_t *b_len;
  int batch_ok; /* cudaMemcpyBatchAsync usable (cleared on its first refusal) */
  /* host mode */
  unsigned char *host_stage;
  size_t host_stage_bytes;
  /* submitted, not yet retired; tickets in the ring are consecutive */
  struct inflight *ring;
  uint32_t head, count;
  uint64_t next_ticket; /* next ticket to hand out */
  uint64_t retired;     /* every ticket < retired is done */
  int failed;           /* sticky: the GPU work failed */
  pthread_mutex_t mu;
  tpx_unpack_stats_t st;
};

static int cuda_fail(cudaError_t e, const char *what, int dev) {
  return tpx_err_quiet(e == cudaErrorMemoryAllocation ? TPX_ENOMEM : TPX_ECUDA, "unpack on GPU %d: %s: %s (%s)",
                 dev, what, cudaGetErrorName(e), cudaGetErrorString(e));
}

static void free_buffers(tpx_unpacker_t *u) {
  if (u->stage) tpx__gpu_host_free(u->dev, u->stage);
  if (u->desc_dev) tpx__gpu_free(u->dev, u->desc_dev);
  if (u->host_stage) tpx__gpu_host_free(u->dev, u->host_stage);
  free(u->param);
  free(u->b_dst);
  free((void *)u->b_src);
  free(u->b_len);
  u->stage = u->stage_dev = u->desc_dev = u->param = NULL;
  u->host_stage = NULL;
  u->b_dst = NULL;
  u->b_src = NULL;
  u->b_len = NULL;
}

static void destroy_streams(tpx_unpacker_t *u) {
  for (int i = 0; i < TPX_UNPACK_MAX_STREAMS; i++) {
    tpx__gpu_stream_destroy(u->streams[i]);
    u->streams[i] = NULL;
  }
}

/* The buffers the unpack mode needs (inside the device guard). */
static int alloc_mode_buffers(tpx_unpacker_t *u) {
  const tpx_unpack_opts_t o = u->o;
  const int dev = u->dev;
  int rc = 0;
  const size_t ring_bytes = (size_t)o.max_inflight * o.max_frags * sizeof(tpx_unpack_meta_t);
  if (o.mode == TPX_UNPACK_KERNEL) {
    cudaError_t e = tpx__unpacker_kernel_max_blocks(o.threads, &u->max_blocks);
    if (e != cudaSuccess) rc = cuda_fail(e, "occupancy query", dev);
    if (!rc && o.desc != TPX_UNPACK_DESC_DIRECT) {
      rc = tpx__gpu_host_alloc(dev, ring_bytes, (void **)&u->stage);
      if (!rc) rc = tpx__gpu_host_dev_ptr(dev, u->stage, (void **)&u->stage_dev);
    }
    if (!rc && o.desc == TPX_UNPACK_DESC_COPY) rc = tpx__gpu_malloc(dev, ring_bytes, (void **)&u->desc_dev);
    if (!rc && o.desc == TPX_UNPACK_DESC_PARAM) {
      u->param = aligned_alloc(16, TPX_UNPACK_PARAM_MAX * sizeof(tpx_unpack_meta_t));
      if (!u->param) rc = tpx_err_quiet(TPX_ENOMEM, "unpack on GPU %d: parameter block", dev);
      else memset(u->param, 0, TPX_UNPACK_PARAM_MAX * sizeof(tpx_unpack_meta_t));
    }
  } else if (o.mode == TPX_UNPACK_D2D) {
    u->batch_ok = o.d2d_batch;
    u->b_dst = calloc(o.max_frags ? o.max_frags : 1, sizeof *u->b_dst);
    u->b_src = calloc(o.max_frags ? o.max_frags : 1, sizeof *u->b_src);
    u->b_len = calloc(o.max_frags ? o.max_frags : 1, sizeof *u->b_len);
    if (!u->b_dst || !u->b_src || !u->b_len) rc = tpx_err_quiet(TPX_ENOMEM, "unpack on GPU %d: batch arrays", dev);
  } else {
    rc = tpx__gpu_host_alloc(dev, o.host_stage_bytes, (void **)&u->host_stage);
    if (!rc) u->host_stage_bytes = o.host_stage_bytes;
  }
  return rc;
}

/* The caller's options over the defaults (zero = default), checked. */
static int resolve_opts(int dev, const tpx_unpack_opts_t *opts, tpx_unpack_opts_t *out) {
  tpx_unpack_opts_t o;
  tpx__unpacker_opts_default(&o);
  if (opts) {
    tpx_unpack_opts_t d = o;
    o = *opts;
    if (!o.max_frags) o.max_frags = d.max_frags;
    if (!o.max_inflight) o.max_inflight = d.max_inflight;
    if (!o.threads) o.threads = d.threads;
    if (!o.nstreams) o.nstreams = d.nstreams;
    if (o.d2d_batch < 0) o.d2d_batch = d.d2d_batch;
    if (!o.host_stage_bytes) o.host_stage_bytes = d.host_stage_bytes;
  }
  if (o.mode < TPX_UNPACK_KERNEL || o.mode > TPX_UNPACK_HOST || o.desc < TPX_UNPACK_DESC_COPY ||
      o.desc > TPX_UNPACK_DESC_PARAM || o.threads % 32 || o.threads > TPX_UNPACK_KERNEL_MAX_THREADS ||
      o.max_frags > (1u << 24) || o.max_inflight > 4096 || o.nstreams < 1 ||
      o.nstreams > TPX_UNPACK_MAX_STREAMS)
    return tpx_err_quiet(TPX_EINVAL,
                   "unpack on GPU %d: bad options (mode %d desc %d threads %d frags %u inflight %u streams %d)",
                   dev, o.mode, o.desc, o.threads, o.max_frags, o.max_inflight, o.nstreams);
  *out = o;
  return 0;
}

int tpx__unpacker_create(int dev, const tpx_unpack_opts_t *opts, tpx_unpacker_t **out) {
  if (!out) return tpx_err_quiet(TPX_EINVAL, "tpx__unpacker_create: NULL");
  *out = NULL;
  tpx_unpack_opts_t o;
  int rc = resolve_opts(dev, opts, &o);
  if (rc) return rc;
  /* The host mode reuses one staging buffer: one stream keeps it ordered. */
  if (o.mode == TPX_UNPACK_HOST) o.nstreams = 1;
  rc = tpx__gpu_retain(dev);
  if (rc) return rc;
  tpx_unpacker_t *u = calloc(1, sizeof *u);
  struct inflight *ring = calloc(o.max_inflight, sizeof *ring);
  if (!u || !ring) {
    free(u);
    free(ring);
    tpx__gpu_release(dev);
    return tpx_err_quiet(TPX_ENOMEM, "unpack on GPU %d", dev);
  }
  u->dev = dev;
  u->o = o;
  u->ns = o.nstreams;
  u->ring = ring;
  pthread_mutex_init(&u->mu, NULL);

  tpx_gpu_guard_t g;
  for (int i = 0; i < u->ns && !rc; i++) {
    rc = tpx__gpu_stream_create(dev, &u->streams[i]);
    if (!rc) u->cs[i] = (cudaStream_t)tpx__gpu_stream_handle(u->streams[i]);
  }
  if (!rc) rc = tpx__gpu_evpool_create(dev, (int)TPX_MIN(o.max_inflight, 64u), &u->pool);
  if (!rc) rc = tpx__gpu_guard_enter(dev, &g);
  if (rc) goto fail;
  rc = alloc_mode_buffers(u);
  tpx__gpu_guard_leave(&g);
  if (rc) goto fail;
  TPX_DEBUG("unpack on GPU %d: mode %s, descriptors %s, %u frags/chunk, %d threads, %d blocks max, %d streams",
            dev, tpx__unpacker_mode_name(o.mode), tpx__unpacker_desc_name(o.desc), o.max_frags, o.threads,
            u->max_blocks, u->ns);
  *out = u;
  return 0;
fail:
  free_buffers(u);
  tpx__gpu_evpool_destroy(u->pool);
  destroy_streams(u);
  pthread_mutex_destroy(&u->mu);
  free(u->ring);
  free(u);
  tpx__gpu_release(dev);
  return rc;
}

/* Retire tickets < upto (all known finished). Lock held. */
static void retire_upto(tpx_unpacker_t *u, uint64_t upto) {
  while (u->count && u->retired < upto) {
    struct inflight *f = &u->ring[u->head];
    tpx__gpu_event_put(u->pool, f->ev);
    f->ev = NULL;
    u->retired = f->ticket + 1;
    u->head = (u->head + 1) % u->o.max_inflight;
    u->count--;
  }
}

static tpx_gpu_event_t *event_of(tpx_unpacker_t *u, uint64_t ticket) {
  return u->ring[(u->head + (ticket - u->retired)) % u->o.max_inflight].ev;
}

/* 1 if ticket and every earlier one are done (retiring them), 0 if not yet,
 * < 0 if the GPU work failed. Lock held; ticket < next_ticket. */
static int poll_ticket(tpx_unpacker_t *u, uint64_t ticket) {
  if (u->failed) return u->failed;
  if (ticket < u->retired) return 1;
  if (u->ns == 1) {
    /* One stream runs in order: this ticket done means all earlier are. */
    int q = tpx__gpu_event_query(event_of(u, ticket));
    if (q < 0) return u->failed = q;
    if (q == 1) retire_upto(u, ticket + 1);
    return q;
  }
  /* Several streams: chunks may finish out of order; report in order. */
  while (u->retired <= ticket) {
    int q = tpx__gpu_event_query(event_of(u, u->retired));
    if (q < 0) return u->failed = q;
    if (q == 0) return 0;
    retire_upto(u, u->retired + 1);
  }
  return 1;
}

/* Retire whatever is already finished. Lock held. */
static int reap(tpx_unpacker_t *u) {
  if (!u->count) return 0;
  int q = poll_ticket(u, u->next_ticket - 1); /* one query when all are done */
  if (q != 0 || u->ns > 1) return q < 0 ? q : 0;
  while (u->count > 1) { /* one stream: oldest first until one is not done */
    q = poll_ticket(u, u->retired);
    if (q <= 0) return q;
  }
  return 0;
}

static uint32_t slice_shift_for(uint32_t max_len) {
  uint32_t s = 0;
  while (s < 20 && (max_len >> s) > SLICE_BYTES) s++;
  return s;
}

/* Kernel mode. Lock held, context current. */
static int submit_kernel(tpx_unpacker_t *u, const tpx_unpack_chunk_t *c, uint64_t ticket, cudaStream_t cs) {
  const tpx_unpack_meta_t *entries = c->meta;
  const tpx_unpack_meta_t *desc = c->meta_dev;
  const size_t bytes = (size_t)c->cnt * sizeof *entries;
  const int param = u->o.desc == TPX_UNPACK_DESC_PARAM && c->cnt <= TPX_UNPACK_PARAM_MAX;
  tpx_unpack_meta_t *slot = NULL;
  if (param) {
    memcpy(u->param, c->meta, bytes);
    entries = u->param;
  } else if (u->o.desc != TPX_UNPACK_DESC_DIRECT) {
    slot = u->stage + (ticket % u->o.max_inflight) * u->o.max_frags;
    memcpy(slot, c->meta, bytes);
    entries = slot;
    desc = u->stage_dev + (slot - u->stage);
  } else if (!desc) {
    return tpx_err_quiet(TPX_EINVAL, "unpack on GPU %d: direct descriptors need chunk.meta_dev", u->dev);
  }
  uint32_t max_len = 0;
  uint64_t total = 0;
  /* Validate the copy when there is one: what is checked is what runs. */
  int rc = tpx__tcpx_unpack_validate(entries, c->cnt, c->bounce_bytes, c->dst_bytes, &max_len, &total);
  if (rc) return rc;
  const uint32_t shift = slice_shift_for(max_len);
  cudaError_t e;
  if (param) {
    e = tpx__unpacker_kernel_launch_param(entries, c->cnt, shift, c->bounce, c->dst, u->o.threads, u->max_blocks, cs);
  } else {
    if (u->o.desc == TPX_UNPACK_DESC_COPY && c->cnt) {
      tpx_unpack_meta_t *dslot = u->desc_dev + (slot - u->stage);
      e = cudaMemcpyAsync(dslot, slot, bytes, cudaMemcpyHostToDevice, cs);
      if (e != cudaSuccess) return cuda_fail(e, "descriptor copy", u->dev);
      desc = dslot;
    }
    e = tpx__unpacker_kernel_launch(desc, c->cnt, shift, c->bounce, c->dst, u->o.threads, u->max_blocks, cs);
  }
  if (e != cudaSuccess) return cuda_fail(e, "kernel launch", u->dev);
  u->st.launches++;
  u->st.bytes += total;
  return 0;
}

/* d2d mode: one copy per run of fragments contiguous on both sides, issued
 * as one batch per chunk where the runtime supports it. */
static int submit_d2d(tpx_unpacker_t *u, const tpx_unpack_chunk_t *c, cudaStream_t cs) {
  uint64_t total = 0;
  int rc = tpx__tcpx_unpack_validate(c->meta, c->cnt, c->bounce_bytes, c->dst_bytes, NULL, &total);
  if (rc) return rc;
  const unsigned char *src = c->bounce;
  unsigned char *dst = c->dst;
  size_t n = 0;
  for (uint32_t i = 0; i < c->cnt; i++) {
    const tpx_unpack_meta_t m = c->meta[i];
    if (!m.len) continue;
    if (n && (const unsigned char *)u->b_src[n - 1] + u->b_len[n - 1] == src + m.src_off &&
        (unsigned char *)u->b_dst[n - 1] + u->b_len[n - 1] == dst + m.dst_off) {
      u->b_len[n - 1] += m.len;
      continue;
    }
    u->b_src[n] = src + m.src_off;
    u->b_dst[n] = dst + m.dst_off;
    u->b_len[n] = m.len;
    n++;
  }
  if (n > 1 && u->batch_ok) {
    struct cudaMemcpyAttributes attr;
    memset(&attr, 0, sizeof attr);
    attr.srcAccessOrder = cudaMemcpySrcAccessOrderStream;
    size_t idx = 0;
    cudaError_t e = cudaMemcpyBatchAsync((void *const *)u->b_dst, (const void *const *)u->b_src, u->b_len, n,
                                         &attr, &idx, 1, cs);
    if (e == cudaSuccess) {
      u->st.launches++;
      u->st.bytes += total;
      return 0;
    }
    /* Not supported here (or refused these operands): per-run copies from now on. */
    TPX_INFO("unpack on GPU %d: cudaMemcpyBatchAsync unavailable (%s); one copy per fragment run", u->dev,
             cudaGetErrorString(e));
    (void)cudaGetLastError();
    u->batch_ok = 0;
  }
  for (size_t i = 0; i < n; i++) {
    cudaError_t e = cudaMemcpyAsync(u->b_dst[i], u->b_src[i], u->b_len[i], cudaMemcpyDefault, cs);
    if (e != cudaSuccess) return cuda_fail(e, "cudaMemcpyAsync", u->dev);
    u->st.launches++;
  }
  u->st.bytes += total;
  return 0;
}

/* host mode (debug): bounce -> pinned host staging laid out like the
 * destination span, then staging -> destination, per contiguous run. */
static int submit_host(tpx_unpacker_t *u, const tpx_unpack_chunk_t *c, cudaStream_t cs) {
  uint64_t total = 0;
  int rc = tpx__tcpx_unpack_validate(c->meta, c->cnt, c->bounce_bytes, c->dst_bytes, NULL, &total);
  if (rc || c->cnt == 0) return rc;
  uint64_t lo = UINT64_MAX, hi = 0;
  for (uint32_t i = 0; i < c->cnt; i++) {
    if (!c->meta[i].len) continue;
    lo = TPX_MIN(lo, c->meta[i].dst_off);
    hi = TPX_MAX(hi, c->meta[i].dst_off + c->meta[i].len);
  }
  if (hi == 0) return 0;
  /* The staging buffer is reused: the previous chunk's copies out of it
   * must have finished. Debug mode, so simply wait. */
  cudaError_t e = cudaStreamSynchronize(cs);
  if (e != cudaSuccess) return cuda_fail(e, "cudaStreamSynchronize", u->dev);
  if (hi - lo > u->host_stage_bytes) {
    tpx__gpu_host_free(u->dev, u->host_stage);
    u->host_stage = NULL;
    u->host_stage_bytes = 0;
    rc = tpx__gpu_host_alloc(u->dev, hi - lo, (void **)&u->host_stage);
    if (rc) return rc;
    u->host_stage_bytes = hi - lo;
  }
  const unsigned char *src = c->bounce;
  unsigned char *dst = c->dst;
  for (uint32_t i = 0; i < c->cnt; i++) {
    const tpx_unpack_meta_t m = c->meta[i];
    if (!m.len) continue;
    e = cudaMemcpyAsync(u->host_stage + (m.dst_off - lo), src + m.src_off, m.len, cudaMemcpyDefault, cs);
    if (e != cudaSuccess) return cuda_fail(e, "copy to host staging", u->dev);
  }
  e = cudaStreamSynchronize(cs);
  if (e != cudaSuccess) return cuda_fail(e, "cudaStreamSynchronize", u->dev);
  /* Only bytes some entry covers are written back (holes stay untouched). */
  uint64_t d = 0, n = 0;
  for (uint32_t i = 0; i <= c->cnt; i++) {
    if (i < c->cnt) {
      const tpx_unpack_meta_t m = c->meta[i];
      if (!m.len) continue;
      if (n && m.dst_off == d + n) {
        n += m.len;
        continue;
      }
    }
    if (n) {
      e = cudaMemcpyAsync(dst + d, u->host_stage + (d - lo), n, cudaMemcpyDefault, cs);
      if (e != cudaSuccess) return cuda_fail(e, "copy from host staging", u->dev);
      u->st.launches++;
    }
    if (i < c->cnt) {
      d = c->meta[i].dst_off;
      n = c->meta[i].len;
    }
  }
  u->st.bytes += total;
  return 0;
}

int tpx__unpacker_submit(tpx_unpacker_t *u, const tpx_unpack_chunk_t *c, uint64_t *ticket) {
  if (!u || !c || !ticket) return tpx_err_quiet(TPX_EINVAL, "tpx__unpacker_submit: NULL");
  if (c->cnt > u->o.max_frags)
    return tpx_err_quiet(TPX_EINVAL, "unpack on GPU %d: %u entries > %u per chunk", u->dev, c->cnt, u->o.max_frags);
  if (c->cnt && (!c->meta || !c->bounce || !c->dst))
    return tpx_err_quiet(TPX_EINVAL, "unpack on GPU %d: NULL metadata or buffer", u->dev);
  pthread_mutex_lock(&u->mu);
  int rc = u->failed;
  if (rc) goto out;
  /* Retiring costs event queries: only when the ring is half full (the
   * caller's own polling retires the rest). */
  if (u->count >= u->o.max_inflight / 2 && (rc = reap(u)) < 0) goto out;
  if (u->count == u->o.max_inflight) {
    rc = tpx_err_quiet(TPX_EAGAIN, "unpack on GPU %d: %u chunks in flight", u->dev, u->count);
    goto out;
  }
  tpx_gpu_event_t *ev = NULL;
  rc = tpx__gpu_event_get(u->pool, &ev);
  if (rc) goto out;
  tpx_gpu_guard_t g;
  rc = tpx__gpu_guard_enter(u->dev, &g);
  if (rc) {
    tpx__gpu_event_put(u->pool, ev);
    goto out;
  }
  const uint64_t t = u->next_ticket;
  const int si = (int)(t % (uint64_t)u->ns);
  switch (u->o.mode) {
    case TPX_UNPACK_KERNEL: rc = submit_kernel(u, c, t, u->cs[si]); break;
    case TPX_UNPACK_D2D: rc = submit_d2d(u, c, u->cs[si]); break;
    default: rc = submit_host(u, c, u->cs[si]); break;
  }
  tpx__gpu_guard_leave(&g);
  if (!rc) rc = tpx__gpu_event_record(ev, u->streams[si]);
  if (rc) {
    tpx__gpu_event_put(u->pool, ev);
    goto out;
  }
  u->ring[(u->head + u->count) % u->o.max_inflight] = (struct inflight){t, ev};
  u->count++;
  u->next_ticket++;
  u->st.chunks++;
  u->st.frags += c->cnt;
  *ticket = t;
out:
  pthread_mutex_unlock(&u->mu);
  return rc < 0 ? rc : 0;
}

int tpx__unpacker_done(tpx_unpacker_t *u, uint64_t ticket) {
  if (!u) return tpx_err_quiet(TPX_EINVAL, "tpx__unpacker_done: NULL");
  pthread_mutex_lock(&u->mu);
  int rc;
  if (ticket >= u->next_ticket)
    rc = tpx_err_quiet(TPX_EINVAL, "unpack on GPU %d: unknown ticket %llu (next %llu)", u->dev,
                 (unsigned long long)ticket, (unsigned long long)u->next_ticket);
  else
    rc = poll_ticket(u, ticket);
  pthread_mutex_unlock(&u->mu);
  return rc;
}

int tpx__unpacker_wait(tpx_unpacker_t *u, uint64_t ticket, int timeout_ms) {
  uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : tpx__now_ns() + (uint64_t)timeout_ms * 1000000ull;
  long sleep_ns = 2000;
  for (;;) {
    int rc = tpx__unpacker_done(u, ticket);
    if (rc != 0) return rc < 0 ? rc : 0;
    if (tpx__now_ns() >= deadline)
      return tpx_err_quiet(TPX_ETIMEDOUT, "unpack on GPU %d: ticket %llu not done after %d ms", u->dev,
                     (unsigned long long)ticket, timeout_ms);
    struct timespec ts = {0, sleep_ns};
    nanosleep(&ts, NULL);
    if (sleep_ns < 1000000) sleep_ns *= 2;
  }
}

int tpx__unpacker_sync(tpx_unpacker_t *u) {
  if (!u) return tpx_err_quiet(TPX_EINVAL, "tpx__unpacker_sync: NULL");
  int rc = 0;
  for (int i = 0; i < u->ns && !rc; i++) rc = tpx__gpu_stream_sync(u->streams[i]);
  pthread_mutex_lock(&u->mu);
  if (rc && !u->failed) u->failed = rc;
  if (!rc && u->count) rc = poll_ticket(u, u->next_ticket - 1);
  if (rc == 0 && u->count)
    rc = tpx_err_quiet(TPX_EINTERNAL, "unpack on GPU %d: %u chunks pending after sync", u->dev, u->count);
  pthread_mutex_unlock(&u->mu);
  return rc < 0 ? rc : 0;
}

void tpx__unpacker_destroy(tpx_unpacker_t *u) {
  if (!u) return;
  for (int i = 0; i < u->ns; i++)
    if (tpx__gpu_stream_sync(u->streams[i])) TPX_WARN("unpack on GPU %d: teardown with failed GPU work", u->dev);
  while (u->count) { /* return every event, finished or not */
    tpx__gpu_event_put(u->pool, u->ring[u->head].ev);
    u->head = (u->head + 1) % u->o.max_inflight;
    u->count--;
  }
  free_buffers(u);
  tpx__gpu_evpool_destroy(u->pool);
  destroy_streams(u);
  pthread_mutex_destroy(&u->mu);
  int dev = u->dev;
  free(u->ring);
  free(u);
  tpx__gpu_release(dev);
}

struct tpx_gpu_stream *tpx__unpacker_ticket_stream(tpx_unpacker_t *u, uint64_t ticket) {
  return u && u->ns > 0 ? u->streams[ticket % (uint64_t)u->ns] : NULL;
}
void *tpx__unpacker_stream(tpx_unpacker_t *u) { return u ? (void *)u->cs[0] : NULL; }
int tpx__unpacker_nstreams(const tpx_unpacker_t *u) { return u ? u->ns : 0; }
void *tpx__unpacker_stream_at(tpx_unpacker_t *u, int i) {
  return (u && i >= 0 && i < u->ns) ? (void *)u->cs[i] : NULL;
}
int tpx__unpacker_device(const tpx_unpacker_t *u) { return u ? u->dev : TPX_GPU_NONE; }

void tpx__unpacker_get_stats(tpx_unpacker_t *u, tpx_unpack_stats_t *st) {
  if (!st) return;
  memset(st, 0, sizeof *st);
  if (!u) return;
  pthread_mutex_lock(&u->mu);
  *st = u->st;
  pthread_mutex_unlock(&u->mu);
  st->events_created = (uint64_t)tpx__gpu_evpool_created(u->pool);
}

#endif /* TPX_HAVE_CUDA */
