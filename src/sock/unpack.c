/* Unpack mode of the built-in transport (TPX_SOCK_UNPACK=1): the producer
 * side of the GPUDirect-TCPX plugin's receive contract (tcpx/contract.h,
 * docs/UNPACK.md).
 *
 * Receive side. Each recv comm owns a bounce pool of 4 KiB pages and a
 * metadata block {loadMeta mem[16][2048]; u64 cnt[16]}. When a socket's
 * thread reads the first part header of the k-th message, the message is
 * admitted (in order): it takes the pages for the bytes the receive keeps
 * from a stack of free pages (shuffled once, so a message's pages are
 * scattered, as devmem pages are) and writes the slot's entries (slot
 * k % 16). The threads read straight into those pages with one recvmsg over
 * many page iovecs. test() publishes cnt[slot] after a release fence once
 * every byte is in; the pages and the slot come back only with
 * irecvConsumed. If the pool runs dry (or an earlier message is not admitted
 * yet) the socket stops reading (its bytes wait in the kernel, TCP flow
 * control holds the sender) and is kicked when that changes: no spinning.
 *
 * With a usable GPU the pool and the metadata are pinned host memory mapped
 * into the GPU (cudaHostAllocMapped | Portable), so one kernel can gather the
 * pages into device memory over PCIe; without one they are ordinary host
 * memory and the consumer gathers with the CPU (tpx__tcpx_unpack_cpu).
 *
 * Send side. Sends from CUDA memory are copied into a pinned staging ring of
 * the send comm (device -> host) before their bytes go on the wire; the
 * ring's arithmetic is common/ring.h.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "cuda/gpu.h"
#include "sock/sock.h"

#define META_BYTES (sizeof(tpx_unpack_meta_block_t))
/* The device handle sits right after the metadata block, 64-byte aligned. */
#define DH_OFFSET ((META_BYTES + 63) & ~(size_t)63)
#define META_ALLOC (DH_OFFSET + 64)

/* ---- memory --------------------------------------------------------------------- */

static int mem_alloc(int gpu, size_t bytes, char **out, const char *what) {
  *out = NULL;
  if (gpu >= 0) {
    void *p = NULL;
    int rc = tpx__gpu_host_alloc(gpu, bytes, &p);
    if (rc != 0)
      return tpx_err_quiet(rc, "sock unpack: pinned %s of %zu bytes on GPU %d: %s", what, bytes, gpu,
                     tpx_last_error());
    *out = p;
    return 0;
  }
  void *p =
      aligned_alloc(TPX_SOCK_PAGE, (bytes + TPX_SOCK_PAGE - 1) & ~(size_t)(TPX_SOCK_PAGE - 1));
  if (p == NULL)
    return tpx_err_quiet(TPX_ENOMEM, "sock unpack: %s of %zu bytes: out of memory", what, bytes);
  *out = p;
  return 0;
}

static void mem_free(int gpu, char *p) {
  if (p == NULL) return;
  if (gpu >= 0) {
    if (tpx__gpu_host_free(gpu, p) != 0)
      TPX_WARN("sock unpack: freeing pinned memory on GPU %d: %s", gpu, tpx_last_error());
  } else {
    free(p);
  }
}

static int dev_addr(int gpu, char *host, void **dev) {
  if (gpu < 0) {
    *dev = host;
    return 0;
  }
  return tpx__gpu_host_dev_ptr(gpu, host, dev);
}

/* Hold a reference on `gpu` for the comm (released by tpx__sock_gpu_fini). */
static int hold_gpu(tpx_sock_comm_t *m, int gpu) {
  if (gpu < 0 || gpu >= 64) return tpx_err_quiet(TPX_EINVAL, "sock unpack: GPU %d outside 0..63", gpu);
  if (m->gpus_held & (1ull << gpu)) return 0;
  int rc = tpx__gpu_retain(gpu);
  if (rc != 0) return rc;
  m->gpus_held |= 1ull << gpu;
  return 0;
}

/* ---- receive side: the pool ------------------------------------------------------- */

int tpx__sock_upk_create(tpx_sock_comm_t *m) {
  tpx_sock_net_t *sn = m->sn;
  tpx_sock_upk_t *u = calloc(1, sizeof(*u));
  if (u == NULL) return tpx_err_quiet(TPX_ENOMEM, "sock unpack: out of memory for recv comm state");
  pthread_mutex_init(&u->mu, NULL);
  u->gpu = -1;
  m->upk = u;
  size_t bytes = sn->cfg.sock_bounce_bytes & ~(size_t)(TPX_SOCK_PAGE - 1);
  if (bytes < TPX_SOCK_UNPACK_MAX_MSG || bytes > (4ull << 30))
    return tpx_err_quiet(TPX_EINVAL,
                   "sock unpack: bounce pool of %zu bytes: must hold one 8 MiB request and stay"
                   " addressable by 32-bit offsets (8M..4G)",
                   sn->cfg.sock_bounce_bytes);
  int rc;
  /* The pool lives in the context of the GPU current at accept, as the
   * plugin's bounce pages do (gpu_current_dev in tcpxCommNew). Pinned
   * portable mapped memory stays addressable by every GPU (UVA). */
  if (sn->gpu_ok && m->gpu_bound >= 0) {
    if ((rc = hold_gpu(m, m->gpu_bound)) != 0) return rc;
    u->gpu = m->gpu_bound;
  }
  u->bounce_bytes = bytes;
  u->npages = (uint32_t)(bytes / TPX_SOCK_PAGE);
  u->freeq = malloc((size_t)u->npages * sizeof(uint32_t));
  if (u->freeq == NULL) return tpx_err_quiet(TPX_ENOMEM, "sock unpack: out of memory for the page list");
  if ((rc = mem_alloc(u->gpu, bytes, &u->bounce, "bounce pool")) != 0) return rc;
  if ((rc = mem_alloc(u->gpu, META_ALLOC, &u->meta_mem, "metadata block")) != 0) return rc;
  memset(u->meta_mem, 0, META_ALLOC);
  u->meta = (tpx_unpack_meta_block_t *)(void *)u->meta_mem;
  u->dh = (tpx_unpack_dev_handle_t *)(void *)(u->meta_mem + DH_OFFSET);
  void *meta_dev = NULL;
  if ((rc = dev_addr(u->gpu, u->bounce, &u->bounce_dev)) != 0 ||
      (rc = dev_addr(u->gpu, u->meta_mem, &meta_dev)) != 0)
    return rc;
  u->meta_dev = meta_dev;
  u->dh_dev = (char *)meta_dev + DH_OFFSET;
  u->dh->meta = u->meta_dev;
  u->dh->bounce_buf = u->bounce_dev;
  /* As the plugin (src/devcomm/nccl/unpack1.cu, __tcpxNetDeviceQueueNew):
   * NCCL's kernels increment head before each copy, so it starts at -1. */
  u->dh->head = UINT64_MAX;
  /* Shuffled free list (Fisher-Yates): a message's pages are scattered over
   * the pool, never one contiguous run, like devmem pages. It is a stack:
   * the pages given back last are taken first, so the pages in use stay about
   * the bytes in flight and warm in the CPU caches, instead of cycling
   * through the whole pool. */
  uint64_t x = tpx__sock_random(sn) | 1;
  for (uint32_t i = 0; i < u->npages; i++)
    u->freeq[i] = i;
  for (uint32_t i = u->npages - 1; i > 0; i--) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint32_t j = (uint32_t)(x % ((uint64_t)i + 1));
    uint32_t t = u->freeq[i];
    u->freeq[i] = u->freeq[j];
    u->freeq[j] = t;
  }
  u->fq_count = u->npages;
  TPX_DEBUG("sock unpack: recv comm with %s: %u bounce pages (%zu bytes) in %s", m->peer, u->npages,
            bytes, u->gpu >= 0 ? "pinned mapped host memory" : "host memory");
  return 0;
}

void tpx__sock_upk_destroy(tpx_sock_comm_t *m) {
  tpx_sock_upk_t *u = m->upk;
  if (u == NULL) return;
  mem_free(u->gpu, u->bounce);
  mem_free(u->gpu, u->meta_mem);
  free(u->freeq);
  pthread_mutex_destroy(&u->mu);
  free(u);
  m->upk = NULL;
}

/* Kick the sockets stopped at admission (u->mu held; they re-check). Not
 * once teardown began: a socket must not kick a socket already detached. */
static void kick_waiters(tpx_sock_comm_t *m) {
  tpx_sock_upk_t *u = m->upk;
  if (u->waiters == 0 || atomic_load(&m->closing)) return;
  u->waiters = 0;
  for (int i = 0; i <= m->nsocks; i++) {
    tpx_sock_conn_t *c = &m->conns[i];
    if (c->upk_wait) {
      c->upk_wait = 0;
      tpx__sock_io_kick(c);
    }
  }
}

int tpx__sock_upk_admit(tpx_sock_comm_t *m, tpx_sock_conn_t *c, uint64_t seq, size_t keep) {
  tpx_sock_upk_t *u = m->upk;
  uint32_t s = tpx__tcpx_slot(seq);
  uint32_t n = (uint32_t)((keep + TPX_SOCK_PAGE - 1) / TPX_SOCK_PAGE); /* <= 2048: irecv checks */
  uint32_t *pg = u->pages[s];
  pthread_mutex_lock(&u->mu);
  if (seq < u->admit_next) {
    pthread_mutex_unlock(&u->mu);
    return 0;
  }
  /* Admission in order: a later receive never takes the pages the oldest
   * one needs, so the oldest always gets its pages once older ones are
   * consumed (docs/UNPACK.md). Both ways of waiting are registered under the
   * lock that admission and page returns take: the kick cannot be lost. */
  if (seq > u->admit_next || u->fq_count < n) {
    if (seq == u->admit_next) {
      __atomic_fetch_add(&u->stalls, 1, __ATOMIC_RELAXED); /* read without the lock (tests) */
      TPX_TRACE("sock unpack: recv comm %s: message %llu needs %u pages, %u free: waiting for"
                " irecvConsumed",
                m->peer, (unsigned long long)seq, n, u->fq_count);
    }
    c->upk_wait = 1;
    u->waiters = 1;
    pthread_mutex_unlock(&u->mu);
    return 1;
  }
  for (uint32_t i = 0; i < n; i++)
    pg[i] = u->freeq[u->fq_count - 1 - i];
  u->fq_count -= n;
  u->npg[s] = n;
  /* The entries are written now, before the bytes: the consumer reads them
   * only after cnt[s], which test() stores once the message is complete. */
  tpx_unpack_meta_t *e = u->meta->mem[s];
  for (uint32_t i = 0; i < n; i++) {
    size_t off = (size_t)i * TPX_SOCK_PAGE;
    e[i].src_off = pg[i] * TPX_SOCK_PAGE;
    e[i].len = (uint32_t)TPX_MIN((size_t)TPX_SOCK_PAGE, keep - off);
    e[i].dst_off = off;
  }
  u->admit_next = seq + 1;
  kick_waiters(m); /* sockets holding parts of later receives */
  pthread_mutex_unlock(&u->mu);
  return 0;
}

void tpx__sock_upk_skip(tpx_sock_comm_t *m, uint64_t seq) {
  tpx_sock_upk_t *u = m->upk;
  pthread_mutex_lock(&u->mu);
  if (u->admit_next == seq) {
    u->admit_next = seq + 1;
    kick_waiters(m);
  }
  pthread_mutex_unlock(&u->mu);
}

void tpx__sock_upk_quiesce(tpx_sock_comm_t *m) {
  tpx_sock_upk_t *u = m->upk;
  if (u == NULL) return;
  pthread_mutex_lock(&u->mu);
  atomic_store(&m->closing, 1);
  pthread_mutex_unlock(&u->mu);
}

ssize_t tpx__sock_upk_recv(int fd, const tpx_sock_upk_t *u, const uint32_t *pages, size_t from,
                          size_t to, const struct iovec *more) {
  struct iovec iov[TPX_SOCK_UNPACK_IOV + 1];
  int n = 0;
  size_t pos = from;
  while (pos < to) {
    size_t in = pos % TPX_SOCK_PAGE;
    size_t len = TPX_MIN((size_t)TPX_SOCK_PAGE - in, to - pos);
    char *p = u->bounce + (size_t)pages[pos / TPX_SOCK_PAGE] * TPX_SOCK_PAGE + in;
    if (n > 0 && (char *)iov[n - 1].iov_base + iov[n - 1].iov_len == p) {
      iov[n - 1].iov_len += len; /* neighbouring pages: one iovec */
    } else {
      if (n == TPX_SOCK_UNPACK_IOV) break;
      iov[n].iov_base = p;
      iov[n].iov_len = len;
      n++;
    }
    pos += len;
  }
  if (more != NULL && pos == to) iov[n++] = *more; /* only right after the last byte asked */
  struct msghdr mh;
  memset(&mh, 0, sizeof(mh));
  mh.msg_iov = iov;
  mh.msg_iovlen = (size_t)n;
  return recvmsg(fd, &mh, MSG_DONTWAIT);
}

void tpx__sock_upk_publish(tpx_sock_comm_t *m, uint64_t seq) {
  tpx_sock_upk_t *u = m->upk;
  uint32_t s = tpx__tcpx_slot(seq);
  tpx__tcpx_cnt_publish(u->meta, s, u->npg[s]); /* entries and bytes before the count */
}

void tpx__sock_upk_release(tpx_sock_comm_t *m, uint64_t seq) {
  tpx_sock_upk_t *u = m->upk;
  uint32_t s = tpx__tcpx_slot(seq);
  uint32_t n = u->npg[s];
  __atomic_store_n(&u->meta->cnt[s], (uint64_t)0, __ATOMIC_RELAXED);
  u->npg[s] = 0;
  pthread_mutex_lock(&u->mu);
  /* Pushed in reverse: the next taker gets them in the same (scattered) order. */
  for (uint32_t i = n; i-- > 0;)
    u->freeq[u->fq_count++] = u->pages[s][i];
  if (n > 0) kick_waiters(m); /* a receive may have been waiting for pages */
  pthread_mutex_unlock(&u->mu);
}

void tpx__sock_upk_fill_dev(tpx_sock_comm_t *m, tpx_net_dev_handle_t *d) {
  tpx__tcpx_dev_handle_fill(d, m->upk->dh_dev); /* the spare bytes stay the caller's */
}

/* ---- send side: staging of CUDA sends -------------------------------------------------- */

int tpx__sock_stage_copy(tpx_sock_comm_t *m, tpx_sock_req_t *r, int gpu, const void *src,
                        size_t size, void **out) {
  *out = NULL;
  int rc = hold_gpu(m, gpu);
  if (rc != 0)
    return tpx_err_quiet(rc, "isend to %s: CUDA buffer %p on GPU %d: %s", m->peer, src, gpu,
                   tpx_last_error());
  tpx_sock_stage_t *st = m->stage;
  if (st == NULL) {
    st = calloc(1, sizeof(*st));
    if (st == NULL) return tpx_err_quiet(TPX_ENOMEM, "isend: out of memory for the staging state");
    st->gpu = gpu;
    /* 64-byte pieces: every staged copy starts cache-line aligned. */
    tpx__ring_init(&st->ring, m->sn->cfg.sock_bounce_bytes, 64);
    if ((rc = mem_alloc(gpu, (size_t)st->ring.size, &st->buf, "CUDA-send staging")) != 0) {
      free(st);
      return rc;
    }
    m->stage = st;
    TPX_DEBUG("sock unpack: send comm to %s: %llu bytes of pinned staging for CUDA sends", m->peer,
              (unsigned long long)st->ring.size);
  }
  /* One contiguous piece per message (never wrapping); an empty ring takes
   * any size up to its own. */
  tpx_ring_span_t sp;
  int fit = tpx__ring_fit(&st->ring, size, &sp);
  if (fit < 0)
    return tpx_err_quiet(TPX_EINVAL, "isend to %s: %zu bytes of CUDA memory exceed the %llu-byte staging",
                   m->peer, size, (unsigned long long)st->ring.size);
  if (fit == 0) return 1; /* full until earlier sends complete */
  rc = tpx__gpu_memcpy(gpu, st->buf + sp.off, src, size);
  if (rc != 0)
    return tpx_err_quiet(rc, "isend to %s: copying %zu bytes from GPU %d: %s", m->peer, size, gpu,
                   tpx_last_error());
  tpx__ring_take(&st->ring, &sp);
  r->stage_end = sp.end;
  *out = st->buf + sp.off;
  return 0;
}

void tpx__sock_stage_release(tpx_sock_comm_t *m, tpx_sock_req_t *r) {
  /* Sends release in FIFO order (strict rules), so the ring frees in order. */
  if (m->stage) tpx__ring_release(&m->stage->ring, r->stage_end);
  r->stage_end = 0;
}

void tpx__sock_gpu_fini(tpx_sock_comm_t *m) {
  if (m->stage) {
    mem_free(m->stage->gpu, m->stage->buf);
    free(m->stage);
    m->stage = NULL;
  }
  for (int g = 0; g < 64; g++)
    if (m->gpus_held & (1ull << g)) (void)tpx__gpu_release(g);
  m->gpus_held = 0;
}
