/* Data integrity (src/engine/integrity.h): every chunk's CRC-32C checked by
 * its receiver before it counts as landed.
 *
 * The fault injector is this program's own recvmsg() (tests/util/
 * flip_inject.h), which the library's data path calls instead of libc's:
 * while armed it flips one bit of the chunk bytes of every n-th read after
 * the kernel handed them over, as a NIC, a middlebox or a bad DIMM would. For every
 * transfer the test knows whether a bit was flipped in it, and asserts that
 * a flipped transfer fails with TPX_EINTEGRITY on the side that received the
 * data (and delivers no notification), while an untouched one lands every
 * byte: 100% of injected corruptions detected, no wrong byte acknowledged.
 * Across sizes (one chunk, many, not a multiple), write / read / send, the
 * packed small-entry path, data riding in the control message (its own
 * recv() flips those), and with a peer that does not check (interop).
 * Registered in the default, strict and unpack modes (bounce pages: the
 * check after the CPU gather). */
#define _GNU_SOURCE
#include <dlfcn.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "eng.h"
#include "engine/core.h"
#include "flip_inject.h"

/* The control connection's reads (recv): while armed, one bit flipped in
 * the first run of 64 MARK bytes a read brings, which only a transfer's
 * inline data holds (control frames carry it whole). */
#define MARK 0xa5
static atomic_int flip_inline;
static atomic_uint inline_flips;
typedef ssize_t (*recv_fn)(int, void *, size_t, int);

ssize_t recv(int fd, void *buf, size_t len, int flags) {
  static _Atomic(recv_fn) real; /* every thread may come first */
  recv_fn f = atomic_load(&real);
  if (!f) atomic_store(&real, f = (recv_fn)dlsym(RTLD_NEXT, "recv"));
  ssize_t n = f(fd, buf, len, flags);
  if (n < 64 || !atomic_load(&flip_inline)) return n;
  uint8_t *b = buf;
  for (ssize_t i = 0, run = 0; i < n; i++) {
    run = b[i] == MARK ? run + 1 : 0;
    if (run == 64) {
      b[i - 32] ^= 0x10;
      atomic_fetch_add(&inline_flips, 1);
      atomic_store(&flip_inline, 0); /* one per transfer */
      break;
    }
  }
  return n;
}

static void pair(eng_pair_t *P, int integrity_a, int integrity_b) {
  tpx_config_t ca, cb;
  eng_cfg(&ca);
  ca.chunk_bytes = 64 << 10; /* many chunks, many boundaries */
  ca.num_channels = 2;
  ca.inline_bytes = 0; /* every byte through the transport */
  ca.integrity_threads =
      2; /* large chunks summed on the checksum threads, whatever the CPU count */
  cb = ca;
  ca.integrity = integrity_a;
  cb.integrity = integrity_b;
  eng_pair_open2(P, &ca, &cb, -1);
}

static const size_t sizes[] = {1, 4096, (64 << 10) + 3, 1 << 20, (3 << 20) + 4097};
enum { K_W, K_R, K_S };

/* One transfer of len bytes of kind, flipping every `every`-th data read (0:
 * none). Returns 1 when a bit was flipped in it (it failed as it must), 0
 * when it landed untouched. */
static int one(eng_pair_t *P, int kind, size_t len, int every, uint32_t seed) {
  eng_buf_t a, b;
  eng_buf(P->a, len, TPX_ACCESS_WRITE | TPX_ACCESS_READ, &a);
  eng_buf(P->b, len, TPX_ACCESS_WRITE | TPX_ACCESS_READ, &b);
  uint8_t *src = kind == K_R ? b.p : a.p, *dst = kind == K_R ? a.p : b.p;
  tu_fill(src, len, seed, 0);
  memset(dst, 0, len);
  tpx_xfer_t *x = NULL, *rx = NULL;
  unsigned before = atomic_load(&flips);
  atomic_store(&flip_every, every);
  if (kind == K_W) {
    assert_int_equal(tpx_write(P->ab, a.mem, 0, b.rmem, 0, len, "w", 1, &x), 0);
  } else if (kind == K_R) {
    assert_int_equal(tpx_read(P->ab, a.mem, 0, b.rmem, 0, len, &x), 0);
  } else {
    assert_int_equal(tpx_recv(P->ba, b.mem, 0, len, 7, &rx), 0);
    assert_int_equal(tpx_send(P->ab, a.mem, 0, len, 7, &x), 0);
  }
  tpx_xfer_t *data =
      kind == K_S ? rx : x; /* the side whose transfer the receiver's verdict reaches */
  int rc = tpx_xfer_wait(data, 60000);
  char why[512];
  snprintf(why, sizeof(why), "%s", rc ? tpx_last_error() : "");
  if (kind == K_S) assert_int_equal(tpx_xfer_wait(x, 60000), 0); /* the sender did its part */
  atomic_store(&flip_every, 0);
  int flipped = atomic_load(&flips) != before;
  if (flipped) {
    if (rc != TPX_EINTEGRITY)
      fail_msg("%s of %zu bytes with a flipped bit: got %d (%s), expected TPX_EINTEGRITY",
               kind == K_W   ? "write"
               : kind == K_R ? "read"
                             : "send",
               len, rc, tpx_strerror(rc));
    if (!strstr(why, "chunk")) fail_msg("the error names no chunk: %s", why);
  } else {
    if (rc != 0)
      fail_msg("untouched transfer of %zu bytes: %d (%s): %s", len, rc, tpx_strerror(rc),
               tpx_last_error());
    size_t bad = tu_check(dst, len, seed, 0);
    if (bad != SIZE_MAX) fail_msg("%zu bytes: byte %zu differs", len, bad);
  }
  if (kind == K_W) { /* a failed write's notification is never delivered */
    tpx_notif_t nt;
    int got = tpx_wait_notif(P->b, flipped ? 200 : 20000, &nt);
    assert_int_equal(got, flipped ? 0 : 1);
  }
  tpx_xfer_free(x);
  tpx_xfer_free(rx);
  eng_buf_free(&a);
  eng_buf_free(&b);
  return flipped;
}

/* Both sides check; nothing flipped: every kind and size lands. */
static void test_clean(void **st) {
  (void)st;
  eng_pair_t P;
  pair(&P, 1, 1);
  assert_true(((struct tpx_peer *)P.ab)->sum && ((struct tpx_peer *)P.ba)->sum);
  for (int k = K_W; k <= K_S; k++)
    for (size_t i = 0; i < TPX_ARRAY_LEN(sizes); i++)
      assert_int_equal(one(&P, k, sizes[i], 0, (uint32_t)(k * 10 + i)), 0);
  eng_pair_close(&P);
}

/* Flips in flight: each flipped transfer fails, the others land, and the
 * peer goes on (later transfers succeed). */
static void test_flips_detected(void **st) {
  (void)st;
  eng_pair_t P;
  pair(&P, 1, 1);
  int flipped = 0, total = 0;
  for (int round = 0; round < 3; round++)
    for (int k = K_W; k <= K_S; k++)
      for (size_t i = 0; i < TPX_ARRAY_LEN(sizes); i++) {
        flipped += one(&P, k, sizes[i], 2 + round, (uint32_t)(round * 100 + k * 10 + i));
        total++;
      }
  print_message("integrity: %d of %d transfers had a bit flipped in flight, each failed with "
                "TPX_EINTEGRITY\n",
                flipped, total);
  assert_true(flipped >= 10);
  for (int k = K_W; k <= K_S; k++)
    assert_int_equal(one(&P, k, 1 << 20, 0, 99), 0); /* the peer goes on */
  eng_pair_close(&P);
}

/* The packed small-entry path: many small blocks of one write share chunks,
 * gathered on the sender and scattered on the receiver. */
static void test_packed_flips(void **st) {
  (void)st;
  eng_pair_t P;
  pair(&P, 1, 1);
  enum { N = 300, SZ = 700 };
  eng_buf_t a, b;
  eng_buf(P.a, N * SZ, 0, &a);
  eng_buf(P.b, N * SZ * 2, TPX_ACCESS_WRITE, &b);
  tpx_iov_t v[N];
  for (int i = 0; i < N; i++)
    v[i] = (tpx_iov_t){a.mem, (size_t)i * SZ, b.rmem, (uint64_t)i * SZ * 2, SZ};
  int flipped = 0;
  for (int round = 0; round < 8; round++) {
    tu_fill(a.p, a.len, (uint32_t)round, 0);
    memset(b.p, 0, b.len);
    unsigned before = atomic_load(&flips);
    atomic_store(&flip_every, round % 2 ? 3 : 0);
    tpx_xfer_t *x;
    assert_int_equal(tpx_xfer_prep_write(P.ab, v, N, NULL, 0, &x), 0);
    assert_int_equal(tpx_xfer_post(x), 0);
    int rc = tpx_xfer_wait(x, 60000);
    atomic_store(&flip_every, 0);
    if (atomic_load(&flips) != before) {
      assert_int_equal(rc, TPX_EINTEGRITY);
      flipped++;
    } else {
      assert_int_equal(rc, 0);
      for (int i = 0; i < N; i++)
        assert_int_equal(tu_check(b.p + (size_t)i * SZ * 2, SZ, (uint32_t)round, (size_t)i * SZ),
                         SIZE_MAX);
    }
    tpx_xfer_free(x);
  }
  assert_true(flipped >= 2);
  eng_buf_free(&a);
  eng_buf_free(&b);
  eng_pair_close(&P);
}

/* Data small enough to ride in the control message (TPX_INLINE_BYTES)
 * carries its CRC-32C there: a bit flipped in it fails the transfer the
 * same way, and nothing of it lands. */
static void test_inline_flips(void **st) {
  (void)st;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  cfg.inline_bytes = 16384;
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  const size_t len = 8192;
  for (int k = K_W; k <= K_S; k++)
    for (int flip = 0; flip < 2; flip++) {
      eng_buf_t a, b;
      eng_buf(P.a, len, TPX_ACCESS_WRITE | TPX_ACCESS_READ, &a);
      eng_buf(P.b, len, TPX_ACCESS_WRITE | TPX_ACCESS_READ, &b);
      uint8_t *src = k == K_R ? b.p : a.p, *dst = k == K_R ? a.p : b.p;
      memset(src, MARK, len);
      memset(dst, 0, len);
      unsigned before = atomic_load(&inline_flips);
      atomic_store(&flip_inline, flip);
      tpx_xfer_t *x = NULL, *rx = NULL;
      if (k == K_W)
        assert_int_equal(tpx_write(P.ab, a.mem, 0, b.rmem, 0, len, "w", 1, &x), 0);
      else if (k == K_R)
        assert_int_equal(tpx_read(P.ab, a.mem, 0, b.rmem, 0, len, &x), 0);
      else {
        assert_int_equal(tpx_recv(P.ba, b.mem, 0, len, 9, &rx), 0);
        assert_int_equal(tpx_send(P.ab, a.mem, 0, len, 9, &x), 0);
      }
      int rc = tpx_xfer_wait(k == K_S ? rx : x, 30000);
      atomic_store(&flip_inline, 0);
      if (k == K_S) assert_int_equal(tpx_xfer_wait(x, 30000), 0);
      if (atomic_load(&inline_flips) != before) {
        assert_int_equal(rc, TPX_EINTEGRITY);
        for (size_t i = 0; i < len; i++)
          assert_int_equal(dst[i], 0); /* nothing landed */
      } else {
        assert_int_equal(flip, 0);
        assert_int_equal(rc, 0);
        for (size_t i = 0; i < len; i++)
          assert_int_equal(dst[i], MARK);
      }
      tpx_xfer_free(x);
      tpx_xfer_free(rx);
      eng_buf_free(&a);
      eng_buf_free(&b);
    }
  assert_true(atomic_load(&inline_flips) == 3); /* one in each kind's flipped round */
  eng_pair_close(&P);
}

/* A side with TPX_INTEGRITY=0 (as an older peer) and one with it: nothing
 * is checked, everything lands. */
static void test_interop(void **st) {
  (void)st;
  for (int side = 0; side < 2; side++) {
    eng_pair_t P;
    pair(&P, side, !side);
    assert_false(((struct tpx_peer *)P.ab)->sum || ((struct tpx_peer *)P.ba)->sum);
    for (int k = K_W; k <= K_S; k++)
      assert_int_equal(one(&P, k, (1 << 20) + 5, 0, (uint32_t)(side * 10 + k)), 0);
    eng_pair_close(&P);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_clean),        cmocka_unit_test(test_flips_detected),
      cmocka_unit_test(test_packed_flips), cmocka_unit_test(test_inline_flips),
      cmocka_unit_test(test_interop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
