/* Receives straight into GPU memory on a transport that takes CUDA pointers
 * (GPUDirect RDMA plugins, such as NCCL's InfiniBand one): the engine must
 * iflush each such receive once it completed and count the chunk landed only
 * when the flush request tests done.
 *
 * The transport here is the built-in one wrapped to claim CUDA pointer
 * support. A receive into GPU memory lands in a host bounce buffer, and its
 * bytes reach the GPU only when the flush request issued for it tests done
 * (on its second test). An engine that skips iflush, or reports a transfer
 * before its flushes finished, leaves poison in the destination.
 *
 *   test_engine_flush        exit 0: passed; 1: failed; 77: no GPU
 *
 * Plain C (gpu_check.h); one process, two endpoints over 127.0.0.1. */
#define _GNU_SOURCE
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/error.h"
#include "cuda/gpu.h"
#include "gpu_check.h"
#include "net/caps.h"
#include "tpx/net.h"
#include "tpx/tpx.h"

#define DEV 0
#define POISON 0xEE

/* ---- the wrapped transport ---- */
enum { WR_RECV = 1, WR_FLUSH = 2 };

struct wreq {
  int kind;
  void *in_req;  /* WR_RECV: the built-in transport's request */
  void *dst;     /* GPU destination */
  void *bounce;  /* host bytes waiting for their flush (NULL: host receive) */
  size_t size;   /* posted size */
  size_t got;    /* received size */
  int tests;     /* WR_FLUSH: tests so far */
  struct wreq *next;
};

struct wnet {
  tpx_net_t pub;
  tpx_net_t *in;
  pthread_mutex_t mu;
  struct wreq *landed; /* GPU receives complete in the transport, not flushed yet */
  int flushes, flush_tests, gpu_recvs;
  tpx_gpu_stream_t *st; /* the flush's copies: done means in GPU memory (a cudaMemcpy from pageable
                           memory may return before its DMA lands) */
};

static char cuda_mh; /* the memory handle of every CUDA registration */

static struct wnet *W(tpx_net_t *n) { return n->impl; }

static int w_devices(tpx_net_t *n, int *nd) { return W(n)->in->ops->devices(W(n)->in, nd); }

static int w_props(tpx_net_t *n, int dev, tpx_net_props_t *p) {
  int rc = W(n)->in->ops->get_properties(W(n)->in, dev, p);
  if (rc == 0) p->ptr_support |= TPX_PTR_CUDA;
  return rc;
}

static int w_listen(tpx_net_t *n, int dev, void *h, void **lc) { return W(n)->in->ops->listen(W(n)->in, dev, h, lc); }

static int w_connect(tpx_net_t *n, int dev, void *h, void **sc, tpx_net_dev_handle_t *dh) {
  return W(n)->in->ops->connect(W(n)->in, dev, h, sc, dh);
}

static int w_accept(tpx_net_t *n, void *lc, void **rc, tpx_net_dev_handle_t *dh) {
  return W(n)->in->ops->accept(W(n)->in, lc, rc, dh);
}

static int w_reg(tpx_net_t *n, void *comm, void *data, size_t size, int type, void **mh) {
  if (type == TPX_PTR_CUDA) {
    *mh = &cuda_mh;
    return 0;
  }
  return W(n)->in->ops->reg_mr(W(n)->in, comm, data, size, type, mh);
}

static int w_dereg(tpx_net_t *n, void *comm, void *mh) {
  return mh == &cuda_mh ? 0 : W(n)->in->ops->dereg_mr(W(n)->in, comm, mh);
}

static int w_isend(tpx_net_t *n, void *sc, void *data, size_t size, int tag, void *mh, void **req) {
  if (mh == &cuda_mh) return tpx_err_quiet(TPX_EINTERNAL, "this test transport sends host memory only");
  return W(n)->in->ops->isend(W(n)->in, sc, data, size, tag, mh, req);
}

static int w_irecv(tpx_net_t *n, void *rcomm, int k, void **data, size_t *sizes, int *tags, void **mhs,
                   void **req) {
  *req = NULL;
  struct wreq *r = calloc(1, sizeof(*r));
  if (!r) return TPX_ENOMEM;
  r->kind = WR_RECV;
  void *buf = data[0], *mh = mhs ? mhs[0] : NULL;
  if (mh == &cuda_mh) {
    r->dst = data[0];
    r->size = sizes[0];
    r->bounce = malloc(sizes[0] ? sizes[0] : 1);
    if (!r->bounce) {
      free(r);
      return TPX_ENOMEM;
    }
    buf = r->bounce;
    mh = NULL;
  }
  void *in_req = NULL;
  int rc = W(n)->in->ops->irecv(W(n)->in, rcomm, k, &buf, sizes, tags, &mh, &in_req);
  if (rc || !in_req) {
    free(r->bounce);
    free(r);
    return rc;
  }
  r->in_req = in_req;
  *req = r;
  return 0;
}

static int w_iflush(tpx_net_t *n, void *rcomm, int k, void **data, size_t *sizes, void **mhs, void **req) {
  (void)rcomm;
  (void)k;
  (void)mhs;
  struct wnet *w = W(n);
  *req = NULL;
  pthread_mutex_lock(&w->mu);
  w->flushes++;
  struct wreq **pp = &w->landed;
  while (*pp && !((*pp)->dst == data[0] && (*pp)->size == sizes[0])) pp = &(*pp)->next;
  struct wreq *r = *pp;
  if (r) *pp = r->next;
  pthread_mutex_unlock(&w->mu);
  if (!r) return tpx_err_quiet(TPX_EINTERNAL, "iflush of %p + %zu: no completed GPU receive there", data[0], sizes[0]);
  r->kind = WR_FLUSH;
  r->tests = 0;
  *req = r;
  return 0;
}

static int w_test(tpx_net_t *n, void *req, int *done, size_t *sizes) {
  struct wnet *w = W(n);
  struct wreq *r = req;
  *done = 0;
  if (r->kind == WR_RECV) {
    size_t got = 0;
    int rc = w->in->ops->test(w->in, r->in_req, done, &got);
    if (rc || !*done) return rc;
    if (sizes) *sizes = got;
    r->got = got;
    if (!r->bounce) {
      free(r);
      return 0;
    }
    pthread_mutex_lock(&w->mu); /* the bytes wait in the bounce buffer for their flush */
    w->gpu_recvs++;
    r->next = w->landed;
    w->landed = r;
    pthread_mutex_unlock(&w->mu);
    return 0;
  }
  pthread_mutex_lock(&w->mu);
  w->flush_tests++;
  pthread_mutex_unlock(&w->mu);
  if (++r->tests < 2) return 0;
  int rc = w->st ? 0 : tpx__gpu_stream_create(DEV, &w->st);
  if (rc == 0) rc = tpx__gpu_memcpy_async(w->st, r->dst, r->bounce, r->got);
  if (rc == 0) rc = tpx__gpu_stream_sync(w->st);
  free(r->bounce);
  free(r);
  *done = rc == 0;
  return rc;
}

static int w_close_send(tpx_net_t *n, void *c) { return W(n)->in->ops->close_send(W(n)->in, c); }
static int w_close_recv(tpx_net_t *n, void *c) { return W(n)->in->ops->close_recv(W(n)->in, c); }
static int w_close_listen(tpx_net_t *n, void *c) { return W(n)->in->ops->close_listen(W(n)->in, c); }

static void w_destroy(tpx_net_t *n) {
  struct wnet *w = W(n);
  while (w->landed) {
    struct wreq *r = w->landed;
    w->landed = r->next;
    free(r->bounce);
    free(r);
  }
  tpx__gpu_stream_destroy(w->st);
  tpx_net_close(w->in);
  pthread_mutex_destroy(&w->mu);
  free(w);
}

static const tpx_net_ops_t wops = {
    .devices = w_devices,
    .get_properties = w_props,
    .listen = w_listen,
    .connect = w_connect,
    .accept = w_accept,
    .reg_mr = w_reg,
    .dereg_mr = w_dereg,
    .isend = w_isend,
    .irecv = w_irecv,
    .iflush = w_iflush,
    .test = w_test,
    .close_send = w_close_send,
    .close_recv = w_close_recv,
    .close_listen = w_close_listen,
    .destroy = w_destroy,
};

static struct wnet *wnet_open(const tpx_config_t *cfg) {
  struct wnet *w = calloc(1, sizeof(*w));
  if (!w) exit(1);
  MUST(tpx_net_open_builtin(cfg, &w->in));
  pthread_mutex_init(&w->mu, NULL);
  w->pub.ops = &wops;
  snprintf(w->pub.name, sizeof(w->pub.name), "gdr-sim");
  w->pub.abi_version = 9; /* a plugin, as far as the engine can tell */
  w->pub.impl = w;
  MUST(tpx__net_caps_init(&w->pub, 0, 0)); /* from its own properties: CUDA pointers, iflush */
  return w;
}

/* ---- the test ---- */
static uint8_t pat(size_t i, unsigned seed) { return (uint8_t)(i * 131u + seed * 7u + (i >> 12)); }

/* dst [0, area) holds pattern seed in [off, off + len) and poison elsewhere. */
static int check_gpu(const uint8_t *d, size_t area, size_t off, size_t len, unsigned seed, const char *what) {
  uint8_t *h = malloc(area);
  if (!h) exit(1);
  MUST(tpx__gpu_memcpy(DEV, h, d, area));
  int bad = 0;
  for (size_t i = 0; i < area && !bad; i++) {
    uint8_t want = i >= off && i < off + len ? pat(i - off, seed) : POISON;
    if (h[i] != want) {
      fprintf(stderr, "  %s: byte %zu is 0x%02x, want 0x%02x\n", what, i, h[i], want);
      bad = 1;
    }
  }
  free(h);
  return bad;
}

static void run(size_t chunk) {
  tpx_config_t cfg;
  MUST(tpx_config_from_env(&cfg));
  cfg.chunk_bytes = chunk;
  cfg.num_channels = 2;
  struct wnet *w = wnet_open(&cfg);
  tpx_net_t *plain;
  MUST(tpx_net_open_builtin(&cfg, &plain));
  tpx_endpoint_params_t pa, pb;
  tpx_endpoint_params_init(&pa);
  tpx_endpoint_params_init(&pb);
  pa.cfg = pb.cfg = &cfg;
  pa.name = "host-sender";
  pa.net = plain;
  pa.no_listen = 1;
  pb.name = "gpu-receiver";
  pb.net = &w->pub;
  pb.port = TPX_PORT_EPHEMERAL;
  pb.listen_host = "127.0.0.1";
  pb.gpu = DEV;
  tpx_endpoint_t *a, *b;
  MUST(tpx_endpoint_create(&pa, &a));
  MUST(tpx_endpoint_create(&pb, &b));
  tpx_peer_t *ab = NULL, *ba = NULL;
  MUST(tpx_connect(a, "127.0.0.1", tpx_endpoint_port(b), &ab));
  MUST(tpx_accept(b, 10000, &ba));

  const size_t area = 8u << 20;
  uint8_t *src = aligned_alloc(4096, area);
  void *dst = NULL;
  if (!src) exit(1);
  MUST(tpx__gpu_retain(DEV)); /* ours, for the buffer; released after it is freed */
  MUST(tpx__gpu_malloc(DEV, area, &dst));
  MUST(tpx__gpu_memset(DEV, dst, POISON, area));
  tpx_mem_desc_t ds = {src, area, TPX_MEM_HOST, 0, 0};
  tpx_mem_desc_t dd = {dst, area, TPX_MEM_CUDA, DEV, TPX_ACCESS_WRITE};
  tpx_mem_t *ms, *md;
  MUST(tpx_mem_register(a, &ds, &ms));
  MUST(tpx_mem_register(b, &dd, &md));
  uint8_t blob[TPX_MD_MAX];
  size_t bl;
  MUST(tpx_mem_get_public_data(md, blob, sizeof(blob), &bl));
  tpx_rmem_t *rm;
  MUST(tpx_load_remote_md(blob, bl, &rm));

  /* one-sided write, then a two-sided send, each into the GPU buffer */
  size_t off = 4096 * 3, len = area - off - 12345;
  for (size_t i = 0; i < len; i++) src[i] = pat(i, 1);
  tpx_xfer_t *x;
  MUST(tpx_write(ab, ms, 0, rm, off, len, "w", 1, &x));
  MUST(tpx_xfer_wait(x, 30000));
  tpx_xfer_free(x);
  CHECK(check_gpu(dst, area, off, len, 1, "write") == 0, "chunk %zu: write landed only partly", chunk);

  MUST(tpx__gpu_memset(DEV, dst, POISON, area));
  len = area / 2 + 777;
  for (size_t i = 0; i < len; i++) src[i] = pat(i, 2);
  tpx_xfer_t *r, *s;
  MUST(tpx_recv(ba, md, 0, area, 5, &r));
  MUST(tpx_send(ab, ms, 0, len, 5, &s));
  MUST(tpx_xfer_wait(s, 30000));
  MUST(tpx_xfer_wait(r, 30000));
  CHECK(tpx_xfer_received(r) == len, "received %zu of %zu", tpx_xfer_received(r), len);
  tpx_xfer_free(s);
  tpx_xfer_free(r);
  CHECK(check_gpu(dst, area, 0, len, 2, "send") == 0, "chunk %zu: send landed only partly", chunk);

  pthread_mutex_lock(&w->mu);
  int recvs = w->gpu_recvs, flushes = w->flushes, tests = w->flush_tests, left = w->landed != NULL;
  pthread_mutex_unlock(&w->mu);
  printf("chunk %zu: %d GPU receives, %d flushes, %d flush tests\n", chunk, recvs, flushes, tests);
  CHECK(recvs > 0 && flushes == recvs, "one flush per GPU receive (%d receives, %d flushes)", recvs, flushes);
  CHECK(tests >= 2 * flushes, "every flush tested until done (%d tests for %d flushes)", tests, flushes);
  CHECK(!left, "receives left unflushed");

  tpx_rmem_free(rm);
  tpx_peer_close(ab);
  tpx_peer_close(ba);
  MUST(tpx_mem_deregister(ms));
  MUST(tpx_mem_deregister(md));
  tpx_endpoint_destroy(a);
  tpx_endpoint_destroy(b);
  tpx_net_close(plain);
  tpx_net_close(&w->pub);
  MUST(tpx__gpu_free(DEV, dst));
  tpx__gpu_release(DEV);
  free(src);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (gc_count_gpus() == 0) {
    printf("test_engine_flush: no GPU; skipped\n");
    return 77;
  }
  run(64u << 10);
  run(512u << 10);
  run(4u << 20);
  printf("GPU contexts still retained: %d\n", tpx__gpu_ctx_retained());
  CHECK(tpx__gpu_ctx_retained() == 0, "contexts left retained");
  return gc_finish("test_engine_flush");
}
