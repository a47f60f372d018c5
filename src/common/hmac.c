/* Keyed MACs and nonces through libcrypto (hmac.h). */
#include "common/hmac.h"

#include <openssl/core_names.h>
#include <openssl/crypto.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/params.h>
#include <openssl/rand.h>

#include "common/error.h"

static int crypto_fail(const char *what) {
  char why[160];
  ERR_error_string_n(ERR_get_error(), why, sizeof(why));
  ERR_clear_error();
  return tpx_err_quiet(TPX_EINTERNAL, "libcrypto: %s failed: %s", what, why);
}

int tpx__hmac(const uint8_t *key, size_t key_len, const struct tpx_mac_part *parts, int nparts,
              uint8_t out[TPX_MAC_BYTES]) {
  EVP_MAC *mac = EVP_MAC_fetch(NULL, "HMAC", NULL);
  if (!mac) return crypto_fail("EVP_MAC_fetch(HMAC)");
  EVP_MAC_CTX *ctx = EVP_MAC_CTX_new(mac);
  EVP_MAC_free(mac);
  if (!ctx) return crypto_fail("EVP_MAC_CTX_new");
  char digest[] = "SHA256";
  OSSL_PARAM params[] = {OSSL_PARAM_construct_utf8_string(OSSL_MAC_PARAM_DIGEST, digest, 0),
                         OSSL_PARAM_construct_end()};
  int rc = 0;
  if (EVP_MAC_init(ctx, key, key_len, params) != 1) rc = crypto_fail("EVP_MAC_init");
  for (int i = 0; i < nparts && rc == 0; i++)
    if (parts[i].n && EVP_MAC_update(ctx, parts[i].p, parts[i].n) != 1)
      rc = crypto_fail("EVP_MAC_update");
  size_t len = 0;
  if (rc == 0 && EVP_MAC_final(ctx, out, &len, TPX_MAC_BYTES) != 1)
    rc = crypto_fail("EVP_MAC_final");
  if (rc == 0 && len != TPX_MAC_BYTES)
    rc = tpx_err_quiet(TPX_EINTERNAL, "libcrypto: HMAC-SHA256 gave %zu bytes, not %d", len,
                       TPX_MAC_BYTES);
  EVP_MAC_CTX_free(ctx);
  return rc;
}

int tpx__random_bytes(void *buf, size_t n) {
  if (n > (size_t)INT32_MAX) return tpx_err_quiet(TPX_EINVAL, "random: %zu bytes asked", n);
  if (RAND_bytes(buf, (int)n) != 1) return crypto_fail("RAND_bytes");
  return 0;
}

int tpx__mac_equal(const void *a, const void *b, size_t n) {
  return CRYPTO_memcmp(a, b, n) == 0;
}

void tpx__cleanse(void *p, size_t n) {
  OPENSSL_cleanse(p, n);
}
