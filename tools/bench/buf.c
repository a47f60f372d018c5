/* Benchmark buffers (host, page aligned; or GPU memory with a host shadow for
 * fills and checks) and the byte pattern that --check verifies.
 *
 * The source's byte at offset x of its buffer is pat(x, seed): every position
 * differs from its neighbours and from the other side's layout, so a block
 * landing at the wrong place, a stale block or a torn one shows up. The
 * destination span is poisoned before each checked iteration, so the gaps
 * between blocks must still hold the poison afterwards. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench.h"
#include "internal.h" /* cuda/gpu.h: GPU buffers in the library's primary-context references */

#define POISON 0xA5

static inline uint8_t pat(uint64_t x, unsigned seed) {
  uint32_t v = (uint32_t)x * 2654435761u + seed * 0x85ebca6bu;
  return (uint8_t)((v >> 24) ^ (uint8_t)(x >> 32));
}

/* Host memory this machine has free now: a buffer larger than that would be
 * granted (overcommit) and then take the machine down while being touched. */
int bench_phys_ok(size_t bytes) {
  long pages = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  return pages <= 0 || psz <= 0 || bytes / (size_t)psz < (size_t)pages;
}

int bench_buf_alloc(struct bench_buf *b, size_t len, int cuda, int gpu) {
  memset(b, 0, sizeof(*b));
  b->len = len;
  b->cuda = cuda;
  b->gpu = gpu;
  size_t rounded = (len + 4095) & ~(size_t)4095; /* len <= BENCH_MAX_SPAN: no wrap */
  if (!bench_phys_ok(rounded)) return TPX_ENOMEM;
  if (!cuda) {
    if (!(b->p = aligned_alloc(4096, rounded))) return TPX_ENOMEM;
    memset(b->p, POISON, len); /* every page touched before the timing starts */
    return 0;
  }
  if (!(b->shadow = malloc(len))) return TPX_ENOMEM;
  int rc = tpx__gpu_retain(gpu); /* ours, released in bench_buf_free */
  if (rc == 0 && (rc = tpx__gpu_malloc(gpu, len, &b->p)) == 0) rc = tpx__gpu_memset(gpu, b->p, POISON, len);
  if (rc) {
    if (b->p) tpx__gpu_free(gpu, b->p);
    b->p = NULL;
    if (rc != TPX_ENOTSUP || tpx__gpu_ctx_refs(gpu) > 0) tpx__gpu_release(gpu);
    free(b->shadow);
    b->shadow = NULL;
  }
  return rc;
}

void bench_buf_free(struct bench_buf *b) {
  if (b->p && b->cuda) {
    tpx__gpu_free(b->gpu, b->p);
    tpx__gpu_release(b->gpu);
  } else {
    free(b->p);
  }
  free(b->shadow);
  memset(b, 0, sizeof(*b));
}

static uint8_t *host_view(struct bench_buf *b) { return b->cuda ? b->shadow : b->p; }

static size_t my_off(const struct bench_layout *l, int server, int i) {
  return server ? bench_layout_server_off(l, i) : bench_layout_client_off(l, i);
}

int bench_buf_fill(struct bench_buf *b, const struct bench_layout *l, int server, unsigned seed) {
  uint8_t *h = host_view(b);
  size_t span = bench_layout_span(l);
  for (int i = 0; i < l->batch; i++) {
    size_t off = my_off(l, server, i);
    uint8_t *p = h + off;
    for (size_t j = 0; j < l->block; j++) p[j] = pat(off + j, seed);
  }
  return b->cuda ? tpx__gpu_memcpy(b->gpu, (uint8_t *)b->p + l->base, h + l->base, span) : 0;
}

int bench_buf_poison(struct bench_buf *b, const struct bench_layout *l) {
  size_t span = bench_layout_span(l);
  if (b->cuda) return tpx__gpu_memset(b->gpu, (uint8_t *)b->p + l->base, POISON, span);
  memset((uint8_t *)b->p + l->base, POISON, span);
  return 0;
}

/* First offset in [0, n) where p differs from the source pattern starting at
 * src (or from the poison when poison), n if none. Compares in 4 KiB steps
 * (a loop the compiler vectorises) and looks closer only at a bad step. */
static size_t first_bad(const uint8_t *p, size_t n, uint64_t src, unsigned seed, int poison) {
  for (size_t base = 0; base < n; base += 4096) {
    size_t m = n - base < 4096 ? n - base : 4096;
    uint8_t diff = 0;
    for (size_t j = 0; j < m; j++) diff |= (uint8_t)(p[base + j] ^ (poison ? POISON : pat(src + base + j, seed)));
    if (!diff) continue;
    for (size_t j = 0; j < m; j++)
      if (p[base + j] != (poison ? POISON : pat(src + base + j, seed))) return base + j;
  }
  return n;
}

int bench_buf_check(struct bench_buf *b, const struct bench_layout *l, int server, unsigned seed, size_t *bad) {
  uint8_t *h = host_view(b);
  size_t span = bench_layout_span(l);
  if (b->cuda && tpx__gpu_memcpy(b->gpu, h + l->base, (uint8_t *)b->p + l->base, span) != 0) {
    *bad = 0;
    return -1;
  }
  for (int i = 0; i < l->batch; i++) {
    size_t dst = my_off(l, server, i), src = my_off(l, !server, i);
    size_t k = first_bad(h + dst, l->block, src, seed, 0);
    if (k < l->block) {
      *bad = dst + k;
      return -1;
    }
  }
  for (int k = 0; k + 1 < l->batch; k++) { /* the gaps between blocks */
    size_t g = l->base + (size_t)k * l->stride + l->block, glen = l->stride - l->block;
    size_t j = first_bad(h + g, glen, 0, 0, 1);
    if (j < glen) {
      *bad = g + j;
      return -1;
    }
  }
  return 0;
}
