/* The built-in transport's unpack mode (TPX_SOCK_UNPACK=1) on a real GPU,
 * end to end over loopback: CUDA send buffers (registered, 4 KiB aligned, and
 * unregistered device pointers) staged through pinned memory; receives
 * landing in the pinned, GPU-mapped bounce pool; the GPU unpacker (kernel
 * mode, the default) gathering each slot's loadMeta entries into device
 * memory; irecvConsumed after each unpack finished, FIFO. Byte for byte
 * against the pattern, sizes 0 .. 8 MiB (odd ones included), several
 * receives in flight, staging back-pressure (a 16 MiB pool), sender and
 * receiver on different GPUs when there are two. Primary contexts balanced
 * at the end.
 * Exit 0: all passed; 1: a failure; 77: no GPU (skipped). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cuda/gpu.h"
#include "cuda/unpack.h"
#include "gpu_check.h"
#include "tpx/config.h"
#include "tpx/net.h"

#define MAXMSG (8u << 20)
#define WIN 8
#define NMSG 200
#define SPAN (2u * MAXMSG)

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint8_t pat(size_t i) {
  uint64_t x = (uint64_t)(i >> 3) * 0x9E3779B97F4A7C15ull + 77;
  x ^= x >> 31;
  return (uint8_t)(x >> ((i & 7) * 8));
}

static uint64_t rs = 0x2545F4914F6CDD1Dull;
static uint64_t rnd(void) {
  rs ^= rs << 13, rs ^= rs >> 7, rs ^= rs << 17;
  return rs;
}

static size_t pick_size(int k) {
  if (k == 1) return 0;
  if (k == 2) return MAXMSG;
  switch (rnd() % 4) {
  case 0: return (size_t)(rnd() % 20000);
  case 1: return (size_t)(rnd() % (1u << 20)) | 1;
  case 2: return (size_t)(rnd() % MAXMSG) | 1;
  default: return 512u * 1024u;
  }
}

/* Poll test until done (rc 0) or a deadline; returns the rc. */
static int wait_done(tpx_net_t *net, void *req) {
  uint64_t end = now_ns() + 30000000000ull;
  for (;;) {
    int done = 0, rc = net->ops->test(net, req, &done, NULL);
    if (rc != 0) return rc;
    if (done) return 0;
    if (now_ns() > end) return TPX_ETIMEDOUT;
  }
}

static void run(int sdev, int rdev, size_t bounce_bytes) {
  printf("sender GPU %d, receiver GPU %d, bounce pool %zu bytes\n", sdev, rdev, bounce_bytes);
  tpx_config_t cfg;
  tpx_config_from_env(&cfg);
  cfg.sock_unpack = 1;
  cfg.sock_bounce_bytes = bounce_bytes;
  if (cfg.socket_ifname[0] == '\0') strcpy(cfg.socket_ifname, "lo");
  tpx_net_t *net = NULL;
  MUST(tpx_net_open_builtin(&cfg, &net));
  tpx_net_props_t p;
  MUST(net->ops->get_properties(net, 0, &p));
  CHECK(p.dev_type == TPX_NET_DEV_UNPACK && p.dev_version == TPX_NET_UNPACK_VERSION, "UNPACK v7");
  CHECK(p.ptr_support == (TPX_PTR_HOST | TPX_PTR_CUDA), "ptrSupport 0x%x", p.ptr_support);

  /* Connect, with the caller's device-handle storage. */
  unsigned char handle[TPX_NET_HANDLE_BYTES];
  void *lc = NULL, *s = NULL, *r = NULL;
  tpx_net_dev_handle_t *dev = aligned_alloc(16, sizeof(*dev));
  memset(dev, 0, sizeof(*dev));
  MUST(net->ops->listen(net, 0, handle, &lc));
  uint64_t end = now_ns() + 20000000000ull;
  while ((s == NULL || r == NULL) && now_ns() < end) {
    if (s == NULL) MUST(net->ops->connect(net, 0, handle, &s, NULL));
    if (r == NULL) MUST(net->ops->accept(net, lc, &r, dev));
  }
  if (s == NULL || r == NULL) {
    fprintf(stderr, "FATAL: no connection\n");
    exit(1);
  }
  MUST(net->ops->close_listen(net, lc));
  CHECK(dev->type == TPX_NET_DEV_UNPACK && dev->size == sizeof(tpx_unpack_dev_handle_t) &&
            dev->needs_proxy_progress == 1,
        "device handle fields");
  tpx_gpu_ptr_info_t info;
  MUST(tpx__gpu_ptr_query(dev->handle, &info));
  CHECK(info.mem == TPX_GPU_MEM_PINNED, "handle in pinned mapped memory (mem %d)", info.mem);
  /* UVA: the device address of pinned memory is its host address too. */
  tpx_unpack_dev_handle_t *dh = dev->handle;
  tpx_unpack_meta_block_t *meta = dh->meta;
  MUST(tpx__gpu_ptr_query(dh->bounce_buf, &info));
  CHECK(info.mem == TPX_GPU_MEM_PINNED, "bounce pool pinned (mem %d)", info.mem);
  CHECK(dh->head == UINT64_MAX, "head starts at (uint64_t)-1, as the plugin sets it");

  /* Buffers: the source pattern on the sender's GPU (and on the host), one
   * destination per receive in flight on the receiver's GPU. */
  MUST(tpx__gpu_retain(sdev));
  MUST(tpx__gpu_retain(rdev));
  uint8_t *host = malloc(SPAN), *got = malloc(MAXMSG);
  for (size_t i = 0; i < SPAN; i++)
    host[i] = pat(i);
  void *src = NULL, *dst[WIN];
  MUST(tpx__gpu_malloc(sdev, SPAN, &src));
  MUST(tpx__gpu_memcpy(sdev, src, host, SPAN));
  for (int i = 0; i < WIN; i++)
    MUST(tpx__gpu_malloc(rdev, MAXMSG, &dst[i]));
  void *smh = NULL, *bad = NULL, *dmh = NULL;
  CHECK(net->ops->reg_mr(net, s, (char *)src + 100, 4096, TPX_PTR_CUDA, &bad) == TPX_EINVAL,
        "misaligned CUDA registration refused");
  MUST(net->ops->reg_mr(net, s, src, SPAN, TPX_PTR_CUDA, &smh));
  MUST(net->ops->get_device_mr(net, s, smh, &dmh));
  CHECK(dmh == smh, "getDeviceMr gives the handle back");
  tpx_unpacker_t *u = NULL;
  MUST(tpx__unpacker_create(rdev, NULL, &u));

  size_t size[NMSG], off[NMSG];
  void *rq[NMSG], *sq[NMSG];
  for (int k = 0; k < NMSG; k++) {
    size[k] = pick_size(k);
    off[k] = (size_t)(rnd() % (SPAN - size[k] + 1));
  }
  int nr = 0, ns = 0, backpressure = 0;
  for (int k = 0; k < NMSG; k++) {
    while (nr < NMSG && nr < k + WIN) {
      void *d[1] = {dst[nr % WIN]};
      size_t n[1] = {MAXMSG};
      MUST(net->ops->irecv(net, r, 1, d, n, NULL, NULL, &rq[nr]));
      CHECK(rq[nr] != NULL, "irecv request");
      nr++;
    }
    while (ns < nr) {
      /* Even: registered CUDA memory; odd: an unregistered device pointer
       * (the transport asks the driver); every 5th from host memory. */
      int from_host = ns % 5 == 4;
      void *b = from_host ? (void *)(host + off[ns]) : (void *)((char *)src + off[ns]);
      void *mh = (ns % 2 == 0 && !from_host) ? smh : NULL;
      MUST(net->ops->isend(net, s, b, size[ns], 0, mh, &sq[ns]));
      if (sq[ns] == NULL) { /* staging full: complete older sends first */
        backpressure++;
        break;
      }
      ns++;
    }
    CHECK(wait_done(net, rq[k]) == 0, "receive %d done", k);
    int slot = k % TPX_UNPACK_SLOTS;
    uint64_t cnt = __atomic_load_n(&meta->cnt[slot], __ATOMIC_ACQUIRE);
    CHECK(cnt == (size[k] + 4095) / 4096, "receive %d: %llu entries for %zu bytes", k,
          (unsigned long long)cnt, size[k]);
    tpx_unpack_chunk_t ch = {.meta = meta->mem[slot],
                             .meta_dev = meta->mem[slot],
                             .cnt = (uint32_t)cnt,
                             .bounce = dh->bounce_buf,
                             .bounce_bytes = bounce_bytes,
                             .dst = dst[k % WIN],
                             .dst_bytes = MAXMSG};
    uint64_t t = 0;
    MUST(tpx__unpacker_submit(u, &ch, &t));
    MUST(tpx__unpacker_wait(u, t, 30000));
    MUST(net->ops->irecv_consumed(net, r, 1, rq[k]));
    CHECK(k >= ns || wait_done(net, sq[k]) == 0, "send %d done", k);
    if (size[k]) {
      MUST(tpx__gpu_memcpy(rdev, got, dst[k % WIN], size[k]));
      size_t bad_at = SIZE_MAX;
      for (size_t i = 0; i < size[k] && bad_at == SIZE_MAX; i++)
        if (got[i] != host[off[k] + i]) bad_at = i;
      CHECK(bad_at == SIZE_MAX, "message %d (%zu bytes): byte %zu differs", k, size[k], bad_at);
    }
  }
  CHECK(ns == NMSG, "all sends posted (%d)", ns);
  printf("  %d messages, staging back-pressure %d times\n", NMSG, backpressure);
  tpx__unpacker_destroy(u);
  MUST(net->ops->dereg_mr(net, s, smh));
  MUST(net->ops->close_send(net, s));
  MUST(net->ops->close_recv(net, r));
  net->ops->destroy(net);
  free(dev);
  for (int i = 0; i < WIN; i++)
    MUST(tpx__gpu_free(rdev, dst[i]));
  MUST(tpx__gpu_free(sdev, src));
  MUST(tpx__gpu_release(sdev));
  MUST(tpx__gpu_release(rdev));
  free(host);
  free(got);
  CHECK(tpx__gpu_ctx_retained() == 0, "primary contexts balanced (%d held)", tpx__gpu_ctx_retained());
}

int main(void) {
  int n = 0;
  if (tpx__gpu_device_count(&n) != 0 || n < 1) {
    printf("test_sock_unpack_gpu: no GPU, skipped\n");
    return 77;
  }
  run(0, 0, 64u << 20);
  run(0, 0, 16u << 20); /* staging and pool smaller than the window's bytes */
  if (n > 1) run(1, 0, 64u << 20);
  return gc_finish("test_sock_unpack_gpu");
}
