/* Built-in transport, unpack mode (TPX_SOCK_UNPACK=1): the GPUDirect-TCPX
 * receive contract over loopback, with host receive buffers (CI has no GPU).
 *
 * What is checked: UNPACK v7 properties and the extra entry points; accept
 * fills the caller's device handle (NULL storage refused); every receive's
 * bytes arrive in scattered 4 KiB bounce pages described by the loadMeta
 * entries of slot k % 16, published by cnt[slot] (read with an acquire load
 * after test says done), and gathered with tpx__tcpx_unpack_cpu they equal the sent
 * bytes; the receive buffer itself is never written; slots wrap past 16
 * receives; 16 requests per comm (held receives count); irecvConsumed only in
 * FIFO order; a full pool stalls the transport (without spinning) instead of
 * overwriting held pages, and consuming lets it go on; rc 2 at peer close;
 * more than 8 MiB per request refused; truncation; no fd or memory leaks. */
#define _GNU_SOURCE
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>

#include "cuda/gpu.h"
#include "sock/sock.h"
#include "tcpx/contract.h"
#include "tcpx/plugin_env.h"
#include "test_sock_util.h"
#include "tpx/tcpx.h"

#define PAGE 4096u
#define MAXMSG TPX_SOCK_UNPACK_MAX_MSG

/* ---- helpers ---------------------------------------------------------------------------- */

static tpx_net_t *up_open(int nsocks, int nthreads, size_t bounce) {
  tpx_config_t cfg;
  ts_cfg(&cfg, 0, nsocks, nthreads);
  cfg.sock_unpack = 1;
  if (bounce) cfg.sock_bounce_bytes = bounce;
  tpx_net_t *net = ts_open_cfg(&cfg);
  /* These tests read the metadata of receives posted with host buffers,
   * which the plugin (and the emulation, on a GPU host) would stall:
   * test_host_recv_stalls covers that. */
  ((tpx_sock_net_t *)net->impl)->host_recv_stalls = 0;
  return net;
}

typedef struct up_link {
  tpx_net_t *net;
  void *s, *r;
  tpx_net_dev_handle_t *dev; /* the caller-owned storage accept filled */
  tpx_unpack_dev_handle_t *dh;
  tpx_unpack_meta_block_t *meta;
  unsigned char *bounce;
  size_t bounce_bytes;
  uint64_t nrecv; /* receives posted: the k-th uses slot k % 16 */
} up_link_t;

/* listen / connect / accept (device-handle storage passed on every retry). */
static void up_pair(up_link_t *l, tpx_net_t *net, size_t bounce_bytes) {
  memset(l, 0, sizeof(*l));
  l->net = net;
  l->dev = aligned_alloc(16, sizeof(*l->dev));
  assert_non_null(l->dev);
  memset(l->dev, 0, sizeof(*l->dev));
  memset(l->dev->spare, 0x5a, sizeof(l->dev->spare));
  unsigned char handle[TPX_NET_HANDLE_BYTES];
  void *lc = NULL;
  assert_int_equal(net->ops->listen(net, 0, handle, &lc), 0);
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  while ((l->s == NULL || l->r == NULL) && tpx__now_ns() < end) {
    if (l->s == NULL) assert_int_equal(net->ops->connect(net, 0, handle, &l->s, NULL), 0);
    if (l->r == NULL) assert_int_equal(net->ops->accept(net, lc, &l->r, l->dev), 0);
  }
  assert_non_null(l->s);
  assert_non_null(l->r);
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  /* The device handle: ncclNetDeviceHandle_v7 fields, spare bytes untouched. */
  assert_int_equal(l->dev->type, TPX_NET_DEV_UNPACK);
  assert_int_equal(l->dev->version, TPX_NET_UNPACK_VERSION);
  assert_int_equal(l->dev->size, sizeof(tpx_unpack_dev_handle_t));
  assert_int_equal(l->dev->needs_proxy_progress, 1);
  for (size_t i = 0; i < sizeof(l->dev->spare); i++)
    assert_int_equal(l->dev->spare[i], 0x5a);
  assert_non_null(l->dev->handle);
  /* Host memory (no GPU) or pinned mapped memory (UVA: the same address on
   * both sides): readable here either way. */
  l->dh = l->dev->handle;
  assert_non_null(l->dh->meta);
  assert_non_null(l->dh->bounce_buf);
  assert_int_equal(l->dh->head, UINT64_MAX); /* as the plugin: NCCL's kernels pre-increment it */
  assert_int_equal((uintptr_t)l->dh->bounce_buf % PAGE, 0);
  assert_int_equal((uintptr_t)l->dh->meta % 16, 0);
  l->meta = l->dh->meta;
  l->bounce = l->dh->bounce_buf;
  l->bounce_bytes = bounce_bytes;
  for (int s = 0; s < TPX_UNPACK_SLOTS; s++)
    assert_int_equal(__atomic_load_n(&l->meta->cnt[s], __ATOMIC_ACQUIRE), 0);
}

static void up_close(up_link_t *l) {
  assert_int_equal(l->net->ops->close_send(l->net, l->s), 0);
  assert_int_equal(l->net->ops->close_recv(l->net, l->r), 0);
  free(l->dev);
}

static void *up_post_recv(up_link_t *l, void *buf, size_t cap) {
  void *d[1] = {buf}, *req = (void *)0x1;
  size_t n[1] = {cap};
  int tags[1] = {7};
  assert_int_equal(l->net->ops->irecv(l->net, l->r, 1, d, n, tags, NULL, &req), 0);
  assert_non_null(req);
  l->nrecv++;
  return req;
}

static void *up_post_send(up_link_t *l, const void *buf, size_t size) {
  void *req = NULL;
  int rc = l->net->ops->isend(l->net, l->s, (void *)buf, size, 0, NULL, &req);
  if (rc != 0) fail_msg("isend %zu: %d %s", size, rc, tpx_last_error());
  assert_non_null(req);
  return req;
}

/* Poll the head receive until done (rc 0); sizes must stay untouched. */
static void up_wait_recv(up_link_t *l, void *req) {
  size_t sz = 4242;
  int rc = ts_wait(l->net, req, &sz);
  if (rc != 0) fail_msg("test: %d %s", rc, tpx_last_error());
  assert_int_equal(sz, 4242);
}

static uint32_t pages_of(size_t n) {
  return (uint32_t)((n + PAGE - 1) / PAGE);
}

/* After test said done for receive `seq` of `size` bytes posted with
 * capacity `cap`: read the slot (cnt with an acquire load), check every entry,
 * check that the receive buffer `rbuf` (filled with 0xEE before posting) was
 * not written, gather into `out` with the CPU and compare with the sent
 * bytes (pattern `seed` at offset `off`). Returns the entry count. */
static uint32_t up_check_slot(up_link_t *l, uint64_t seq, size_t size, size_t cap,
                              const unsigned char *rbuf, unsigned char *out, uint32_t seed,
                              size_t off) {
  int s = (int)(seq % TPX_UNPACK_SLOTS);
  uint64_t cnt = __atomic_load_n(&l->meta->cnt[s], __ATOMIC_ACQUIRE);
  size_t kept = size < cap ? size : cap;
  assert_int_equal(cnt, pages_of(kept));
  assert_true(cnt <= TPX_UNPACK_MAX_FRAGS);
  const tpx_unpack_meta_t *e = l->meta->mem[s];
  uint64_t total = 0;
  int scattered = 0;
  for (uint64_t i = 0; i < cnt; i++) {
    assert_int_equal(e[i].src_off % PAGE, 0); /* whole pages of the pool */
    assert_true(e[i].len > 0 && e[i].len <= PAGE);
    assert_true((uint64_t)e[i].src_off + e[i].len <= l->bounce_bytes);
    assert_true(e[i].dst_off + e[i].len <= kept);
    assert_int_equal(e[i].dst_off, total); /* in order, no gap, no overlap */
    if (i > 0 && e[i].src_off != e[i - 1].src_off + PAGE) scattered = 1;
    total += e[i].len;
  }
  assert_int_equal(total, kept);
  if (cnt >= 3) assert_true(scattered); /* not one contiguous run */
  if (rbuf) {
    static unsigned char ee[65536];
    if (ee[0] != 0xEE) memset(ee, 0xEE, sizeof(ee));
    for (size_t i = 0; i < cap; i += sizeof(ee)) {
      size_t n = cap - i < sizeof(ee) ? cap - i : sizeof(ee);
      if (memcmp(rbuf + i, ee, n) != 0)
        fail_msg("receive buffer written near byte %zu (unpack mode never writes it)", i);
    }
  }
  memset(out, 0, kept ? kept : 1);
  assert_int_equal(tpx__tcpx_unpack_cpu(out, cap, l->bounce, l->bounce_bytes, e, (uint32_t)cnt), 0);
  size_t bad = tu_check(out, kept, seed, off);
  if (bad != SIZE_MAX)
    fail_msg("message %llu: byte %zu of %zu differs", (unsigned long long)seq, bad, kept);
  return (uint32_t)cnt;
}

static void up_consume(up_link_t *l, void *req) {
  int rc = l->net->ops->irecv_consumed(l->net, l->r, 1, req);
  if (rc != 0) fail_msg("irecvConsumed: %d %s", rc, tpx_last_error());
}

static tpx_sock_upk_t *up_state(up_link_t *l) {
  tpx_sock_net_t *sn = l->net->impl;
  tpx_sock_comm_t *m = tpx__sock_reg_get(&sn->reg, (uint64_t)(uintptr_t)l->r, TPX_SK_RECV, NULL);
  assert_non_null(m);
  assert_non_null(m->upk);
  return m->upk;
}

/* ---- properties, entry points, device handle -------------------------------------------- */

static void test_props(void **state) {
  (void)state;
  tpx_net_t *net = up_open(2, 2, 0);
  assert_non_null(net->ops->irecv_consumed);
  assert_non_null(net->ops->get_device_mr);
  tpx_net_props_t p;
  assert_int_equal(net->ops->get_properties(net, 0, &p), 0);
  assert_int_equal(p.dev_type, TPX_NET_DEV_UNPACK);
  assert_int_equal(p.dev_version, TPX_NET_UNPACK_VERSION);
  assert_int_equal(p.max_recvs, 1);
  assert_int_equal(p.max_p2p_bytes, MAXMSG);
  int ngpu = 0;
  int gpu = tpx__gpu_device_count(&ngpu) == 0 && ngpu > 0;
  assert_int_equal(p.ptr_support, gpu ? (TPX_PTR_HOST | TPX_PTR_CUDA) : TPX_PTR_HOST);
  net->ops->destroy(net);

  /* HOST mode is untouched: no extra entry points, HOST device. */
  net = ts_open(0, 2, 2);
  assert_null(net->ops->irecv_consumed);
  assert_null(net->ops->get_device_mr);
  assert_int_equal(net->ops->get_properties(net, 0, &p), 0);
  assert_int_equal(p.dev_type, TPX_NET_DEV_HOST);
  net->ops->destroy(net);

  /* A pool that cannot hold one 8 MiB request is refused up front. */
  tpx_config_t cfg;
  ts_cfg(&cfg, 0, 2, 2);
  cfg.sock_unpack = 1;
  cfg.sock_bounce_bytes = 4u << 20;
  tpx_net_t *bad = (tpx_net_t *)0x1;
  assert_int_equal(tpx_net_open_builtin(&cfg, &bad), TPX_EINVAL);
  assert_null(bad);
}

static void test_accept_needs_storage(void **state) {
  (void)state;
  tpx_net_t *net = up_open(2, 2, 0);
  unsigned char handle[TPX_NET_HANDLE_BYTES];
  void *lc = NULL, *s = NULL, *r = NULL;
  assert_int_equal(net->ops->listen(net, 0, handle, &lc), 0);
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  while (s == NULL && tpx__now_ns() < end)
    assert_int_equal(net->ops->connect(net, 0, handle, &s, NULL), 0);
  assert_non_null(s);
  /* The TCPX plugin crashed without storage; we refuse, and nothing is lost. */
  assert_int_equal(net->ops->accept(net, lc, &r, NULL), TPX_EINVAL);
  assert_null(r);
  assert_non_null(strstr(tpx_last_error(), "device-handle"));
  tpx_net_dev_handle_t *dev = aligned_alloc(16, sizeof(*dev));
  memset(dev, 0, sizeof(*dev));
  while (r == NULL && tpx__now_ns() < end)
    assert_int_equal(net->ops->accept(net, lc, &r, dev), 0);
  assert_non_null(r);
  assert_int_equal(dev->type, TPX_NET_DEV_UNPACK);
  assert_non_null(dev->handle);
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  assert_int_equal(net->ops->close_send(net, s), 0);
  assert_int_equal(net->ops->close_recv(net, r), 0);
  free(dev);
  net->ops->destroy(net);
}

static void test_regmr_device_mr(void **state) {
  (void)state;
  tpx_net_t *net = up_open(2, 2, 0);
  up_link_t l;
  up_pair(&l, net, 64u << 20);
  static char buf[8192] __attribute__((aligned(4096)));
  void *mh = NULL, *dmh = NULL;
  assert_int_equal(net->ops->reg_mr(net, l.r, buf, sizeof(buf), TPX_PTR_HOST, &mh), 0);
  assert_int_equal(net->ops->get_device_mr(net, l.r, mh, &dmh), 0);
  assert_ptr_equal(dmh, mh);
  assert_int_equal(net->ops->get_device_mr(net, l.s, mh, &dmh), 0);
  assert_int_equal(net->ops->get_device_mr(net, l.r, mh, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->get_device_mr(net, l.r, (void *)0x1234, &dmh), TPX_EINVAL);
  assert_null(dmh);
  assert_int_equal(net->ops->get_device_mr(net, NULL, mh, &dmh), TPX_EINVAL);
  int ngpu = 0;
  if (!(tpx__gpu_device_count(&ngpu) == 0 && ngpu > 0)) {
    /* No GPU: HOST only, CUDA refused as unsupported. */
    void *cm = (void *)0x1;
    assert_int_equal(net->ops->reg_mr(net, l.r, buf, sizeof(buf), TPX_PTR_CUDA, &cm), TPX_ENOTSUP);
    assert_null(cm);
  } else {
    /* GPU: host memory registered as CUDA, and misaligned CUDA memory, refused. */
    void *cm = NULL, *d = NULL;
    assert_int_equal(net->ops->reg_mr(net, l.r, buf, sizeof(buf), TPX_PTR_CUDA, &cm), TPX_EINVAL);
    assert_int_equal(tpx__gpu_retain(0), 0);
    assert_int_equal(tpx__gpu_malloc(0, 1 << 20, &d), 0);
    assert_int_equal(net->ops->reg_mr(net, l.s, (char *)d + 512, 4096, TPX_PTR_CUDA, &cm),
                     TPX_EINVAL);
    assert_non_null(strstr(tpx_last_error(), "4 KiB"));
    assert_int_equal(net->ops->reg_mr(net, l.s, d, 1 << 20, TPX_PTR_CUDA, &cm), 0);
    assert_int_equal(net->ops->get_device_mr(net, l.s, cm, &dmh), 0);
    assert_ptr_equal(dmh, cm);
    assert_int_equal(net->ops->dereg_mr(net, l.s, cm), 0);
    assert_int_equal(tpx__gpu_free(0, d), 0);
    assert_int_equal(tpx__gpu_release(0), 0);
  }
  assert_int_equal(net->ops->reg_mr(net, l.r, buf, sizeof(buf), TPX_PTR_DMABUF, &dmh), TPX_ENOTSUP);
  assert_int_equal(net->ops->dereg_mr(net, l.r, mh), 0);
  up_close(&l);
  net->ops->destroy(net);
}

/* ---- the data path ------------------------------------------------------------------------ */

static size_t rnd_size(uint64_t *x) {
  *x ^= *x << 13, *x ^= *x >> 7, *x ^= *x << 17;
  uint64_t v = *x >> 8;
  switch (v % 4) {
  case 0: return (size_t)((v >> 4) % (TPX_SOCK_INLINE_MAX + 2)); /* inline, 0 included */
  case 1: return (size_t)((v >> 4) % (1u << 20)) | 1;            /* odd */
  case 2: return (size_t)((v >> 4) % MAXMSG) | 1;
  default: return MAXMSG - (size_t)((v >> 4) % 3); /* the 2048-page edge */
  }
}

#define WIN 4

/* Many messages of random (odd) sizes up to 8 MiB, WIN in flight, the
 * receives' bytes checked through the metadata only. */
static void test_random_messages(void **state) {
  (void)state;
  tpx_net_t *net = up_open(3, 4, 0);
  up_link_t l;
  up_pair(&l, net, 64u << 20);
  const uint32_t seed = 99;
  const size_t span = 2 * MAXMSG;
  unsigned char *src = malloc(span), *out = malloc(MAXMSG);
  unsigned char *rb[WIN];
  assert_non_null(src);
  assert_non_null(out);
  tu_fill(src, span, seed, 0);
  for (int i = 0; i < WIN; i++) {
    rb[i] = malloc(MAXMSG);
    assert_non_null(rb[i]);
    memset(rb[i], 0xEE, MAXMSG);
  }
  uint64_t x = 0x1234567;
  const int N = 48;
  size_t size[48], off[48];
  void *rq[48], *sq[48];
  int posted = 0;
  for (int k = 0; k < N; k++) {
    size[k] = rnd_size(&x);
    off[k] = (size_t)(x % (span - size[k] + 1));
  }
  size[1] = 0;
  size[2] = MAXMSG;
  off[2] = 0;
  for (int done = 0; done < N; done++) {
    while (posted < N && posted < done + WIN) {
      rq[posted] = up_post_recv(&l, rb[posted % WIN], MAXMSG);
      sq[posted] = up_post_send(&l, src + off[posted], size[posted]);
      posted++;
    }
    up_wait_recv(&l, rq[done]);
    assert_int_equal(ts_wait(net, sq[done], NULL), 0);
    up_check_slot(&l, (uint64_t)done, size[done], MAXMSG, rb[done % WIN], out, seed, off[done]);
    up_consume(&l, rq[done]);
    /* The slot's count is cleared once consumed. */
    assert_int_equal(__atomic_load_n(&l.meta->cnt[done % TPX_UNPACK_SLOTS], __ATOMIC_ACQUIRE), 0);
  }
  assert_int_equal(l.dh->head, UINT64_MAX); /* the consumer's field: never written after accept */
  up_close(&l);
  net->ops->destroy(net);
  for (int i = 0; i < WIN; i++)
    free(rb[i]);
  free(src);
  free(out);
}

/* 40 receives: slots wrap (k-th receive -> slot k % 16), 16 held at once. */
static void test_slot_wrap(void **state) {
  (void)state;
  tpx_net_t *net = up_open(2, 2, 0);
  up_link_t l;
  up_pair(&l, net, 64u << 20);
  const int N = 40;
  const size_t cap = 64 * 1024;
  unsigned char *src = malloc(N * cap), *out = malloc(cap);
  tu_fill(src, N * cap, 5, 0);
  void *rq[40], *sq[40];
  size_t sz[40];
  int head = 0;
  for (int k = 0; k < N; k++) {
    if (k - head == TPX_SOCK_STRICT_REQUESTS) {
      /* Window full of held receives: complete and consume the oldest. */
      up_check_slot(&l, (uint64_t)head, sz[head], cap, NULL, out, 5, (size_t)head * cap);
      up_consume(&l, rq[head]);
      head++;
    }
    sz[k] = 1000 + (size_t)k * 1531; /* 1000 .. 60709: inline and on data sockets */
    rq[k] = up_post_recv(&l, out /* never written */, cap);
    sq[k] = up_post_send(&l, src + (size_t)k * cap, sz[k]);
    up_wait_recv(&l, rq[k]);
    assert_int_equal(ts_wait(net, sq[k], NULL), 0);
    /* This receive's count is in slot k % 16, and only there changed. */
    assert_int_equal(__atomic_load_n(&l.meta->cnt[k % 16], __ATOMIC_ACQUIRE), pages_of(sz[k]));
  }
  for (; head < N; head++) {
    up_check_slot(&l, (uint64_t)head, sz[head], cap, NULL, out, 5, (size_t)head * cap);
    up_consume(&l, rq[head]);
  }
  for (int s = 0; s < 16; s++)
    assert_int_equal(__atomic_load_n(&l.meta->cnt[s], __ATOMIC_ACQUIRE), 0);
  up_close(&l);
  net->ops->destroy(net);
  free(src);
  free(out);
}

/* 16 requests per comm, held receives included; head-only test. */
static void test_request_limit(void **state) {
  (void)state;
  tpx_net_t *net = up_open(2, 2, 0);
  up_link_t l;
  up_pair(&l, net, 64u << 20);
  static unsigned char sb[17][100], rbuf[100], out[100];
  void *rq[17], *sq[17];
  for (int i = 0; i < 16; i++)
    rq[i] = up_post_recv(&l, rbuf, sizeof(rbuf));
  void *d[1] = {rbuf}, *extra = (void *)0x1;
  size_t n[1] = {sizeof(rbuf)};
  assert_int_equal(net->ops->irecv(net, l.r, 1, d, n, NULL, NULL, &extra), TPX_EINTERNAL);
  assert_null(extra);
  assert_non_null(strstr(tpx_last_error(), "unable to allocate requests"));
  for (int i = 0; i < 16; i++) {
    tu_fill(sb[i], sizeof(sb[i]), 300 + (uint32_t)i, 0);
    sq[i] = up_post_send(&l, sb[i], sizeof(sb[i]));
  }
  assert_int_equal(net->ops->isend(net, l.s, sb[16], 10, 0, NULL, &extra), TPX_EINTERNAL);
  int done = 7;
  assert_int_equal(net->ops->test(net, rq[1], &done, NULL), TPX_EINTERNAL); /* not the head */
  assert_non_null(strstr(tpx_last_error(), "not the oldest"));
  for (int i = 0; i < 16; i++) {
    up_wait_recv(&l, rq[i]);
    assert_int_equal(ts_wait(net, sq[i], NULL), 0);
  }
  /* All done but held: the 17th receive is still refused; a second test of a
   * held one is an error, not a second completion. */
  assert_int_equal(net->ops->irecv(net, l.r, 1, d, n, NULL, NULL, &extra), TPX_EINTERNAL);
  assert_int_equal(net->ops->test(net, rq[3], &done, NULL), TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "irecvConsumed"));
  for (int i = 0; i < 16; i++)
    up_check_slot(&l, (uint64_t)i, 100, sizeof(rbuf), NULL, out, 300 + (uint32_t)i, 0);
  up_consume(&l, rq[0]);
  rq[16] = up_post_recv(&l, rbuf, sizeof(rbuf)); /* one slot back */
  tu_fill(sb[16], 100, 316, 0);
  sq[16] = up_post_send(&l, sb[16], 100);
  for (int i = 1; i < 16; i++)
    up_consume(&l, rq[i]);
  up_wait_recv(&l, rq[16]);
  assert_int_equal(ts_wait(net, sq[16], NULL), 0);
  up_check_slot(&l, 16, 100, sizeof(rbuf), NULL, out, 316, 0);
  up_consume(&l, rq[16]);
  up_close(&l);
  net->ops->destroy(net);
}

/* irecvConsumed: FIFO only, once, on done receives of this comm. */
static void test_consume_fifo(void **state) {
  (void)state;
  tpx_net_t *net = up_open(2, 2, 0);
  up_link_t l;
  up_pair(&l, net, 64u << 20);
  static unsigned char sb[3][50000], rbuf[50000];
  void *rq[4], *sq[3];
  for (int i = 0; i < 3; i++) {
    rq[i] = up_post_recv(&l, rbuf, sizeof(rbuf));
    sq[i] = up_post_send(&l, sb[i], sizeof(sb[i]));
  }
  rq[3] = up_post_recv(&l, rbuf, sizeof(rbuf)); /* never matched */
  for (int i = 0; i < 3; i++) {
    up_wait_recv(&l, rq[i]);
    assert_int_equal(ts_wait(net, sq[i], NULL), 0);
  }
  const tpx_net_ops_t *o = net->ops;
  assert_int_equal(o->irecv_consumed(net, l.r, 1, rq[1]), TPX_EINTERNAL); /* out of order */
  assert_non_null(strstr(tpx_last_error(), "out of order"));
  assert_int_equal(o->irecv_consumed(net, l.r, 1, rq[3]), TPX_EINVAL); /* not done */
  assert_int_equal(o->irecv_consumed(net, l.r, 2, rq[0]), TPX_EINVAL); /* n != 1 */
  assert_int_equal(o->irecv_consumed(net, l.r, 1, NULL), TPX_EINVAL);
  assert_int_equal(o->irecv_consumed(net, l.r, 1, sq[0]), TPX_EINVAL); /* another comm's */
  assert_int_equal(o->irecv_consumed(net, l.s, 1, rq[0]), TPX_EINVAL); /* a send comm */
  assert_int_equal(o->irecv_consumed(net, NULL, 1, rq[0]), TPX_EINVAL);
  up_consume(&l, rq[0]);
  assert_int_equal(o->irecv_consumed(net, l.r, 1, rq[0]), TPX_EINVAL); /* twice */
  up_consume(&l, rq[1]);
  up_consume(&l, rq[2]);
  up_close(&l); /* rq[3] still in flight: closing frees it */
  net->ops->destroy(net);
}

static double cpu_seconds(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* An 8 MiB pool holds two 3 MiB messages: the third waits, without spinning
 * and without touching the held pages, until the first is consumed; then it
 * lands in pages the first gave back. */
static void test_pool_stall(void **state) {
  (void)state;
  const size_t pool = MAXMSG, sz = 3u << 20;
  tpx_net_t *net = up_open(2, 2, pool);
  up_link_t l;
  up_pair(&l, net, pool);
  unsigned char *src = malloc(3 * sz), *out = malloc(sz);
  tu_fill(src, 3 * sz, 11, 0);
  static unsigned char rbuf[1];
  void *rq[3], *sq[3];
  for (int i = 0; i < 3; i++)
    rq[i] = up_post_recv(&l, rbuf, sz);
  for (int i = 0; i < 3; i++)
    sq[i] = up_post_send(&l, src + (size_t)i * sz, sz);
  up_wait_recv(&l, rq[0]);
  /* Receive 0 is done; receive 1 needs no more than the pool has left. */
  int done = 0;
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  /* rq[1] is not the head until rq[0] is reported done (it is): poll it. */
  do
    assert_int_equal(net->ops->test(net, rq[1], &done, NULL), 0);
  while (!done && tpx__now_ns() < end);
  assert_int_equal(done, 1);
  /* Receive 2 needs 768 pages, 512 are free: it stalls. Give it time while
   * sleeping, so only the transport's threads could burn CPU. */
  tpx_sock_upk_t *u = up_state(&l);
  end = tpx__now_ns() + 5000000000ull;
  while (__atomic_load_n(&u->stalls, __ATOMIC_RELAXED) == 0 && tpx__now_ns() < end)
    usleep(1000);
  assert_true(__atomic_load_n(&u->stalls, __ATOMIC_RELAXED) > 0);
  double c0 = cpu_seconds();
  usleep(500 * 1000);
  double burnt = cpu_seconds() - c0;
  assert_int_equal(net->ops->test(net, rq[2], &done, NULL), 0);
  assert_int_equal(done, 0);
  if (burnt > 0.2)
    fail_msg("transport used %.3f s of CPU in 0.5 s while stalled (spinning?)", burnt);
  /* The held receives are intact. */
  uint32_t pg0[768];
  assert_int_equal(up_check_slot(&l, 0, sz, sz, NULL, out, 11, 0), 768);
  for (int i = 0; i < 768; i++)
    pg0[i] = l.meta->mem[0][i].src_off;
  assert_int_equal(up_check_slot(&l, 1, sz, sz, NULL, out, 11, sz), 768);
  up_consume(&l, rq[0]);
  up_wait_recv(&l, rq[2]);
  for (int i = 0; i < 3; i++)
    assert_int_equal(ts_wait(net, sq[i], NULL), 0);
  assert_int_equal(up_check_slot(&l, 2, sz, sz, NULL, out, 11, 2 * sz), 768);
  /* Message 2 takes the pages message 0 gave back (the most recently freed
   * first), never message 1's held pages. */
  int reused = 0;
  for (int i = 0; i < 768; i++) {
    uint32_t p = l.meta->mem[2][i].src_off;
    for (int j = 0; j < 768; j++) {
      if (p == pg0[j]) reused++;
      assert_int_not_equal(p, l.meta->mem[1][j].src_off);
    }
  }
  assert_int_equal(reused, 768);
  up_consume(&l, rq[1]);
  up_consume(&l, rq[2]);
  up_close(&l);
  net->ops->destroy(net);
  free(src);
  free(out);
}

/* White box: has the comm seen its peer close? */
static int peer_closed(tpx_net_t *net, void *comm) {
  tpx_sock_net_t *sn = net->impl;
  tpx_sock_comm_t *m = tpx__sock_reg_get(&sn->reg, (uint64_t)(uintptr_t)comm, TPX_SK_NONE, NULL);
  assert_non_null(m);
  return atomic_load(&m->peer_closed);
}

/* The sender closes right after its last send: rc 2 with done=1 and intact
 * bytes (still to be consumed); an unmatched receive: rc 2 / done 0, then a
 * real error, and it is not held. */
static void test_peer_close_rc2(void **state) {
  (void)state;
  tpx_net_t *net = up_open(3, 2, 0);
  up_link_t l;
  up_pair(&l, net, 64u << 20);
  const size_t sizes[3] = {100, 300001, (2u << 20) + 3};
  unsigned char *sb[3], *out = malloc(sizes[2]);
  void *sq[3], *rq[4];
  for (int i = 0; i < 3; i++) {
    sb[i] = malloc(sizes[i]);
    tu_fill(sb[i], sizes[i], 40 + (uint32_t)i, 0);
    sq[i] = up_post_send(&l, sb[i], sizes[i]);
  }
  for (int i = 0; i < 3; i++)
    assert_int_equal(ts_wait(net, sq[i], NULL), 0);
  assert_int_equal(net->ops->close_send(net, l.s), 0);
  uint64_t end = tpx__now_ns() + 10000000000ull;
  while (!peer_closed(net, l.r) && tpx__now_ns() < end)
    usleep(1000);
  assert_true(peer_closed(net, l.r));
  static unsigned char rbuf[1];
  for (int i = 0; i < 3; i++)
    rq[i] = up_post_recv(&l, rbuf, sizes[2]);
  rq[3] = up_post_recv(&l, rbuf, 16);
  for (int i = 0; i < 3; i++) {
    int done = 0, rc;
    size_t sz = 999;
    end = tpx__now_ns() + 10000000000ull;
    do
      rc = net->ops->test(net, rq[i], &done, &sz);
    while (rc == TPX_ESYSTEM && !done && tpx__now_ns() < end);
    assert_int_equal(rc, 0); /* the plugin never returns rc 2 with done 1 */
    assert_int_equal(done, 1);
    assert_int_equal(sz, 999);
    up_check_slot(&l, (uint64_t)i, sizes[i], sizes[2], NULL, out, 40 + (uint32_t)i, 0);
  }
  int done = 0; /* unmatched: rc 2 for good, as the plugin */
  for (int i = 0; i < 50; i++) {
    assert_int_equal(net->ops->test(net, rq[3], &done, NULL), TPX_ESYSTEM);
    assert_int_equal(done, 0);
    usleep(1000);
  }
  /* Done receives are consumed in order; the failed one is not held. */
  for (int i = 0; i < 3; i++)
    up_consume(&l, rq[i]);
  assert_int_equal(net->ops->irecv_consumed(net, l.r, 1, rq[3]), TPX_EINVAL);
  assert_int_equal(net->ops->close_recv(net, l.r), 0);
  free(l.dev);
  net->ops->destroy(net);
  for (int i = 0; i < 3; i++)
    free(sb[i]);
  free(out);
}

/* More than 2048 pages per request is refused; a send larger than the
 * receive is truncated to what fits (rc TPX_ETRUNC, done, held). */
static void test_limits_and_truncation(void **state) {
  (void)state;
  tpx_net_t *net = up_open(2, 2, 0);
  up_link_t l;
  up_pair(&l, net, 64u << 20);
  unsigned char *big = malloc(MAXMSG + 1), *out = malloc(100000);
  tu_fill(big, MAXMSG + 1, 8, 0);
  void *d[1] = {big}, *req = (void *)0x1;
  size_t n[1] = {MAXMSG + 1};
  assert_int_equal(net->ops->irecv(net, l.r, 1, d, n, NULL, NULL, &req), TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "2048 pages"));
  assert_int_equal(net->ops->isend(net, l.s, big, MAXMSG + 1, 0, NULL, &req), TPX_EINVAL);
  /* Truncation: 100000 bytes into 50000. */
  void *rq = up_post_recv(&l, out, 50000);
  void *sq = up_post_send(&l, big, 100000);
  int done = 0;
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  int rc;
  do
    rc = net->ops->test(net, rq, &done, NULL);
  while (rc == 0 && !done && tpx__now_ns() < end);
  assert_int_equal(rc, TPX_ETRUNC);
  assert_int_equal(done, 1);
  assert_int_equal(ts_wait(net, sq, NULL), 0);
  unsigned char *g = malloc(50000);
  assert_int_equal(up_check_slot(&l, 0, 100000, 50000, NULL, g, 8, 0), pages_of(50000));
  up_consume(&l, rq);
  /* The comm goes on: an exact 8 MiB message (2048 entries). */
  rq = up_post_recv(&l, out, MAXMSG);
  sq = up_post_send(&l, big + 1, MAXMSG);
  up_wait_recv(&l, rq);
  assert_int_equal(ts_wait(net, sq, NULL), 0);
  unsigned char *g2 = malloc(MAXMSG);
  assert_int_equal(up_check_slot(&l, 1, MAXMSG, MAXMSG, NULL, g2, 8, 1), TPX_UNPACK_MAX_FRAGS);
  up_consume(&l, rq);
  up_close(&l);
  net->ops->destroy(net);
  free(big);
  free(out);
  free(g);
  free(g2);
}

/* Two recv comms in one net: separate pools, each its own slots. */
/* As the TCPX plugin (net_tcpx.cc, taskProgress: a plain recv() into a host
 * buffer on the devmem socket fails, and persistentSocketThread returns on
 * the error): a receive into host memory on an UNPACK comm taking CUDA
 * pointers never completes, nor does anything after it on that comm. The
 * emulation does so whenever a GPU is usable; forced here. */
static void test_host_recv_stalls(void **state) {
  (void)state;
  tpx_net_t *net = up_open(1, 1, 0);
  ((tpx_sock_net_t *)net->impl)->host_recv_stalls = 1;
  up_link_t l;
  up_pair(&l, net, 0);
  static unsigned char in[8192], out[8192];
  tu_fill(out, sizeof(out), 3, 0);
  void *rq = up_post_recv(&l, in, sizeof(in));
  void *rq2 = up_post_recv(&l, in, sizeof(in));
  void *sq = up_post_send(&l, out, sizeof(out));
  void *sq2 = up_post_send(&l, out, sizeof(out));
  assert_int_equal(ts_wait(net, sq, NULL), 0); /* the bytes left: the sender is done */
  assert_int_equal(ts_wait(net, sq2, NULL), 0);
  /* The receive stays "not done" however long it is polled (bounded here). */
  for (int i = 0; i < 200; i++) {
    int done = 1;
    assert_int_equal(net->ops->test(net, rq, &done, NULL), 0);
    assert_int_equal(done, 0);
    usleep(1000);
  }
  (void)rq2;
  up_close(&l);
  net->ops->destroy(net);
}

/* NCCL_DYNAMIC_CHUNK_SIZE=0 (what the plugin reads when the variable is
 * unset): 0-byte pieces, the send never finishes, nor does its receive or
 * anything after it. A value the user set is never replaced (only warned
 * about). */
static void test_zero_chunk_stalls(void **state) {
  (void)state;
  char *saved =
      getenv("NCCL_DYNAMIC_CHUNK_SIZE") ? strdup(getenv("NCCL_DYNAMIC_CHUNK_SIZE")) : NULL;
  setenv("NCCL_DYNAMIC_CHUNK_SIZE", "0", 1);
  tpx_net_t *net = up_open(1, 1, 0);
  assert_string_equal(getenv("NCCL_DYNAMIC_CHUNK_SIZE"), "0");
  up_link_t l;
  up_pair(&l, net, 0);
  static unsigned char in[8192], out[8192];
  void *rq0 = up_post_recv(&l, in, sizeof(in));
  void *sq0 = up_post_send(&l, out, 0); /* 0 bytes: inline in the plugin, completes */
  assert_int_equal(ts_wait(net, sq0, NULL), 0);
  up_wait_recv(&l, rq0);
  up_consume(&l, rq0);
  void *rq = up_post_recv(&l, in, sizeof(in));
  void *sq = up_post_send(&l, out, sizeof(out));
  for (int i = 0; i < 200; i++) {
    int done = 1;
    assert_int_equal(net->ops->test(net, sq, &done, NULL), 0);
    assert_int_equal(done, 0);
    usleep(1000);
  }
  int done = 1;
  assert_int_equal(net->ops->test(net, rq, &done, NULL), 0);
  assert_int_equal(done, 0);
  up_close(&l);
  net->ops->destroy(net);
  if (saved)
    setenv("NCCL_DYNAMIC_CHUNK_SIZE", saved, 1);
  else
    unsetenv("NCCL_DYNAMIC_CHUNK_SIZE");
  free(saved);
}

/* Unset, the safe values are filled in when the emulation opens (as the
 * engine's loader does before a GPUDirect-TCPX plugin's init), and data flows. */
static void test_env_filled_in(void **state) {
  (void)state;
  unsetenv("NCCL_DYNAMIC_CHUNK_SIZE");
  unsetenv("NCCL_GPUDIRECTTCPX_RECV_SYNC");
  unsetenv("NCCL_MIN_ZCOPY_SIZE");
  tpx_net_t *net = up_open(1, 1, 0);
  assert_string_equal(getenv("NCCL_DYNAMIC_CHUNK_SIZE"), "524288");
  assert_string_equal(getenv("NCCL_GPUDIRECTTCPX_RECV_SYNC"), "1");
  assert_string_equal(getenv("NCCL_MIN_ZCOPY_SIZE"), "4096");
  tpx_net_env_t row;
  int i = 0;
  for (; tpx_net_tcpx_env(i, &row) == 0; i++) {
    assert_true(row.set_by_us);
    assert_null(row.danger);
  }
  assert_int_equal(i, 3);
  assert_true(tpx_net_is_tcpx(net));
  up_link_t l;
  up_pair(&l, net, 0);
  static unsigned char in[65536], out[65536];
  tu_fill(out, sizeof(out), 9, 0);
  void *rq = up_post_recv(&l, in, sizeof(in));
  void *sq = up_post_send(&l, out, sizeof(out));
  assert_int_equal(ts_wait(net, sq, NULL), 0);
  up_wait_recv(&l, rq);
  up_consume(&l, rq);
  up_close(&l);
  net->ops->destroy(net);
}

static void test_two_comms(void **state) {
  (void)state;
  tpx_net_t *net = up_open(2, 2, 0);
  up_link_t a, b;
  up_pair(&a, net, 64u << 20);
  up_pair(&b, net, 64u << 20);
  assert_ptr_not_equal(a.bounce, b.bounce);
  assert_ptr_not_equal(a.meta, b.meta);
  unsigned char *src = malloc(1 << 20), *out = malloc(1 << 20);
  tu_fill(src, 1 << 20, 77, 0);
  for (int k = 0; k < 20; k++) {
    up_link_t *l = (k % 3) ? &a : &b;
    size_t sz = 5000 + (size_t)k * 40000;
    void *rq = up_post_recv(l, out, 1 << 20);
    void *sq = up_post_send(l, src, sz);
    up_wait_recv(l, rq);
    assert_int_equal(ts_wait(net, sq, NULL), 0);
    up_check_slot(l, l->nrecv - 1, sz, 1 << 20, NULL, out, 77, 0);
    up_consume(l, rq);
  }
  up_close(&a);
  up_close(&b);
  net->ops->destroy(net);
  free(src);
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_props, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_accept_needs_storage, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_regmr_device_mr, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_random_messages, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_slot_wrap, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_request_limit, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_consume_fifo, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_pool_stall, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_peer_close_rc2, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_limits_and_truncation, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_two_comms, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_host_recv_stalls, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_zero_chunk_stalls, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_env_filled_in, tu_fd_setup, tu_fd_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
