/* The byte ring (common/ring.h) both stagers use: contiguous allocations
 * that skip the end instead of straddling it, full rings, FIFO release, the
 * restart of an empty ring, alignment, zero-length allocations, the
 * fit-then-take split, and a randomized run against a model that tracks
 * every live allocation (no two overlap, all inside the buffer). */
#include <stdlib.h>
#include <string.h>

#include "common/ring.h"
#include "tpx/error.h"
#include "testutil.h"

/* Fit, then take when it fits (what both stagers do); returns what fit returned. */
static int ring_alloc(tpx_ring_t *r, uint64_t len, tpx_ring_span_t *sp) {
  int rc = tpx__ring_fit(r, len, sp);
  if (rc == 1) tpx__ring_take(r, sp);
  return rc;
}

static void test_init(void **state) {
  (void)state;
  tpx_ring_t r;
  tpx__ring_init(&r, 1000, 64);
  assert_int_equal(r.size, 960); /* rounded down to the alignment */
  assert_int_equal(tpx__ring_used(&r), 0);
  assert_int_equal(tpx__ring_free(&r), 960);
  tpx__ring_init(&r, 1000, 0); /* 0 = byte granularity */
  assert_int_equal(r.size, 1000);
  assert_int_equal(r.align, 1);
}

static void test_fill_and_full(void **state) {
  (void)state;
  tpx_ring_t r;
  tpx_ring_span_t a, b, c, d;
  tpx__ring_init(&r, 100, 1);
  assert_int_equal(ring_alloc(&r, 40, &a), 1);
  assert_int_equal(a.off, 0);
  assert_int_equal(a.end, 40);
  assert_int_equal(ring_alloc(&r, 40, &b), 1);
  assert_int_equal(b.off, 40);
  assert_int_equal(tpx__ring_used(&r), 80);
  /* 30 bytes: only 20 left before the end, and the start is held. */
  assert_int_equal(ring_alloc(&r, 30, &c), 0);
  assert_int_equal(tpx__ring_used(&r), 80); /* a refusal changes nothing */
  /* 20 fit exactly at the end. */
  assert_int_equal(ring_alloc(&r, 20, &c), 1);
  assert_int_equal(c.off, 80);
  assert_int_equal(tpx__ring_free(&r), 0);
  assert_int_equal(ring_alloc(&r, 1, &d), 0);
  /* More than the ring never fits. */
  assert_int_equal(tpx__ring_fit(&r, 101, &d), TPX_EINVAL);
  assert_int_equal(tpx__ring_fit(&r, UINT64_MAX, &d), TPX_EINVAL);
}

static void test_wrap_skips_the_end(void **state) {
  (void)state;
  tpx_ring_t r;
  tpx_ring_span_t a, b, c;
  tpx__ring_init(&r, 100, 1);
  assert_int_equal(ring_alloc(&r, 60, &a), 1);
  assert_int_equal(ring_alloc(&r, 30, &b), 1); /* [60, 90) */
  tpx__ring_release(&r, a.end);                    /* [0, 60) free again */
  /* 20 bytes do not fit in [90, 100): they go to offset 0, never split. */
  assert_int_equal(ring_alloc(&r, 20, &c), 1);
  assert_int_equal(c.off, 0);
  assert_int_equal(c.start, 100);
  assert_int_equal(c.end, 120);
  /* The skipped tail counts as used: 30 held + 10 skipped + 20. */
  assert_int_equal(tpx__ring_used(&r), 60);
}

/* Precise capacity after a wrap: b = [60, 90) is held, c = [100, 120) taken
 * at offset 0; the room is [20, 60) = 40 bytes. */
static void test_wrap_capacity(void **state) {
  (void)state;
  tpx_ring_t r;
  tpx_ring_span_t a, b, c, d;
  tpx__ring_init(&r, 100, 1);
  assert_int_equal(ring_alloc(&r, 60, &a), 1);
  assert_int_equal(ring_alloc(&r, 30, &b), 1);
  tpx__ring_release(&r, a.end);
  assert_int_equal(ring_alloc(&r, 20, &c), 1);
  assert_int_equal(tpx__ring_fit(&r, 41, &d), 0);
  assert_int_equal(tpx__ring_fit(&r, 40, &d), 1);
  assert_int_equal(d.off, 20);
  /* Releasing b gives back its bytes; the tail skipped before c stays
   * counted until c goes (conservative: [20, 100) is free, 70 fit). */
  tpx__ring_release(&r, b.end);
  assert_int_equal(tpx__ring_used(&r), 30);
  assert_int_equal(tpx__ring_fit(&r, 71, &d), 0);
  assert_int_equal(tpx__ring_fit(&r, 70, &d), 1);
  assert_int_equal(d.off, 20);
  tpx__ring_release(&r, c.end);
  assert_int_equal(tpx__ring_used(&r), 0);
}

static void test_fifo_release(void **state) {
  (void)state;
  tpx_ring_t r;
  tpx_ring_span_t s[4];
  tpx__ring_init(&r, 100, 1);
  for (int i = 0; i < 4; i++) assert_int_equal(ring_alloc(&r, 25, &s[i]), 1);
  assert_int_equal(tpx__ring_free(&r), 0);
  tpx__ring_release(&r, s[0].end);
  assert_int_equal(tpx__ring_used(&r), 75);
  /* Releasing a later end frees everything before it too. */
  tpx__ring_release(&r, s[2].end);
  assert_int_equal(tpx__ring_used(&r), 25);
  /* An older end afterwards, or one never allocated, changes nothing. */
  tpx__ring_release(&r, s[1].end);
  assert_int_equal(tpx__ring_used(&r), 25);
  tpx__ring_release(&r, s[3].end + 1);
  assert_int_equal(tpx__ring_used(&r), 25);
  tpx__ring_release(&r, 0);
  assert_int_equal(tpx__ring_used(&r), 25);
  tpx__ring_release(&r, s[3].end);
  assert_int_equal(tpx__ring_used(&r), 0);
}

/* Once empty, the next allocation starts at offset 0, so any size up to
 * the ring fits even where the last one ended mid-ring. */
static void test_empty_restarts(void **state) {
  (void)state;
  tpx_ring_t r;
  tpx_ring_span_t a, b;
  tpx__ring_init(&r, 100, 1);
  assert_int_equal(ring_alloc(&r, 70, &a), 1);
  tpx__ring_release(&r, a.end);
  assert_int_equal(ring_alloc(&r, 100, &b), 1);
  assert_int_equal(b.off, 0);
  assert_int_equal(b.start, 100);
  assert_int_equal(tpx__ring_used(&r), 100);
  tpx__ring_release(&r, b.end);
  assert_int_equal(tpx__ring_used(&r), 0);
  /* At a multiple of the size it stays put. */
  assert_int_equal(ring_alloc(&r, 10, &a), 1);
  assert_int_equal(a.start, 200);
  assert_int_equal(a.off, 0);
  /* release_all empties it whatever is held. */
  assert_int_equal(ring_alloc(&r, 50, &b), 1);
  tpx__ring_release_all(&r);
  assert_int_equal(tpx__ring_used(&r), 0);
  assert_int_equal(ring_alloc(&r, 100, &b), 1);
  assert_int_equal(b.off, 0);
}

static void test_zero_size(void **state) {
  (void)state;
  tpx_ring_t r;
  tpx_ring_span_t a, z;
  tpx__ring_init(&r, 100, 64);
  assert_int_equal(r.size, 64);
  /* On an empty ring: fits, takes nothing, moves nothing. */
  assert_int_equal(ring_alloc(&r, 0, &z), 1);
  assert_int_equal(z.start, z.end);
  assert_int_equal(r.alloc_pos, 0);
  assert_int_equal(ring_alloc(&r, 64, &a), 1);
  /* On a full ring too. */
  assert_int_equal(tpx__ring_free(&r), 0);
  assert_int_equal(ring_alloc(&r, 0, &z), 1);
  assert_int_equal(z.end, a.end);
  assert_int_equal(tpx__ring_used(&r), 64);
  tpx__ring_release(&r, z.end); /* its end is a's: releases a (FIFO) */
  assert_int_equal(tpx__ring_used(&r), 0);
  /* A ring of size 0 takes only zero-length allocations. */
  tpx__ring_init(&r, 10, 64);
  assert_int_equal(r.size, 0);
  assert_int_equal(tpx__ring_fit(&r, 1, &z), TPX_EINVAL);
  assert_int_equal(tpx__ring_fit(&r, 0, &z), 1);
  assert_int_equal(z.off, 0);
}

static void test_alignment(void **state) {
  (void)state;
  tpx_ring_t r;
  tpx_ring_span_t s;
  tpx__ring_init(&r, 4096, 64);
  uint64_t sizes[] = {1, 63, 64, 65, 500, 1000};
  for (size_t i = 0; i < sizeof sizes / sizeof sizes[0]; i++) {
    int rc = ring_alloc(&r, sizes[i], &s);
    assert_int_equal(rc, 1);
    assert_int_equal(s.off % 64, 0);
    assert_int_equal((s.end - s.start) % 64, 0);
    assert_true(s.end - s.start >= sizes[i]);
  }
  assert_int_equal(tpx__ring_used(&r), 64 + 64 + 64 + 128 + 512 + 1024);
  /* Rounded up past the size never fits. */
  tpx__ring_init(&r, 128, 64);
  assert_int_equal(tpx__ring_fit(&r, 129, &s), TPX_EINVAL);
  assert_int_equal(tpx__ring_fit(&r, 128, &s), 1);
}

/* The engine's receive side picks the space when it posts and takes it
 * once the post succeeded; releases may come in between. */
static void test_fit_then_take(void **state) {
  (void)state;
  tpx_ring_t r;
  tpx_ring_span_t a, b;
  tpx__ring_init(&r, 100, 1);
  assert_int_equal(ring_alloc(&r, 90, &a), 1);
  assert_int_equal(tpx__ring_fit(&r, 50, &b), 0);
  tpx__ring_release(&r, a.end);
  assert_int_equal(tpx__ring_fit(&r, 50, &b), 1); /* empty: restarts at 0 */
  assert_int_equal(b.off, 0);
  assert_int_equal(r.alloc_pos, 90); /* fit alone takes nothing */
  tpx__ring_take(&r, &b);
  assert_int_equal(tpx__ring_used(&r), 50);
  /* Fit while not empty, then the older allocation goes before the take. */
  tpx_ring_span_t c;
  assert_int_equal(tpx__ring_fit(&r, 30, &c), 1);
  assert_int_equal(c.off, 50);
  tpx__ring_release(&r, b.end);
  tpx__ring_take(&r, &c);
  assert_int_equal(tpx__ring_used(&r), 30);
  tpx__ring_release(&r, c.end);
  assert_int_equal(tpx__ring_used(&r), 0);
}

/* Random allocations and FIFO releases against a model: every live span
 * lies inside the buffer, no two overlap, used() never exceeds the size, and
 * an allocation refused (0) really had no contiguous room. */
static void test_random_model(void **state) {
  (void)state;
  enum { SIZE = 1000, MAXLIVE = 64 };
  uint64_t x = 12345;
  for (uint64_t align = 1; align <= 8; align *= 8) {
    tpx_ring_t r;
    tpx__ring_init(&r, SIZE, align);
    tpx_ring_span_t live[MAXLIVE];
    int head = 0, n = 0;
    for (int step = 0; step < 200000; step++) {
      x ^= x << 13, x ^= x >> 7, x ^= x << 17;
      if (n > 0 && (n == MAXLIVE || x % 3 == 0)) {
        tpx__ring_release(&r, live[head].end);
        head = (head + 1) % MAXLIVE;
        n--;
        continue;
      }
      uint64_t want = (x >> 8) % 400;
      tpx_ring_span_t s;
      int rc = ring_alloc(&r, want, &s);
      assert_int_equal(rc == -1, 0);
      if (rc == 0) {
        /* Refused only while something is held (an empty ring takes
         * anything up to its size). */
        assert_true(tpx__ring_used(&r) > 0);
        continue;
      }
      assert_true(s.off + (s.end - s.start) <= r.size);
      assert_int_equal(s.off % align, 0);
      assert_true(tpx__ring_used(&r) <= r.size);
      if (s.end == s.start) continue; /* zero-length: nothing to track */
      for (int i = 0, j = head; i < n; i++, j = (j + 1) % MAXLIVE) {
        if (live[j].end == live[j].start) continue;
        uint64_t a0 = live[j].off, a1 = a0 + (live[j].end - live[j].start);
        uint64_t b0 = s.off, b1 = b0 + (s.end - s.start);
        assert_true(b1 <= a0 || a1 <= b0);
      }
      int slot = (head + n) % MAXLIVE;
      live[slot] = s;
      n++;
    }
    while (n > 0) {
      tpx__ring_release(&r, live[head].end);
      head = (head + 1) % MAXLIVE;
      n--;
    }
    assert_int_equal(tpx__ring_used(&r), 0);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_init),
      cmocka_unit_test(test_fill_and_full),
      cmocka_unit_test(test_wrap_skips_the_end),
      cmocka_unit_test(test_wrap_capacity),
      cmocka_unit_test(test_fifo_release),
      cmocka_unit_test(test_empty_restarts),
      cmocka_unit_test(test_zero_size),
      cmocka_unit_test(test_alignment),
      cmocka_unit_test(test_fit_then_take),
      cmocka_unit_test(test_random_model),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
