/* CRC-32C (crc32c.h). */
#include "common/crc32c.h"

#include <pthread.h>
#include <string.h>

#define POLY 0x82f63b78u /* reflected Castagnoli polynomial */
#define LANE 2048u       /* bytes per lane of one three-lane round */

static uint32_t table[256];
#define POLY_N 0x1edc6f41u /* the same, normal bit order, x^32 implied */
/* shift by LANE and by 2 * LANE zero bytes, a byte of the register at a time */
static uint32_t sh1[4][256], sh2[4][256];
static int have_hw, have_fold;
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

#if defined(__x86_64__)
#include <immintrin.h>
#include <nmmintrin.h>

/* Folding with carry-less multiplies (AVX-512 VPCLMULQDQ), 256 bytes a
 * round: the data's polynomial is reduced modulo P to 128 bits congruent to
 * it, whose CRC the crc32 instruction then takes. Moving a 128-bit block
 * (first half L, second H, reflected) D bits forward is L * (x^(64+D) mod P)
 * + H * (x^D mod P); in the reflected order a product comes out one bit
 * short, hence the constants' exponents one less. */
static __m128i kf[4]; /* D = 2048 (the round), 1536, 1024, 512 */
static __m128i kl[3]; /* D = 384, 256, 128 (the last four lanes into one) */

static uint32_t xpow(uint64_t n) { /* x^n mod P, normal order */
  uint32_t r = 1;
  while (n--) r = r & 0x80000000u ? (r << 1) ^ POLY_N : r << 1;
  return r;
}

static uint64_t rev32(uint32_t v) {
  uint32_t r = 0;
  for (int i = 0; i < 32; i++) r |= ((v >> i) & 1u) << (31 - i);
  return (uint64_t)r << 32;
}

static __m128i fold_k(uint64_t d) {
  return _mm_set_epi64x((long long)rev32(xpow(d - 1)), (long long)rev32(xpow(64 + d - 1)));
}

static void fold_consts(void) {
  const uint64_t df[4] = {2048, 1536, 1024, 512}, dl[3] = {384, 256, 128};
  for (int i = 0; i < 4; i++) kf[i] = fold_k(df[i]);
  for (int i = 0; i < 3; i++) kl[i] = fold_k(dl[i]);
}

__attribute__((target("avx512f,vpclmulqdq"))) static __m512i fold512(__m512i x, __m512i k) {
  return _mm512_xor_si512(_mm512_clmulepi64_epi128(x, k, 0x00), _mm512_clmulepi64_epi128(x, k, 0x11));
}

__attribute__((target("pclmul,sse4.2"))) static __m128i fold128(__m128i x, __m128i k) {
  return _mm_xor_si128(_mm_clmulepi64_si128(x, k, 0x00), _mm_clmulepi64_si128(x, k, 0x11));
}

/* n a multiple of 256, at least 256: the raw register after p[0..n) from c. */
__attribute__((target("avx512f,vpclmulqdq,pclmul,sse4.2"))) static uint32_t raw_fold(uint32_t c, const uint8_t *p,
                                                                                     size_t n) {
  __m512i x0 = _mm512_loadu_si512((const void *)p), x1 = _mm512_loadu_si512((const void *)(p + 64));
  __m512i x2 = _mm512_loadu_si512((const void *)(p + 128)), x3 = _mm512_loadu_si512((const void *)(p + 192));
  x0 = _mm512_xor_si512(x0, _mm512_zextsi128_si512(_mm_cvtsi32_si128((int)c))); /* the state enters the first bits */
  __m512i k = _mm512_broadcast_i32x4(kf[0]);
  for (p += 256, n -= 256; n >= 256; p += 256, n -= 256) {
    x0 = _mm512_xor_si512(fold512(x0, k), _mm512_loadu_si512((const void *)p));
    x1 = _mm512_xor_si512(fold512(x1, k), _mm512_loadu_si512((const void *)(p + 64)));
    x2 = _mm512_xor_si512(fold512(x2, k), _mm512_loadu_si512((const void *)(p + 128)));
    x3 = _mm512_xor_si512(fold512(x3, k), _mm512_loadu_si512((const void *)(p + 192)));
  }
  x3 = _mm512_xor_si512(x3, fold512(x0, _mm512_broadcast_i32x4(kf[1])));
  x3 = _mm512_xor_si512(x3, fold512(x1, _mm512_broadcast_i32x4(kf[2])));
  x3 = _mm512_xor_si512(x3, fold512(x2, _mm512_broadcast_i32x4(kf[3])));
  __m128i r = _mm512_extracti32x4_epi32(x3, 3);
  r = _mm_xor_si128(r, fold128(_mm512_extracti32x4_epi32(x3, 0), kl[0]));
  r = _mm_xor_si128(r, fold128(_mm512_extracti32x4_epi32(x3, 1), kl[1]));
  r = _mm_xor_si128(r, fold128(_mm512_extracti32x4_epi32(x3, 2), kl[2]));
  uint64_t v = _mm_crc32_u64(0, (uint64_t)_mm_cvtsi128_si64(r));
  return (uint32_t)_mm_crc32_u64(v, (uint64_t)_mm_extract_epi64(r, 1));
}

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
  have_fold = have_hw && __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("vpclmulqdq") &&
              __builtin_cpu_supports("pclmul");
  if (have_fold) fold_consts();
#endif
}

static int limit = 2;

int tpx__crc32c_limit(int way) {
  int was = limit;
  limit = way;
  return was;
}

uint32_t tpx__crc32c(uint32_t crc, const void *p, size_t n) {
  (void)pthread_once(&once, init);
  uint32_t c = ~crc;
#if defined(__x86_64__)
  if (have_fold && limit >= 2 && n >= 1024) {
    size_t bulk = n & ~(size_t)255;
    c = raw_fold(c, p, bulk);
    p = (const uint8_t *)p + bulk;
    n -= bulk;
  }
  if (have_hw && limit >= 1) return ~raw_hw(c, p, n);
#endif
  return ~raw_sw(c, p, n);
}

uint32_t tpx__crc32c_pieces(const void *data, uint64_t len, const struct iovec *iov, int nv) {
  if (!nv) return tpx__crc32c(0, data, (size_t)len);
  uint32_t c = 0;
  for (int i = 0; i < nv; i++) c = tpx__crc32c(c, iov[i].iov_base, iov[i].iov_len);
  return c;
}
