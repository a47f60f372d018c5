/* Packed chunks in GPU memory on a real GPU: many small entries of a
 * vectored write and read (vLLM's per-layer KV layout: one entry per block
 * per layer, a few KiB to tens of KiB each) share chunks, gathered into the
 * sender's staging arena and scattered from the receiver's by one unpacker
 * launch per chunk (src/engine/gpu/pack_runs.c).
 *
 *   test_engine_gpu_pack
 *
 * In one process, two endpoints (GPU 0 and GPU 1, or both on GPU 0), for
 * each path: host staging with SM copies (kernel), with copy-engine copies
 * (d2d: one cudaMemcpyBatchAsync per launch), and the built-in transport's
 * unpack mode (no packing of GPU entries there: one entry per chunk, the
 * bytes must still arrive). Entries of odd and KV-like sizes, from GPU
 * memory and from host memory, into GPU and host memory at shuffled places
 * with poisoned gaps; every byte and every gap is checked after the write
 * and after reading everything back. The plan is checked too: packed where
 * the path stages both ways, plain elsewhere.
 *
 * Exit 0: all passed; 1: a failure; 77: no GPU. */
#define _GNU_SOURCE
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cuda/gpu.h"
#include "engine/op.h"
#include "gpu_check.h"
#include "tpx/tpx.h"

#define POISON 0xEE
#define GAP 256u
#define NBLK 3000

static uint8_t pat(size_t x, unsigned seed) { return (uint8_t)(x * 131u + seed * 7u + (x >> 11)); }

static size_t rnd(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 8) & 0xffffff;
}

struct area {
  int dev; /* -1: host */
  uint8_t *p;
  size_t len;
  tpx_mem_t *mem;
  tpx_rmem_t *rmem; /* as the peer names it */
};

static void area_open(tpx_endpoint_t *ep, struct area *a, int dev, size_t len) {
  a->dev = dev;
  a->len = len;
  if (dev >= 0) {
    MUST(tpx__gpu_retain(dev));
    /* whole 4 KiB pages allocated: unpack mode registers GPU memory with the transport in pages */
    MUST(tpx__gpu_malloc(dev, (len + 4095) & ~(size_t)4095, (void **)&a->p));
  } else {
    a->p = malloc(len);
    if (!a->p) exit(1);
  }
  tpx_mem_desc_t d = {a->p, len, dev >= 0 ? TPX_MEM_CUDA : TPX_MEM_HOST, dev >= 0 ? dev : 0,
                      TPX_ACCESS_READ | TPX_ACCESS_WRITE};
  MUST(tpx_mem_register(ep, &d, &a->mem));
  uint8_t blob[TPX_MD_MAX];
  size_t bl = 0;
  MUST(tpx_mem_get_public_data(a->mem, blob, sizeof(blob), &bl));
  MUST(tpx_load_remote_md(blob, bl, &a->rmem));
}

static void area_close(struct area *a) {
  tpx_rmem_free(a->rmem);
  MUST(tpx_mem_deregister(a->mem));
  if (a->dev >= 0) {
    MUST(tpx__gpu_free(a->dev, a->p));
    MUST(tpx__gpu_release(a->dev));
  } else {
    free(a->p);
  }
}

/* The area's bytes, as the CPU sees them (a copy for GPU memory). */
static uint8_t *area_get(const struct area *a) {
  uint8_t *h = malloc(a->len);
  if (!h) exit(1);
  if (a->dev >= 0) MUST(tpx__gpu_memcpy(a->dev, h, a->p, a->len));
  else memcpy(h, a->p, a->len);
  return h;
}

static void area_set(const struct area *a, const uint8_t *h) {
  if (a->dev >= 0) MUST(tpx__gpu_memcpy(a->dev, a->p, h, a->len));
  else memcpy(a->p, h, a->len);
}

struct blk {
  int sa, da;        /* source / destination area index */
  size_t so, dof, len;
};

/* Destination areas hold the blocks at their places with GAP poison bytes
 * after each; any other byte poison as well. 0 or 1 (reported). */
static int check_dst(struct area *const *dst, int nd, const struct blk *b, int n, unsigned seed, const char *what) {
  int bad = 0;
  for (int a = 0; a < nd && !bad; a++) {
    uint8_t *h = area_get(dst[a]);
    uint8_t *want = malloc(dst[a]->len);
    if (!want) exit(1);
    memset(want, POISON, dst[a]->len);
    for (int i = 0; i < n; i++)
      if (b[i].da == a)
        for (size_t x = 0; x < b[i].len; x++) want[b[i].dof + x] = pat(b[i].so + x, seed + (unsigned)b[i].sa);
    for (size_t x = 0; x < dst[a]->len && !bad; x++)
      if (h[x] != want[x]) {
        fprintf(stderr, "  %s: area %d byte %zu is 0x%02x, want 0x%02x\n", what, a, x, h[x], want[x]);
        bad = 1;
      }
    free(want);
    free(h);
  }
  return bad;
}

static void fill_src(const struct area *a, unsigned seed) {
  uint8_t *h = malloc(a->len);
  if (!h) exit(1);
  for (size_t x = 0; x < a->len; x++) h[x] = pat(x, seed);
  area_set(a, h);
  free(h);
}

static void poison(const struct area *a) {
  uint8_t *h = malloc(a->len);
  if (!h) exit(1);
  memset(h, POISON, a->len);
  area_set(a, h);
  free(h);
}

static void run_path(int ndev, const char *path) {
  int g1 = ndev > 1 ? 1 : 0;
  int unpack = strcmp(path, "unpack") == 0;
  tpx_config_t cfg;
  tpx_config_from_env(&cfg);
  cfg.sock_unpack = unpack;
  snprintf(cfg.unpack, sizeof(cfg.unpack), "%s", strcmp(path, "d2d") == 0 ? "d2d" : "kernel");
  cfg.chunk_bytes = 512 * 1024;
  cfg.num_channels = 3;
  cfg.timeout_ms = 30000;
  cfg.inline_bytes = 0;
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.port = TPX_PORT_EPHEMERAL;
  p.listen_host = "127.0.0.1";
  p.name = "pack0";
  p.gpu = 0;
  tpx_endpoint_t *e0 = NULL, *e1 = NULL;
  MUST(tpx_endpoint_create(&p, &e0));
  p.name = "pack1";
  p.gpu = g1;
  MUST(tpx_endpoint_create(&p, &e1));
  tpx_peer_t *p01 = NULL, *p10 = NULL;
  MUST(tpx_connect(e0, "127.0.0.1", tpx_endpoint_port(e1), &p01));
  MUST(tpx_accept(e1, 30000, &p10));
  /* e0: sources on GPU 0 and in host memory; e1: destinations on GPU g1 and in host memory */
  struct area s_gpu, s_host, d_gpu, d_host, back;
  const size_t sz = 48u << 20;
  area_open(e0, &s_gpu, 0, sz);
  area_open(e0, &s_host, -1, 16u << 20);
  area_open(e1, &d_gpu, g1, sz + NBLK * (size_t)GAP);
  area_open(e1, &d_host, -1, 16u << 20);
  area_open(e0, &back, 0, sz + (16u << 20) + NBLK * (size_t)GAP); /* every block, GPU- and host-sourced */
  unsigned seed = 34;
  fill_src(&s_gpu, seed + 0);
  fill_src(&s_host, seed + 1);
  poison(&d_gpu);
  poison(&d_host);
  poison(&back);
  /* Blocks: mostly 32 KiB and 16 KiB (KV-like), some odd; 1 in 8 from host
   * memory, 1 in 10 into host memory; destinations in shuffled order. */
  static struct blk b[NBLK];
  static int order[NBLK];
  unsigned s = 7;
  size_t so[2] = {0, 0}, dend[2] = {0, 0};
  int n = 0;
  for (; n < NBLK; n++) {
    size_t k = rnd(&s) % 10;
    size_t len = k < 5 ? 32768 : k < 8 ? 16384 : k < 9 ? 1 + rnd(&s) % 5000 : 1 + rnd(&s) % 70000;
    int sa = rnd(&s) % 8 == 0, da = rnd(&s) % 10 == 0;
    size_t slim = sa ? s_host.len : s_gpu.len, dlim = da ? d_host.len : d_gpu.len;
    if (so[sa] + len > slim || dend[da] + len + GAP > dlim) break;
    b[n] = (struct blk){sa, da, so[sa], 0, len};
    so[sa] += len + (rnd(&s) % 3) * 64;
    dend[da] += len + GAP;
  }
  for (int i = 0; i < n; i++) order[i] = i;
  for (int i = n - 1; i > 0; i--) {
    int j = (int)(rnd(&s) % (size_t)(i + 1)), t = order[i];
    order[i] = order[j];
    order[j] = t;
  }
  size_t at[2] = {0, 0};
  for (int k = 0; k < n; k++) { /* destinations laid out in shuffled block order */
    struct blk *x = &b[order[k]];
    x->dof = at[x->da];
    at[x->da] += x->len + GAP;
  }
  tpx_iov_t *v = calloc((size_t)n, sizeof(*v));
  if (!v) exit(1);
  struct area *src[2] = {&s_gpu, &s_host}, *dst[2] = {&d_gpu, &d_host};
  for (int i = 0; i < n; i++)
    v[i] = (tpx_iov_t){src[b[i].sa]->mem, b[i].so, dst[b[i].da]->rmem, b[i].dof, b[i].len};
  tpx_xfer_t *x = NULL;
  MUST(tpx_xfer_prep_write(p01, v, (size_t)n, "packed", 6, &x));
  const struct tpx__op *o = (const struct tpx__op *)x;
  CHECK(unpack ? o->pack_max == 0 : o->pack_max >= 16384, "%s: pack limit %llu", path,
        (unsigned long long)o->pack_max);
  if (!unpack)
    CHECK(o->nchunks < (uint64_t)n / 4, "%s: %d entries in %llu chunks", path, n, (unsigned long long)o->nchunks);
  for (int rep = 0; rep < 2; rep++) {
    MUST(tpx_xfer_post(x));
    CHECK(tpx_xfer_wait(x, 60000) == 0, "%s: vectored write of %d entries", path, n);
    tpx_notif_t nt;
    CHECK(tpx_wait_notif(e1, 10000, &nt) == 1, "%s: notification after the write", path);
    CHECK(check_dst(dst, 2, b, n, seed, "write") == 0, "%s: write, round %d", path, rep);
    if (rep == 0) { /* the second round writes over poison again */
      poison(&d_gpu);
      poison(&d_host);
    }
  }
  tpx_xfer_free(x);
  /* Read every block back from e1 into one GPU area of e0, in the
   * original order, GAP apart: the receiver's scatter on e0 this time, the
   * sender's gather on e1. */
  struct blk *rb = calloc((size_t)n, sizeof(*rb));
  if (!rb) exit(1);
  size_t ro = 0;
  for (int i = 0; i < n; i++) {
    v[i] = (tpx_iov_t){back.mem, ro, dst[b[i].da]->rmem, b[i].dof, b[i].len};
    rb[i] = (struct blk){b[i].sa, 0, b[i].so, ro, b[i].len};
    ro += b[i].len + GAP;
  }
  MUST(tpx_xfer_prep_read(p01, v, (size_t)n, NULL, 0, &x));
  MUST(tpx_xfer_post(x));
  CHECK(tpx_xfer_wait(x, 60000) == 0, "%s: vectored read of %d entries", path, n);
  tpx_xfer_free(x);
  struct area *bk[1] = {&back};
  CHECK(check_dst(bk, 1, rb, n, seed, "read back") == 0, "%s: read back", path);
  free(rb);
  free(v);
  tpx_peer_close(p01);
  tpx_peer_close(p10);
  area_close(&s_gpu);
  area_close(&s_host);
  area_close(&d_gpu);
  area_close(&d_host);
  area_close(&back);
  tpx_endpoint_destroy(e0);
  tpx_endpoint_destroy(e1);
  CHECK(tpx__gpu_ctx_retained() == 0, "%d context(s) retained after teardown (%s)", tpx__gpu_ctx_retained(), path);
  printf("%s packed GPU entries: %d blocks, GPU 0 -> GPU %d, %s\n", gc_failures ? "FAIL?" : "PASS", n, g1, path);
  fflush(stdout);
}

int main(void) {
  setvbuf(stdout, NULL, _IOLBF, 0);
  int ndev = gc_count_gpus();
  if (ndev == 0) {
    printf("test_engine_gpu_pack: no GPU; skipped\n");
    return 77;
  }
  run_path(ndev, "kernel");
  run_path(ndev, "d2d");
  run_path(ndev, "unpack");
  return gc_finish("test_engine_gpu_pack");
}
