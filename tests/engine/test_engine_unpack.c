/* The engine over the built-in transport's unpack mode (TPX_SOCK_UNPACK=1,
 * forced here through the configuration): every receive lands in scattered
 * 4 KiB bounce pages described by loadMeta entries, and the engine's unpack
 * stage must count receives per comm to find their slot (k -> k % 16), read
 * cnt and the entries, gather (with the CPU: host buffers, no GPU needed) and
 * call irecvConsumed strictly in FIFO order (the transport fails anything
 * else). Integrity byte for byte, bytes outside the target untouched, over
 * random sizes, offsets, chunk sizes 4 KiB..4 MiB and channel counts, with
 * many slot wraps per comm. Registered in default and strict mode (unpack
 * mode implies strict rules either way). */
#include <stdlib.h>
#include <string.h>

#include "eng.h"

#define POISON 0xEE

static void unpack_cfg(tpx_config_t *cfg, int channels, size_t chunk) {
  eng_cfg(cfg);
  cfg->sock_unpack = 1;
  cfg->inline_bytes = 0; /* every byte through the transport, none inside control messages */
  cfg->num_channels = channels;
  cfg->chunk_bytes = chunk;
}

static int all_poison(const uint8_t *p, size_t n) {
  static uint8_t poison[4096];
  if (poison[0] != POISON) memset(poison, POISON, sizeof(poison));
  for (size_t i = 0; i < n; i += sizeof(poison)) /* memcmp: quick under TSan too */
    if (memcmp(p + i, poison, n - i < sizeof(poison) ? n - i : sizeof(poison)) != 0) return 0;
  return 1;
}

/* B's side of a write or read (B's transport threads done with B's buffer)
 * reaches this thread through B's notification; the initiator's completion
 * came over TCP, which orders nothing that ThreadSanitizer can see. */
static void b_done(eng_pair_t *P, uint32_t seed) {
  tpx_notif_t nt;
  assert_int_equal(tpx_wait_notif(P->b, 20000, &nt), 1);
  assert_int_equal(nt.len, sizeof(seed));
  assert_memory_equal(nt.msg, &seed, sizeof(seed));
}

static size_t rand_len(size_t max) {
  switch (rand() % 6) {
  case 0: return 0;
  case 1: return 1;
  case 2: return ((size_t)rand() % 8192) | 1; /* odd, around a page */
  case 3: return 4096 * (size_t)(1 + rand() % 16) + (size_t)(rand() % 3) - 1;
  default: return (size_t)((unsigned long)rand() * 7919ul % max) + 1;
  }
}

/* send/recv B -> A and write / read A <-> B at random sizes and offsets. */
static void run_random(int channels, size_t chunk, int rounds, size_t max) {
  tpx_config_t cfg;
  unpack_cfg(&cfg, channels, chunk);
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  assert_int_equal(tpx_peer_num_channels(P.ab), channels);
  const size_t pad = 8192;
  eng_buf_t a, b;
  eng_buf(P.a, max + pad, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &a);
  eng_buf(P.b, max + pad, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &b);
  for (int r = 0; r < rounds; r++) {
    size_t len = rand_len(max);
    size_t so = (size_t)rand() % pad, doff = (size_t)rand() % pad;
    uint32_t seed = (uint32_t)(r * 7 + channels);
    int kind = r % 3;
    tpx_xfer_t *x = NULL, *y = NULL;
    if (kind == 0) { /* send B -> A, the recv a little larger */
      tu_fill(b.p + so, len, seed, 0);
      memset(a.p, POISON, max + pad);
      size_t cap = len + (size_t)(rand() % 64);
      if (doff + cap > max + pad) cap = max + pad - doff;
      assert_int_equal(tpx_recv(P.ab, a.mem, doff, cap, 3, &x), 0);
      assert_int_equal(tpx_send(P.ba, b.mem, so, len, 3, &y), 0);
      eng_wait(y, 0);
      eng_wait(x, 0);
      assert_int_equal(tpx_xfer_received(x), len);
      assert_int_equal(tu_check(a.p + doff, len, seed, 0), SIZE_MAX);
      assert_true(all_poison(a.p, doff));
      assert_true(all_poison(a.p + doff + len, max + pad - doff - len));
    } else if (kind == 1) { /* write A -> B */
      tu_fill(a.p + so, len, seed, 0);
      memset(b.p, POISON, max + pad);
      assert_int_equal(tpx_write(P.ab, a.mem, so, b.rmem, doff, len, &seed, sizeof(seed), &x), 0);
      eng_wait(x, 0);
      b_done(&P, seed);
      assert_int_equal(tu_check(b.p + doff, len, seed, 0), SIZE_MAX);
      assert_true(all_poison(b.p, doff));
      assert_true(all_poison(b.p + doff + len, max + pad - doff - len));
    } else { /* read A <- B */
      tu_fill(b.p + so, len, seed, 0);
      memset(a.p, POISON, max + pad);
      tpx_iov_t v = {a.mem, doff, b.rmem, so, len};
      assert_int_equal(tpx_xfer_prep_read(P.ab, &v, 1, &seed, sizeof(seed), &x), 0);
      assert_int_equal(tpx_xfer_post(x), 0);
      eng_wait(x, 0);
      b_done(&P, seed);
      assert_int_equal(tu_check(a.p + doff, len, seed, 0), SIZE_MAX);
      assert_true(all_poison(a.p, doff));
      assert_true(all_poison(a.p + doff + len, max + pad - doff - len));
    }
    tpx_xfer_free(x);
    tpx_xfer_free(y);
  }
  eng_buf_free(&a);
  eng_buf_free(&b);
  eng_pair_close(&P);
}

static void test_random_small_chunks(void **state) {
  (void)state;
  srand(11);
  run_random(1, 4096, 24, 600 * 1024); /* up to 150 receives per transfer on one comm */
  run_random(3, 4096, 12, 300 * 1024);
}

static void test_random_chunks(void **state) {
  (void)state;
  srand(12);
  static const size_t chunks[] = {64 * 1024, 512 * 1024, 4u << 20};
  for (int i = 0; i < 3; i++) run_random(1 + rand() % 8, chunks[i], 12, 12u << 20);
}

/* One comm, 4 KiB chunks: a 2 MiB write is 512 receives (32 trips round the
 * 16 slots), then 40 small sends whose receives continue the count. */
static void test_slot_wraps(void **state) {
  (void)state;
  tpx_config_t cfg;
  unpack_cfg(&cfg, 1, 4096);
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  size_t n = 2u << 20;
  eng_buf_t a, b;
  eng_buf(P.a, n, 0, &a);
  eng_buf(P.b, n, TPX_ACCESS_WRITE, &b);
  tu_fill(a.p, n, 5, 0);
  memset(b.p, 0, n);
  tpx_xfer_t *x = NULL;
  assert_int_equal(tpx_write(P.ab, a.mem, 0, b.rmem, 0, n, "w", 1, &x), 0);
  eng_wait(x, 0);
  tpx_xfer_free(x);
  tpx_notif_t nt; /* B's bytes once B has the notification (b_done) */
  assert_int_equal(tpx_wait_notif(P.b, 10000, &nt), 1);
  assert_int_equal(tu_check(b.p, n, 5, 0), SIZE_MAX);
  for (int i = 0; i < 40; i++) {
    size_t len = 1 + (size_t)i * 997;
    tpx_xfer_t *r = NULL, *s = NULL;
    tu_fill(a.p, len, 100 + (uint32_t)i, 0);
    memset(b.p, 0, len + 1);
    assert_int_equal(tpx_recv(P.ba, b.mem, 0, len, 9, &r), 0);
    assert_int_equal(tpx_send(P.ab, a.mem, 0, len, 9, &s), 0);
    eng_wait(s, 0);
    eng_wait(r, 0);
    assert_int_equal(tu_check(b.p, len, 100 + (uint32_t)i, 0), SIZE_MAX);
    assert_int_equal(b.p[len], 0);
    tpx_xfer_free(r);
    tpx_xfer_free(s);
  }
  eng_buf_free(&a);
  eng_buf_free(&b);
  eng_pair_close(&P);
}

/* Many transfers in flight on few comms: receives of different transfers
 * interleave on each comm, so FIFO consumption spans transfers. */
static void test_concurrent(void **state) {
  (void)state;
  tpx_config_t cfg;
  unpack_cfg(&cfg, 2, 16384);
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  enum { K = 12 };
  const size_t n = 300 * 1024 + 123;
  eng_buf_t a, b;
  eng_buf(P.a, n * K, 0, &a);
  eng_buf(P.b, n * K, TPX_ACCESS_WRITE, &b);
  tu_fill(a.p, n * K, 21, 0);
  memset(b.p, 0, n * K);
  tpx_xfer_t *x[K];
  for (int i = 0; i < K; i++)
    assert_int_equal(tpx_write(P.ab, a.mem, n * (size_t)i, b.rmem, n * (size_t)(K - 1 - i), n, "c", 1, &x[i]), 0);
  for (int i = 0; i < K; i++) {
    eng_wait(x[i], 0);
    tpx_xfer_free(x[i]);
  }
  for (int i = 0; i < K; i++) { /* B's bytes once B has the notifications (b_done) */
    tpx_notif_t nt;
    assert_int_equal(tpx_wait_notif(P.b, 10000, &nt), 1);
  }
  for (int i = 0; i < K; i++)
    assert_int_equal(tu_check(b.p + n * (size_t)(K - 1 - i), n, 21, n * (size_t)i), SIZE_MAX);
  eng_buf_free(&a);
  eng_buf_free(&b);
  eng_pair_close(&P);
}

/* CUDA registrations without a usable GPU are refused clearly. */
static void test_cuda_refused_without_gpu(void **state) {
  (void)state;
  tpx_config_t cfg;
  unpack_cfg(&cfg, 1, 65536);
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.no_listen = 1;
  tpx_endpoint_t *ep = NULL;
  assert_int_equal(tpx_endpoint_create(&p, &ep), 0);
  static uint8_t buf[8192];
  tpx_mem_desc_t d = {buf, sizeof(buf), TPX_MEM_CUDA, 0, 0};
  tpx_mem_t *m = NULL;
  int rc = tpx_mem_register(ep, &d, &m);
  /* No GPU (CI): not supported. With a GPU: a host pointer is not device memory. */
  assert_true(rc == TPX_ENOTSUP || rc == TPX_EINVAL);
  assert_null(m);
  assert_non_null(strstr(tpx_last_error(), "tpx_mem_register"));
  tpx_endpoint_destroy(ep);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slot_wraps),
      cmocka_unit_test(test_random_small_chunks),
      cmocka_unit_test(test_random_chunks),
      cmocka_unit_test(test_concurrent),
      cmocka_unit_test(test_cuda_refused_without_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
