/* Known answers for TPX_ENCRYPT's primitives (common/aead.h): AES-256-GCM
 * from the GCM specification's test vectors (McGrew and Viega, the 256-bit
 * cases 13, 14 and 16, as NIST's validation suite has them), HKDF-SHA256
 * from RFC 5869 (cases 1 and 3); a flipped bit of ciphertext, tag or aad,
 * or another nonce, fails to open. */
#include <stdio.h>
#include <string.h>

#include "testutil.h"
#include "common/aead.h"
#include "tpx/error.h"

static size_t unhex(const char *s, uint8_t *out) {
  size_t n = 0;
  for (; s[0] && s[1]; s += 2) {
    unsigned v;
    assert_int_equal(sscanf(s, "%2x", &v), 1);
    out[n++] = (uint8_t)v;
  }
  return n;
}

struct gcm_case {
  const char *key, *iv, *pt, *aad, *ct, *tag;
};

static const struct gcm_case gcm[] = {
    /* 13: empty plaintext */
    {"0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000", "", "",
     "", "530f8afbc74536b9a963b4f1c4cb738b"},
    /* 14: one block of zeros */
    {"0000000000000000000000000000000000000000000000000000000000000000", "000000000000000000000000",
     "00000000000000000000000000000000", "", "cea7403d4d606b6e074ec5d3baf39d18",
     "d0d1c8a799996bf0265b98b5d48ab919"},
    /* 16: 60 bytes with 20 bytes of aad */
    {"feffe9928665731c6d6a8f9467308308feffe9928665731c6d6a8f9467308308", "cafebabefacedbaddecaf888",
     "d9313225f88406e5a55909c5aff5269a86a7a9531534f7da2e4c303d8a318a721c3c0c95956809532fcf0e2449a6b525b16aedf5aa0de657ba637b39",
     "feedfacedeadbeeffeedfacedeadbeefabaddad2",
     "522dc1f099567d07f47f37a32a84427d643a8cdcbfe5c0c97598a2bd2555d1aa8cb08e48590dbb3da7b08b1056828838c5f61e6393ba7a0abcc9f662",
     "76fc6ece0f4e1768cddf8853bb2d551b"},
};

static void test_gcm_vectors(void **state) {
  (void)state;
  for (size_t i = 0; i < sizeof(gcm) / sizeof(gcm[0]); i++) {
    uint8_t key[32], iv[12], pt[64], aad[32], ct[64], tag[16], out[64], got_tag[16], back[128];
    assert_int_equal(unhex(gcm[i].key, key), 32);
    assert_int_equal(unhex(gcm[i].iv, iv), 12);
    size_t n = unhex(gcm[i].pt, pt), na = unhex(gcm[i].aad, aad);
    assert_int_equal(unhex(gcm[i].ct, ct), n);
    assert_int_equal(unhex(gcm[i].tag, tag), 16);
    tpx_aead_t s, o;
    assert_int_equal(tpx__aead_init(&s, key, 1), 0);
    assert_int_equal(tpx__aead_init(&o, key, 0), 0);
    /* the plaintext in two pieces: a record's part header and its bytes */
    size_t cut = n / 3;
    struct iovec iov[2] = {{pt, cut}, {pt + cut, n - cut}};
    assert_int_equal(tpx__aead_seal(&s, iv, aad, na, iov, 2, out, got_tag), 0);
    assert_memory_equal(out, ct, n);
    assert_memory_equal(got_tag, tag, 16);
    /* open in place */
    memcpy(back, ct, n);
    struct iovec in_place = {back, n};
    assert_int_equal(tpx__aead_open(&o, iv, aad, na, back, n, &in_place, 1, tag), 0);
    assert_memory_equal(back, pt, n);
    /* into two pieces elsewhere */
    memset(back, 0, sizeof(back));
    struct iovec two[2] = {{back, n - cut}, {back + 64, 32}};
    assert_int_equal(tpx__aead_open(&o, iv, aad, na, ct, n, two, 2, tag), 0);
    assert_memory_equal(back, pt, n - cut);
    assert_memory_equal(back + 64, pt + n - cut, cut);
    struct iovec whole = {back, n};
    /* tampering: ciphertext, tag, aad, nonce */
    if (n) {
      memcpy(back, ct, n);
      back[n / 2] ^= 0x01;
      assert_int_equal(tpx__aead_open(&o, iv, aad, na, back, n, &whole, 1, tag), TPX_EAUTH);
    }
    uint8_t bad[16];
    memcpy(bad, tag, 16);
    bad[15] ^= 0x80;
    assert_int_equal(tpx__aead_open(&o, iv, aad, na, ct, n, &whole, 1, bad), TPX_EAUTH);
    if (na) {
      aad[0] ^= 1;
      assert_int_equal(tpx__aead_open(&o, iv, aad, na, ct, n, &whole, 1, tag), TPX_EAUTH);
      aad[0] ^= 1;
    }
    iv[11] ^= 1;
    assert_int_equal(tpx__aead_open(&o, iv, aad, na, ct, n, &whole, 1, tag), TPX_EAUTH);
    /* a context keeps working after a failure, and after a rekey */
    iv[11] ^= 1;
    assert_int_equal(tpx__aead_open(&o, iv, aad, na, ct, n, &whole, 1, tag), 0);
    assert_int_equal(tpx__aead_rekey(&o, key), 0);
    assert_int_equal(tpx__aead_open(&o, iv, aad, na, ct, n, &whole, 1, tag), 0);
    tpx__aead_fini(&s);
    tpx__aead_fini(&o);
  }
}

static void test_hkdf_vectors(void **state) {
  (void)state;
  uint8_t ikm[22], salt[13], info[10], okm[42], want[42];
  memset(ikm, 0x0b, sizeof(ikm));
  for (int i = 0; i < 13; i++) salt[i] = (uint8_t)i;
  for (int i = 0; i < 10; i++) info[i] = (uint8_t)(0xf0 + i);
  /* RFC 5869 A.1 */
  assert_int_equal(tpx__hkdf_sha256(ikm, 22, salt, 13, info, 10, okm, 42), 0);
  unhex("3cb25f25faacd57a90434f64d0362f2a2d2d0a90cf1a5a4c5db02d56ecc4c5bf34007208d5b887185865", want);
  assert_memory_equal(okm, want, 42);
  /* RFC 5869 A.3: no salt, no info */
  assert_int_equal(tpx__hkdf_sha256(ikm, 22, NULL, 0, NULL, 0, okm, 42), 0);
  unhex("8da4e775a563c18f715f802a063c5a31b8a11f5c5ee1879ec3454e5f3c738d2d9d201395faa4b61a96c8", want);
  assert_memory_equal(okm, want, 42);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_gcm_vectors),
      cmocka_unit_test(test_hkdf_vectors),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
