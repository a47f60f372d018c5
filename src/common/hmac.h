/* Keyed MACs, random nonces and constant-time compares for the optional
 * shared-key authentication (docs/SECURITY.md), all from OpenSSL's libcrypto:
 * no cryptography is written here. Errors are returned with tpx_err_quiet's
 * detail; the caller decides and reports. */
#ifndef TPX_COMMON_HMAC_H
#define TPX_COMMON_HMAC_H

#include <stddef.h>
#include <stdint.h>

#define TPX_MAC_BYTES 32 /* HMAC-SHA256 */

struct tpx_mac_part {
  const void *p;
  size_t n;
};

/* HMAC-SHA256(key, part[0] | part[1] | ...) into out. 0 or TPX_EINTERNAL. */
int tpx__hmac(const uint8_t *key, size_t key_len, const struct tpx_mac_part *parts, int nparts,
              uint8_t out[TPX_MAC_BYTES]);
/* n bytes from the CSPRNG (RAND_bytes). 0 or TPX_EINTERNAL. */
int tpx__random_bytes(void *buf, size_t n);
/* 1 when the n bytes are equal, compared in constant time (CRYPTO_memcmp). */
int tpx__mac_equal(const void *a, const void *b, size_t n);
/* Zero secrets so that the compiler keeps the stores (OPENSSL_cleanse). */
void tpx__cleanse(void *p, size_t n);

#endif
