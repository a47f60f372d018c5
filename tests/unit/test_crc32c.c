/* CRC-32C (src/common/crc32c.h): the known answers of RFC 3720 (iSCSI)
 * appendix B.4, chaining across any split, and the fast paths (carry-less
 * folding from 1 KiB, three crc32 lanes) against a bit-at-a-time reference
 * over lengths around their boundaries. */
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "testutil.h"

static uint32_t ref(const uint8_t *p, size_t n) {
  uint32_t c = ~0u;
  for (size_t i = 0; i < n; i++) {
    c ^= p[i];
    for (int k = 0; k < 8; k++)
      c = c & 1 ? (c >> 1) ^ 0x82f63b78u : c >> 1;
  }
  return ~c;
}

static void test_known_answers(void **st) {
  (void)st;
  uint8_t b[32];
  assert_int_equal(tpx__crc32c(0, "123456789", 9), 0xe3069283u);
  memset(b, 0, sizeof(b));
  assert_int_equal(tpx__crc32c(0, b, 32), 0x8a9136aau);
  memset(b, 0xff, sizeof(b));
  assert_int_equal(tpx__crc32c(0, b, 32), 0x62a8ab43u);
  for (int i = 0; i < 32; i++)
    b[i] = (uint8_t)i;
  assert_int_equal(tpx__crc32c(0, b, 32), 0x46dd794eu);
  for (int i = 0; i < 32; i++)
    b[i] = (uint8_t)(31 - i);
  assert_int_equal(tpx__crc32c(0, b, 32), 0x113fdb5cu);
  assert_int_equal(tpx__crc32c(0, b, 0), 0);
}

/* Lengths and offsets that cross the 8-byte alignment, the folding's 256-byte
 * rounds and 1 KiB threshold, the 6 KiB three-lane rounds and their tails;
 * every split of a buffer chains to the whole. */
static void test_against_reference(void **st) {
  (void)st;
  for (int way = 2; way >= 0; way--) {
    tpx__crc32c_limit(way);
    size_t n = 3 * 6144 + 77;
    uint8_t *p = malloc(n + 8);
    assert_non_null(p);
    tu_fill(p, n + 8, 42, 0);
    const size_t lens[] = {1,    7,    8,    9,    255,       1023,     1024,         1279,
                           1280, 6143, 6144, 6145, 12288 + 5, 3 * 6144, 3 * 6144 + 77};
    for (size_t off = 0; off < 8; off += 3)
      for (size_t i = 0; i < sizeof(lens) / sizeof(lens[0]); i++)
        assert_int_equal(tpx__crc32c(0, p + off, lens[i]), ref(p + off, lens[i]));
    uint32_t whole = ref(p, n);
    for (size_t cut = 0; cut <= n; cut += 997)
      assert_int_equal(tpx__crc32c(tpx__crc32c(0, p, cut), p + cut, n - cut), whole);
    free(p);
  }
  tpx__crc32c_limit(2);
}

/* The zero-bytes operator combines CRCs of pieces computed apart. */
static void test_zeros_op(void **st) {
  (void)st;
  uint8_t a[100], b[333];
  tu_fill(a, sizeof(a), 1, 0);
  tu_fill(b, sizeof(b), 2, 0);
  uint8_t ab[sizeof(a) + sizeof(b)];
  memcpy(ab, a, sizeof(a));
  memcpy(ab + sizeof(a), b, sizeof(b));
  uint32_t op[32];
  tpx__crc32c_zeros_op(sizeof(b), op);
  /* the inversions cancel: crc(a || b) = op(|b|) * crc(a) ^ crc(b) */
  uint32_t r = tpx__crc32c(0, b, sizeof(b)), v = tpx__crc32c(0, a, sizeof(a));
  for (int i = 0; i < 32; i++)
    if (v >> i & 1) r ^= op[i];
  assert_int_equal(r, tpx__crc32c(0, ab, sizeof(ab)));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_known_answers),
      cmocka_unit_test(test_against_reference),
      cmocka_unit_test(test_zeros_op),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
