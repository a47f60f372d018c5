/* CRC-32C (crc32c.h). */
#include "common/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */
#define LANE 2048u       /* bytes per lane of one three-lane round */

static uint32_t table[256];
/* shift by LANE and by 2 * LANE zero bytes, a byte of the register at a time */
static uint32_t sh1[4][256], sh2[4][256];
static int have_hw;
static pthread_once_t once = PTHREAD_ONCE_INIT;

static uint32_t raw_sw(uint32_t c, const uint8_t *p, size_t n) {
  while (n--) c = table[(c ^ *p++) & 0xff] ^ (c >> 8);
  return c;
}

/* op * v over GF(2). */
static uint32_t mat_vec(const uint32_t op[32], uint32_t v) {
  uint32_t r = 0;
  for (int i = 0; v; i++, v >>= 1)
    if (v & 1) r ^= op[i];
  return r;
}

static void mat_sq(uint32_t out[32], const uint32_t a[32]) {
  for (int i = 0; i < 32; i++) out[i] = mat_vec(a, a[i]);
}

void tpx__crc32c_zeros_op(uint64_t n, uint32_t op[32]) {
  uint32_t pw[32], t[32]; /* the one-zero-bit step, squared as n's bits go by */
  pw[0] = POLY;
  for (int i = 1; i < 32; i++) pw[i] = 1u << (i - 1);
  for (int i = 0; i < 32; i++) op[i] = 1u << i;
  for (uint64_t bits = n * 8; bits; bits >>= 1) {
    if (bits & 1)
      for (int i = 0; i < 32; i++) op[i] = mat_vec(pw, op[i]);
    mat_sq(t, pw);
    memcpy(pw, t, sizeof(t));
  }
}

static void shift_tables(uint64_t n, uint32_t out[4][256]) {
  uint32_t op[32];
  tpx__crc32c_zeros_op(n, op);
  for (int k = 0; k < 4; k++)
    for (uint32_t b = 0; b < 256; b++) out[k][b] = mat_vec(op, b << (8 * k));
}

static uint32_t shift(const uint32_t t[4][256], uint32_t c) {
  return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
}

static void init(void) {
  for (uint32_t i = 0; i < 256; i++) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1 ? (c >> 1) ^ POLY : c >> 1;
    table[i] = c;
  }
  shift_tables(LANE, sh1);
  shift_tables(2 * LANE, sh2);
#if defined(__x86_64__)
  __builtin_cpu_init();
  have_hw = __builtin_cpu_supports("sse4.2");
#endif
}

#if defined(__x86_64__)
#include <nmmintrin.h>

__attribute__((target("sse4.2"))) static uint32_t raw_hw(uint32_t c, const uint8_t *p, size_t n) {
  for (; n && ((uintptr_t)p & 7); n--) c = _mm_crc32_u8(c, *p++);
  /* three independent lanes hide the instruction's 3-cycle latency */
  while (n >= 3 * LANE) {
    uint64_t c0 = c, c1 = 0, c2 = 0;
    for (size_t i = 0; i < LANE; i += 8) {
      uint64_t a, b, d;
      memcpy(&a, p + i, 8);
      memcpy(&b, p + LANE + i, 8);
      memcpy(&d, p + 2 * LANE + i, 8);
      c0 = _mm_crc32_u64(c0, a);
      c1 = _mm_crc32_u64(c1, b);
      c2 = _mm_crc32_u64(c2, d);
    }
    c = shift(sh2, (uint32_t)c0) ^ shift(sh1, (uint32_t)c1) ^ (uint32_t)c2;
    p += 3 * LANE;
    n -= 3 * LANE;
  }
  uint64_t c64 = c;
  for (; n >= 8; n -= 8, p += 8) {
    uint64_t v;
    memcpy(&v, p, 8);
    c64 = _mm_crc32_u64(c64, v);
  }
  c = (uint32_t)c64;
  while (n--) c = _mm_crc32_u8(c, *p++);
  return c;
}
#endif

uint32_t tpx__crc32c(uint32_t crc, const void *p, size_t n) {
  (void)pthread_once(&once, init);
  uint32_t c = ~crc;
#if defined(__x86_64__)
  if (have_hw) return ~raw_hw(c, p, n);
#endif
  return ~raw_sw(c, p, n);
}
