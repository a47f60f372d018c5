/* Unpacking without a GPU: the contract's CPU gather (used by the built-in
 * transport's emulation mode in CI) and entry validation, the unpacker's
 * names, and the GPU layer's answers on a host without GPU support. */
#include <stdlib.h>
#include <string.h>

#include "testutil.h"
#include "cuda/gpu.h"
#include "cuda/unpack.h"
#include "tcpx/contract.h"
#include "tpx/error.h"

#define PAGE 4096u

static uint64_t rng_state;
static uint64_t rnd(void) { /* xorshift64*: reproducible per seed */
  rng_state ^= rng_state >> 12;
  rng_state ^= rng_state << 25;
  rng_state ^= rng_state >> 27;
  return rng_state * 2685821657736338717ull;
}
static uint32_t rnd_below(uint32_t n) { return (uint32_t)(rnd() % n); }

static void shuffle(uint32_t *a, uint32_t n) {
  for (uint32_t i = n; i > 1; i--) {
    uint32_t j = rnd_below(i);
    uint32_t t = a[i - 1];
    a[i - 1] = a[j];
    a[j] = t;
  }
}

/* Byte-by-byte reference of what an unpack must produce. */
static void reference(uint8_t *dst, const uint8_t *bounce, const tpx_unpack_meta_t *m, uint32_t cnt) {
  for (uint32_t i = 0; i < cnt; i++)
    for (uint32_t b = 0; b < m[i].len; b++) dst[m[i].dst_off + b] = bounce[m[i].src_off + b];
}

/* Fragments in shuffled pages of a bounce pool, random lengths and in-page
 * offsets, placed back to back (or with gaps) in the destination. */
static uint32_t make_chunk(tpx_unpack_meta_t *m, uint32_t cnt, uint32_t npages, int gaps,
                           uint64_t *dst_len) {
  uint32_t *perm = malloc(npages * sizeof *perm);
  assert_non_null(perm);
  for (uint32_t i = 0; i < npages; i++) perm[i] = i;
  shuffle(perm, npages);
  uint64_t d = gaps ? rnd_below(64) : 0;
  for (uint32_t i = 0; i < cnt; i++) {
    uint32_t kind = rnd_below(4);
    uint32_t len = kind == 0 ? PAGE : kind == 1 ? 1 + rnd_below(16) : 1 + rnd_below(PAGE);
    uint32_t off = rnd_below(PAGE - len + 1);
    m[i].src_off = perm[i] * PAGE + off;
    m[i].len = len;
    m[i].dst_off = d;
    d += len + (gaps ? rnd_below(40) : 0);
  }
  free(perm);
  *dst_len = d + 64;
  return cnt;
}

static void run_scatter(uint64_t seed, uint32_t cnt, int gaps) {
  rng_state = seed;
  const uint32_t npages = cnt + 37;
  uint8_t *bounce = malloc((size_t)npages * PAGE);
  tpx_unpack_meta_t *m = aligned_alloc(16, cnt * sizeof *m);
  assert_non_null(bounce);
  assert_non_null(m);
  for (size_t i = 0; i < (size_t)npages * PAGE; i++) bounce[i] = (uint8_t)rnd();
  uint64_t dst_len;
  make_chunk(m, cnt, npages, gaps, &dst_len);
  uint8_t *dst = malloc(dst_len), *want = malloc(dst_len);
  assert_non_null(dst);
  assert_non_null(want);
  memset(dst, 0xA5, dst_len); /* poison: holes must stay untouched */
  memset(want, 0xA5, dst_len);
  reference(want, bounce, m, cnt);
  assert_int_equal(tpx__tcpx_unpack_cpu(dst, dst_len, bounce, (size_t)npages * PAGE, m, cnt), 0);
  assert_memory_equal(dst, want, dst_len);
  free(dst);
  free(want);
  free(m);
  free(bounce);
}

static void test_scatter_shuffled(void **state) {
  (void)state;
  const uint32_t counts[] = {1, 2, 7, 128, 1024, 2048};
  for (unsigned i = 0; i < sizeof counts / sizeof counts[0]; i++)
    for (uint64_t seed = 1; seed <= 4; seed++) run_scatter(seed * 7919 + counts[i], counts[i], 0);
}

static void test_scatter_with_gaps(void **state) {
  (void)state;
  for (uint64_t seed = 1; seed <= 8; seed++) run_scatter(seed * 104729, 300, 1);
}

/* Consecutive pages that continue each other are merged into one copy; the
 * result must not change, including where a run breaks. */
static void test_contiguous_runs(void **state) {
  (void)state;
  rng_state = 42;
  enum { N = 64 };
  uint8_t *bounce = malloc(N * PAGE);
  uint8_t *dst = malloc(N * PAGE), *want = malloc(N * PAGE);
  tpx_unpack_meta_t m[N];
  assert_non_null(bounce);
  assert_non_null(dst);
  assert_non_null(want);
  tu_fill(bounce, N * PAGE, 9, 0);
  uint64_t d = 0;
  for (uint32_t i = 0; i < N; i++) {
    /* runs of 4 contiguous pages; runs themselves in reverse order */
    uint32_t page = (N / 4 - 1 - i / 4) * 4 + i % 4;
    m[i] = (tpx_unpack_meta_t){.src_off = page * PAGE, .len = PAGE, .dst_off = d};
    d += PAGE;
  }
  memset(dst, 0, N * PAGE);
  memset(want, 0, N * PAGE);
  reference(want, bounce, m, N);
  assert_int_equal(tpx__tcpx_unpack_cpu(dst, N * PAGE, bounce, N * PAGE, m, N), 0);
  assert_memory_equal(dst, want, N * PAGE);
  /* Zero-length entries are legal and copy nothing. */
  tpx_unpack_meta_t z[3] = {{0, 0, 0}, {PAGE, 5, 10}, {0, 0, N * PAGE}};
  memset(dst, 0, N * PAGE);
  assert_int_equal(tpx__tcpx_unpack_cpu(dst, N * PAGE, bounce, N * PAGE, z, 3), 0);
  assert_memory_equal(dst + 10, bounce + PAGE, 5);
  assert_int_equal(dst[9], 0);
  assert_int_equal(dst[15], 0);
  free(bounce);
  free(dst);
  free(want);
}

/* Bad entries are refused before anything is copied. */
static void test_validation(void **state) {
  (void)state;
  uint8_t bounce[2 * PAGE], dst[PAGE];
  memset(bounce, 1, sizeof bounce);
  tpx_unpack_meta_t m[2] = {{0, 16, 0}, {0, 16, 16}};
  struct {
    tpx_unpack_meta_t bad;
  } cases[] = {
      {{2 * PAGE - 8, 16, 0}},        /* source runs past the bounce buffer */
      {{UINT32_MAX, 16, 0}},          /* source offset far out */
      {{0, 16, PAGE - 8}},            /* destination runs past the buffer */
      {{0, 16, UINT64_MAX - 4}},      /* dst_off + len wraps */
      {{0, UINT32_MAX, 0}},           /* length larger than both */
  };
  for (unsigned i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    m[1] = cases[i].bad;
    memset(dst, 0, sizeof dst);
    assert_int_equal(tpx__tcpx_unpack_cpu(dst, sizeof dst, bounce, sizeof bounce, m, 2), TPX_EPROTO);
    assert_non_null(strstr(tpx_last_error(), "entry 1/2"));
    for (size_t b = 0; b < sizeof dst; b++) assert_int_equal(dst[b], 0); /* entry 0 not copied either */
  }
  uint32_t mx = 0;
  uint64_t total = 0;
  m[1] = (tpx_unpack_meta_t){PAGE, 100, 200};
  assert_int_equal(tpx__tcpx_unpack_validate(m, 2, sizeof bounce, sizeof dst, &mx, &total), 0);
  assert_int_equal(mx, 100);
  assert_int_equal(total, 116);
  /* Exactly at the ends is fine. */
  m[1] = (tpx_unpack_meta_t){2 * PAGE - 16, 16, PAGE - 16};
  assert_int_equal(tpx__tcpx_unpack_cpu(dst, sizeof dst, bounce, sizeof bounce, m, 2), 0);
  assert_int_equal(tpx__tcpx_unpack_cpu(dst, sizeof dst, bounce, sizeof bounce, NULL, 0), 0);
  assert_int_equal(tpx__tcpx_unpack_cpu(dst, sizeof dst, bounce, sizeof bounce, NULL, 1), TPX_EINVAL);
  assert_int_equal(tpx__tcpx_unpack_cpu(NULL, sizeof dst, bounce, sizeof bounce, m, 2), TPX_EINVAL);
}

/* The plugin's slot protocol as the emulation mode lays it out: the k-th
 * receive uses slot k % 16, cnt[slot] says how many entries are valid. */
static void test_meta_block_slots(void **state) {
  (void)state;
  assert_int_equal(sizeof(tpx_unpack_meta_t), 16);
  assert_int_equal(sizeof(tpx_unpack_dev_handle_t), 24);
  tpx_unpack_meta_block_t *blk = aligned_alloc(16, sizeof *blk);
  assert_non_null(blk);
  assert_int_equal((uintptr_t)&blk->mem[3][5] % 16, 0);
  rng_state = 77;
  enum { POOL = 256 };
  uint8_t *bounce = malloc(POOL * PAGE);
  assert_non_null(bounce);
  uint32_t pages[POOL];
  for (uint32_t i = 0; i < POOL; i++) pages[i] = i;
  for (uint32_t k = 0; k < 40; k++) { /* 40 receives wrap the 16 slots twice */
    uint32_t slot = k % TPX_UNPACK_SLOTS;
    uint32_t size = 1 + rnd_below(64 * 1024);
    tu_fill(bounce, POOL * PAGE, 1000 + k, 0); /* fresh pool contents per receive */
    shuffle(pages, POOL);
    uint32_t n = 0;
    for (uint32_t off = 0; off < size; off += PAGE, n++) {
      uint32_t len = size - off < PAGE ? size - off : PAGE;
      blk->mem[slot][n] = (tpx_unpack_meta_t){pages[n] * PAGE, len, off};
    }
    __atomic_store_n(&blk->cnt[slot], n, __ATOMIC_RELEASE);
    uint8_t *dst = malloc(size);
    assert_non_null(dst);
    uint32_t cnt = (uint32_t)__atomic_load_n(&blk->cnt[slot], __ATOMIC_ACQUIRE);
    assert_int_equal(tpx__tcpx_unpack_cpu(dst, size, bounce, POOL * PAGE, blk->mem[slot], cnt), 0);
    for (uint32_t i = 0; i < cnt; i++) {
      const tpx_unpack_meta_t *e = &blk->mem[slot][i];
      assert_int_equal(tu_check(dst + e->dst_off, e->len, 1000 + k, e->src_off), SIZE_MAX);
    }
    free(dst);
  }
  free(bounce);
  free(blk);
}

static void test_names(void **state) {
  (void)state;
  int v = -1;
  assert_int_equal(tpx__unpacker_mode_parse("kernel", &v), 0);
  assert_int_equal(v, TPX_UNPACK_KERNEL);
  assert_int_equal(tpx__unpacker_mode_parse("D2D", &v), 0);
  assert_int_equal(v, TPX_UNPACK_D2D);
  assert_int_equal(tpx__unpacker_mode_parse("host", &v), 0);
  assert_int_equal(v, TPX_UNPACK_HOST);
  assert_int_equal(tpx__unpacker_mode_parse("gpu", &v), TPX_EINVAL);
  assert_int_equal(tpx__unpacker_mode_parse(NULL, &v), TPX_EINVAL);
  assert_string_equal(tpx__unpacker_mode_name(TPX_UNPACK_D2D), "d2d");
  assert_string_equal(tpx__unpacker_mode_name(9), "?");
  assert_int_equal(tpx__unpacker_desc_parse("mapped", &v), 0);
  assert_int_equal(v, TPX_UNPACK_DESC_MAPPED);
  assert_int_equal(tpx__unpacker_desc_parse("direct", &v), 0);
  assert_int_equal(v, TPX_UNPACK_DESC_DIRECT);
  assert_int_equal(tpx__unpacker_desc_parse("PARAM", &v), 0);
  assert_int_equal(v, TPX_UNPACK_DESC_PARAM);
  assert_string_equal(tpx__unpacker_desc_name(TPX_UNPACK_DESC_PARAM), "param");
  assert_int_equal(tpx__unpacker_desc_parse("zero", &v), TPX_EINVAL);
  assert_string_equal(tpx__unpacker_desc_name(TPX_UNPACK_DESC_COPY), "copy");
  tpx_unpack_opts_t o;
  tpx__unpacker_opts_default(&o);
  assert_int_equal(o.mode, TPX_UNPACK_KERNEL);
  assert_int_equal(o.max_frags, TPX_UNPACK_MAX_FRAGS);
  assert_int_equal(o.desc, TPX_UNPACK_DESC_DEFAULT);
  assert_true(o.nstreams >= 1 && o.nstreams <= TPX_UNPACK_MAX_STREAMS);
}

/* Host pointers are host pointers in every build; without a GPU (or without
 * CUDA support) the GPU entry points refuse cleanly instead of crashing. */
static void test_gpu_layer_without_gpu(void **state) {
  (void)state;
  char *h = malloc(64);
  assert_non_null(h);
  int dev = 7;
  assert_false(tpx__gpu_is_device_ptr(h, &dev));
  assert_int_equal(dev, -1);
  assert_false(tpx__gpu_is_device_ptr(NULL, NULL));
  tpx_gpu_ptr_info_t info;
  int rc = tpx__gpu_ptr_query(h, &info);
  assert_true(rc == 0 || rc == TPX_ENOTSUP);
  assert_int_equal(info.mem, TPX_GPU_MEM_HOST);
  free(h);

  int n = -1;
  rc = tpx__gpu_device_count(&n);
  if (!tpx__gpu_built()) {
    assert_int_equal(rc, TPX_ENOTSUP);
    assert_int_equal(n, 0);
  } else {
    assert_int_equal(rc, 0);
    assert_true(n >= 0);
  }
  assert_int_equal(tpx__gpu_ctx_retained(), 0);
  if (n > 0) return; /* a GPU host: the GPU tests cover the rest */
  assert_int_equal(tpx__gpu_retain(0), TPX_ENOTSUP);
  assert_int_equal(tpx__gpu_release(0), TPX_ENOTSUP);
  assert_int_equal(tpx__gpu_ctx_refs(0), 0);
  assert_int_equal(tpx__gpu_ctx_retained(), 0);
  void *p = (void *)1;
  assert_int_equal(tpx__gpu_malloc(0, 4096, &p), TPX_ENOTSUP);
  assert_null(p);
  p = (void *)1;
  assert_int_equal(tpx__gpu_host_alloc(0, 4096, &p), TPX_ENOTSUP);
  assert_null(p);
  tpx_gpu_stream_t *s = (void *)1;
  assert_int_equal(tpx__gpu_stream_create(0, &s), TPX_ENOTSUP);
  assert_null(s);
  tpx_gpu_evpool_t *pool = (void *)1;
  assert_int_equal(tpx__gpu_evpool_create(0, 4, &pool), TPX_ENOTSUP);
  assert_null(pool);
  tpx_unpacker_t *u = (void *)1;
  assert_int_equal(tpx__unpacker_create(0, NULL, &u), TPX_ENOTSUP);
  assert_null(u);
  tpx__gpu_stream_destroy(NULL);
  tpx__gpu_evpool_destroy(NULL);
  tpx__unpacker_destroy(NULL);
  assert_int_equal(tpx__gpu_ctx_retained(), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_scatter_shuffled),  cmocka_unit_test(test_scatter_with_gaps),
      cmocka_unit_test(test_contiguous_runs),   cmocka_unit_test(test_validation),
      cmocka_unit_test(test_meta_block_slots),  cmocka_unit_test(test_names),
      cmocka_unit_test(test_gpu_layer_without_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
