/* AES-256-GCM and HKDF-SHA256 through libcrypto (aead.h). */
#include "common/aead.h"

#include <limits.h>
#include <string.h>
#include <openssl/core_names.h>
#include <openssl/err.h>
#include <openssl/evp.h>
#include <openssl/kdf.h>
#include <openssl/params.h>

#include "common/error.h"
#include "common/hmac.h"
#include "common/le.h"

static int crypto_fail(const char *what) {
  char why[160];
  ERR_error_string_n(ERR_get_error(), why, sizeof(why));
  ERR_clear_error();
  return tpx_err_quiet(TPX_EINTERNAL, "libcrypto: %s failed: %s", what, why);
}

int tpx__hkdf_sha256(const uint8_t *ikm, size_t ikm_len, const uint8_t *salt, size_t salt_len,
                     const uint8_t *info, size_t info_len, uint8_t *out, size_t out_len) {
  EVP_KDF *kdf = EVP_KDF_fetch(NULL, "HKDF", NULL);
  if (!kdf) return crypto_fail("EVP_KDF_fetch(HKDF)");
  EVP_KDF_CTX *ctx = EVP_KDF_CTX_new(kdf);
  EVP_KDF_free(kdf);
  if (!ctx) return crypto_fail("EVP_KDF_CTX_new");
  char digest[] = "SHA256";
  OSSL_PARAM params[5];
  int n = 0;
  params[n++] = OSSL_PARAM_construct_utf8_string(OSSL_KDF_PARAM_DIGEST, digest, 0);
  params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_KEY, (void *)ikm, ikm_len);
  if (salt_len) params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_SALT, (void *)salt, salt_len);
  if (info_len) params[n++] = OSSL_PARAM_construct_octet_string(OSSL_KDF_PARAM_INFO, (void *)info, info_len);
  params[n] = OSSL_PARAM_construct_end();
  int rc = EVP_KDF_derive(ctx, out, out_len, params) == 1 ? 0 : crypto_fail("HKDF-SHA256");
  EVP_KDF_CTX_free(ctx);
  return rc;
}

int tpx__aead_init(tpx_aead_t *a, const uint8_t key[TPX_AEAD_KEY_BYTES], int enc) {
  a->enc = enc;
  EVP_CIPHER_CTX *c = EVP_CIPHER_CTX_new();
  a->ctx = c;
  if (!c) return crypto_fail("EVP_CIPHER_CTX_new");
  int ok = enc ? EVP_EncryptInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL)
               : EVP_DecryptInit_ex(c, EVP_aes_256_gcm(), NULL, NULL, NULL);
  if (ok != 1) return crypto_fail("AES-256-GCM init");
  return tpx__aead_rekey(a, key);
}

int tpx__aead_rekey(tpx_aead_t *a, const uint8_t key[TPX_AEAD_KEY_BYTES]) {
  int ok = a->enc ? EVP_EncryptInit_ex(a->ctx, NULL, NULL, key, NULL)
                  : EVP_DecryptInit_ex(a->ctx, NULL, NULL, key, NULL);
  return ok == 1 ? 0 : crypto_fail("AES-256-GCM key");
}

void tpx__aead_fini(tpx_aead_t *a) {
  EVP_CIPHER_CTX_free(a->ctx); /* cleanses the key schedule */
  a->ctx = NULL;
}

/* EVP takes int lengths: larger pieces go in slices. */
#define SLICE (1 << 30)

int tpx__aead_seal(tpx_aead_t *a, const uint8_t nonce[TPX_AEAD_NONCE_BYTES], const uint8_t *aad,
                   size_t aad_len, const struct iovec *pt, int npt, uint8_t *out,
                   uint8_t tag[TPX_AEAD_TAG_BYTES]) {
  EVP_CIPHER_CTX *c = a->ctx;
  int len = 0;
  if (EVP_EncryptInit_ex(c, NULL, NULL, NULL, nonce) != 1) return crypto_fail("AES-256-GCM nonce");
  if (aad_len && (aad_len > INT_MAX || EVP_EncryptUpdate(c, NULL, &len, aad, (int)aad_len) != 1))
    return crypto_fail("AES-256-GCM aad");
  for (int i = 0; i < npt; i++) {
    const uint8_t *p = pt[i].iov_base;
    for (size_t left = pt[i].iov_len; left > 0;) {
      int n = left > SLICE ? SLICE : (int)left;
      if (EVP_EncryptUpdate(c, out, &len, p, n) != 1) return crypto_fail("AES-256-GCM seal");
      out += len;
      p += n;
      left -= (size_t)n;
    }
  }
  if (EVP_EncryptFinal_ex(c, out, &len) != 1) return crypto_fail("AES-256-GCM final");
  if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_GET_TAG, TPX_AEAD_TAG_BYTES, tag) != 1)
    return crypto_fail("AES-256-GCM tag");
  return 0;
}

int tpx__aead_open(tpx_aead_t *a, const uint8_t nonce[TPX_AEAD_NONCE_BYTES], const uint8_t *aad,
                   size_t aad_len, const uint8_t *ct, size_t len, const struct iovec *out, int nout,
                   const uint8_t tag[TPX_AEAD_TAG_BYTES]) {
  EVP_CIPHER_CTX *c = a->ctx;
  int n = 0;
  if (EVP_DecryptInit_ex(c, NULL, NULL, NULL, nonce) != 1) return crypto_fail("AES-256-GCM nonce");
  if (aad_len && (aad_len > INT_MAX || EVP_DecryptUpdate(c, NULL, &n, aad, (int)aad_len) != 1))
    return crypto_fail("AES-256-GCM aad");
  size_t left = len;
  for (int i = 0; i < nout && left > 0; i++) {
    uint8_t *o = out[i].iov_base;
    for (size_t piece = out[i].iov_len < left ? out[i].iov_len : left; piece > 0;) {
      int k = piece > SLICE ? SLICE : (int)piece;
      if (EVP_DecryptUpdate(c, o, &n, ct, k) != 1) return crypto_fail("AES-256-GCM open");
      o += k;
      ct += k;
      piece -= (size_t)k;
      left -= (size_t)k;
    }
  }
  if (left) return tpx_err_quiet(TPX_EINTERNAL, "AES-256-GCM open: %zu bytes have no room", left);

  if (EVP_CIPHER_CTX_ctrl(c, EVP_CTRL_GCM_SET_TAG, TPX_AEAD_TAG_BYTES, (void *)tag) != 1)
    return crypto_fail("AES-256-GCM tag");
  uint8_t fin[16];
  if (EVP_DecryptFinal_ex(c, fin, &n) != 1) {
    ERR_clear_error();
    return TPX_EAUTH; /* quiet: the caller names the peer */
  }
  return 0;
}

int tpx__aead_dir_init(tpx_aead_dir_t *d, const uint8_t key[TPX_AEAD_KEY_BYTES], int enc, uint64_t rekey) {
  memcpy(d->key, key, sizeof(d->key));
  d->ctr = 0;
  d->rekey = rekey;
  return tpx__aead_init(&d->aead, key, enc);
}

void tpx__aead_dir_fini(tpx_aead_dir_t *d) {
  tpx__aead_fini(&d->aead);
  tpx__cleanse(d->key, sizeof(d->key));
}

int tpx__aead_dir_nonce(tpx_aead_dir_t *d, uint8_t nonce[TPX_AEAD_NONCE_BYTES]) {
  if (d->ctr == UINT64_MAX) return tpx_err_quiet(TPX_EPROTO, "record numbers used up");
  if (d->ctr != 0 && d->ctr % d->rekey == 0) {
    static const char info[] = "tpx record rekey v1";
    uint8_t next[TPX_AEAD_KEY_BYTES];
    int rc = tpx__hkdf_sha256(d->key, sizeof(d->key), NULL, 0, (const uint8_t *)info, sizeof(info) - 1, next,
                              sizeof(next));
    if (rc == 0) rc = tpx__aead_rekey(&d->aead, next);
    if (rc == 0) memcpy(d->key, next, sizeof(next));
    tpx__cleanse(next, sizeof(next));
    if (rc) return rc;
  }
  memset(nonce, 0, 4);
  tpx__put64(nonce + 4, d->ctr++);
  return 0;
}
