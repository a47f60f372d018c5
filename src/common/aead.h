/* Authenticated encryption for TPX_ENCRYPT (docs/SECURITY.md): AES-256-GCM
 * and HKDF-SHA256, both from OpenSSL's libcrypto (no cryptography is written
 * here). A context holds one key for one direction; each record names its
 * 96-bit nonce, which the callers build from a record counter and never
 * reuse under one key. Errors come back with tpx_err_quiet's detail. */
#ifndef TPX_COMMON_AEAD_H
#define TPX_COMMON_AEAD_H

#include <stddef.h>
#include <stdint.h>
#include <sys/uio.h>

#define TPX_AEAD_KEY_BYTES 32
#define TPX_AEAD_NONCE_BYTES 12
#define TPX_AEAD_TAG_BYTES 16

/* HKDF-SHA256 (RFC 5869): extract with salt (may be empty), expand with
 * info to out_len bytes (<= 255 * 32). 0 or TPX_EINTERNAL. */
int tpx__hkdf_sha256(const uint8_t *ikm, size_t ikm_len, const uint8_t *salt, size_t salt_len,
                     const uint8_t *info, size_t info_len, uint8_t *out, size_t out_len);

typedef struct tpx_aead {
  void *ctx; /* EVP_CIPHER_CTX, keyed */
  int enc;   /* 1 seals, 0 opens */
} tpx_aead_t;

/* A context for AES-256-GCM under key, sealing (enc 1) or opening. */
int tpx__aead_init(tpx_aead_t *a, const uint8_t key[TPX_AEAD_KEY_BYTES], int enc);
/* Replace the key (rekeying); the context stays. */
int tpx__aead_rekey(tpx_aead_t *a, const uint8_t key[TPX_AEAD_KEY_BYTES]);
void tpx__aead_fini(tpx_aead_t *a);
/* Seal the concatenation of pt[0..npt) into out (as many bytes; out may be
 * the one piece's own bytes: in place), the tag into tag; aad is
 * authenticated, not encrypted. 0 or TPX_EINTERNAL. */
int tpx__aead_seal(tpx_aead_t *a, const uint8_t nonce[TPX_AEAD_NONCE_BYTES], const uint8_t *aad,
                   size_t aad_len, const struct iovec *pt, int npt, uint8_t *out,
                   uint8_t tag[TPX_AEAD_TAG_BYTES]);
/* Open len bytes of ct into the pieces out[0..nout) (in order, together
 * at least len bytes; the first may be ct itself): 0, or TPX_EAUTH when the
 * tag does not match (out then holds bytes nobody may use: the caller fails
 * what they were for), or TPX_EINTERNAL. */
int tpx__aead_open(tpx_aead_t *a, const uint8_t nonce[TPX_AEAD_NONCE_BYTES], const uint8_t *aad,
                   size_t aad_len, const uint8_t *ct, size_t len, const struct iovec *out, int nout,
                   const uint8_t tag[TPX_AEAD_TAG_BYTES]);

/* One direction of a record stream: its key, and the number of the next
 * record, which is the record's nonce (4 zero bytes, then the number as a
 * little-endian u64; never sent, so a record replayed, reordered or dropped
 * fails to open). Every `rekey` records both ends step to the next key
 * (HKDF of the current one, label "tpx record rekey v1"). */
typedef struct tpx_aead_dir {
  tpx_aead_t aead;
  uint8_t key[TPX_AEAD_KEY_BYTES];
  uint64_t ctr, rekey;
} tpx_aead_dir_t;

int tpx__aead_dir_init(tpx_aead_dir_t *d, const uint8_t key[TPX_AEAD_KEY_BYTES], int enc, uint64_t rekey);
void tpx__aead_dir_fini(tpx_aead_dir_t *d);
/* The next record's nonce (stepping the key when due): 0, TPX_EPROTO when
 * the numbers ran out (never in practice: 2^64 records), TPX_EINTERNAL. */
int tpx__aead_dir_nonce(tpx_aead_dir_t *d, uint8_t nonce[TPX_AEAD_NONCE_BYTES]);

#endif
