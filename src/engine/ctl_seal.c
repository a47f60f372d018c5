/* The control connection's records (ctl_seal.h). */
#include "engine/ctl_seal.h"

#include <stdlib.h>
#include <string.h>

#include "common/aead.h"
#include "common/error.h"
#include "common/hmac.h"
#include "common/le.h"
#include "engine/wire.h"

/* Records per key: as the data sockets' (sock.h), far inside GCM's bounds. */
#define REKEY (1ull << 20)
#define REC_BYTES (TPX_CTL_SEAL_HDR + TPX_CTL_SEAL_REC + TPX_AEAD_TAG_BYTES)

struct ctl_seal {
  tpx_aead_dir_t tx, rx;
  size_t out_done; /* bytes of out already on the wire's form */
  int in_on, in_due;
  int opened;      /* records opened: the first tells a plaintext peer apart */
  uint8_t *cin;    /* ciphertext read, not yet a whole record: [0, cin_len) */
  size_t cin_len, cin_cap;
};

static int derive(const uint8_t *key, size_t key_len, const uint8_t *salt, const char *label,
                  uint8_t out[TPX_AEAD_KEY_BYTES]) {
  return tpx__hkdf_sha256(key, key_len, salt, 64, (const uint8_t *)label, strlen(label), out, TPX_AEAD_KEY_BYTES);
}

int tpx__ctl_seal_new(const uint8_t *key, size_t key_len, const uint8_t *nc, const uint8_t *ns, int connector,
                      size_t out_len, struct ctl_seal **out) {
  *out = NULL;
  struct ctl_seal *s = calloc(1, sizeof(*s));
  if (s == NULL) return tpx_err_quiet(TPX_ENOMEM, "control records: out of memory");
  uint8_t salt[64], c2a[TPX_AEAD_KEY_BYTES], a2c[TPX_AEAD_KEY_BYTES];
  memcpy(salt, nc, 32);
  memcpy(salt + 32, ns, 32);
  int rc = derive(key, key_len, salt, "tpx control record key v1: connector to acceptor", c2a);
  if (rc == 0) rc = derive(key, key_len, salt, "tpx control record key v1: acceptor to connector", a2c);
  if (rc == 0) rc = tpx__aead_dir_init(&s->tx, connector ? c2a : a2c, 1, REKEY);
  if (rc == 0) rc = tpx__aead_dir_init(&s->rx, connector ? a2c : c2a, 0, REKEY);
  tpx__cleanse(c2a, sizeof(c2a));
  tpx__cleanse(a2c, sizeof(a2c));
  if (rc != 0) {
    tpx__ctl_seal_free(s);
    return rc;
  }
  s->out_done = out_len;
  s->in_due = 1;
  *out = s;
  return 0;
}

void tpx__ctl_seal_free(struct ctl_seal *s) {
  if (s == NULL) return;
  if (s->tx.aead.ctx) tpx__aead_dir_fini(&s->tx);
  if (s->rx.aead.ctx) tpx__aead_dir_fini(&s->rx);
  free(s->cin);
  free(s);
}

static int reserve(uint8_t **p, size_t *cap, size_t need) {
  if (need <= *cap) return 0;
  size_t c = *cap ? *cap : 4096;
  while (c < need) c *= 2;
  uint8_t *n = realloc(*p, c);
  if (n == NULL) return tpx_err_quiet(TPX_ENOMEM, "control records: out of memory");
  *p = n;
  *cap = c;
  return 0;
}

int tpx__ctl_seal_out(struct ctl_seal *s, struct tpx__wbuf *out) {
  size_t plain = out->len - s->out_done;
  if (plain == 0) return 0;
  size_t nrec = (plain + TPX_CTL_SEAL_REC - 1) / TPX_CTL_SEAL_REC;
  size_t grown = out->len + nrec * (TPX_CTL_SEAL_HDR + TPX_AEAD_TAG_BYTES);
  if (reserve(&out->p, &out->cap, grown) != 0) return TPX_ENOMEM;
  /* In place, last record first: each one's plaintext moves up past the
   * headers and tags of the records before it, over bytes already moved. */
  uint8_t *base = out->p + s->out_done;
  for (size_t i = nrec; i-- > 0;) {
    size_t off = i * TPX_CTL_SEAL_REC, n = plain - off < TPX_CTL_SEAL_REC ? plain - off : TPX_CTL_SEAL_REC;
    memmove(base + i * (TPX_CTL_SEAL_HDR + TPX_CTL_SEAL_REC + TPX_AEAD_TAG_BYTES) + TPX_CTL_SEAL_HDR, base + off, n);
  }
  int rc = 0;
  for (size_t i = 0; i < nrec && rc == 0; i++) {
    uint8_t *w = base + i * (TPX_CTL_SEAL_HDR + TPX_CTL_SEAL_REC + TPX_AEAD_TAG_BYTES);
    size_t off = i * TPX_CTL_SEAL_REC, n = plain - off < TPX_CTL_SEAL_REC ? plain - off : TPX_CTL_SEAL_REC;
    uint8_t nonce[TPX_AEAD_NONCE_BYTES];
    tpx__put32(w, TPX_CTL_SEAL_MAGIC);
    tpx__put32(w + 4, (uint32_t)n);
    struct iovec v = {w + TPX_CTL_SEAL_HDR, n};
    rc = tpx__aead_dir_nonce(&s->tx, nonce);
    if (rc == 0)
      rc = tpx__aead_seal(&s->tx.aead, nonce, w, TPX_CTL_SEAL_HDR, &v, 1, w + TPX_CTL_SEAL_HDR, w + TPX_CTL_SEAL_HDR + n);
  }
  out->len = grown;
  s->out_done = grown;
  return rc;
}

void tpx__ctl_seal_out_sent(struct ctl_seal *s) { s->out_done = 0; }
int tpx__ctl_seal_in_on(const struct ctl_seal *s) { return s->in_on; }
int tpx__ctl_seal_in_due(const struct ctl_seal *s) { return s->in_due; }

int tpx__ctl_seal_is_record(const uint8_t *buf, size_t avail) {
  return avail >= 4 && tpx__get32(buf) == TPX_CTL_SEAL_MAGIC;
}

/* Open the whole records at the front of cin into *in. */
static int open_all(struct ctl_seal *s, uint8_t **in, size_t *in_len, size_t *in_cap) {
  size_t off = 0;
  int rc = 0;
  while (rc == 0 && s->cin_len - off >= TPX_CTL_SEAL_HDR) {
    uint8_t *r = s->cin + off;
    uint32_t magic = tpx__get32(r), n = tpx__get32(r + 4);
    if (magic != TPX_CTL_SEAL_MAGIC || n == 0 || n > TPX_CTL_SEAL_REC) {
      rc = s->opened == 0 && magic == WIRE_MAGIC
               ? tpx_err_quiet(TPX_EPROTO, "the peer sends its control frames in plaintext (TPX_ENCRYPT=0 there) and "
                                           "this endpoint has TPX_ENCRYPT=1: set it alike on both")
               : tpx_err_quiet(TPX_EAUTH, "control connection: data failed authentication (not a record: magic "
                                          "0x%08x, length %u)", magic, n);
      break;
    }
    size_t rec = TPX_CTL_SEAL_HDR + n + TPX_AEAD_TAG_BYTES;
    if (s->cin_len - off < rec) break;
    uint8_t nonce[TPX_AEAD_NONCE_BYTES];
    rc = tpx__aead_dir_nonce(&s->rx, nonce);
    if (rc == 0) rc = reserve(in, in_cap, *in_len + n);
    if (rc == 0) {
      struct iovec to = {*in + *in_len, n};
      rc = tpx__aead_open(&s->rx.aead, nonce, r, TPX_CTL_SEAL_HDR, r + TPX_CTL_SEAL_HDR, n, &to, 1,
                          r + TPX_CTL_SEAL_HDR + n);
      if (rc == TPX_EAUTH)
        rc = tpx_err_quiet(TPX_EAUTH, "control connection: data failed authentication (record %llu altered, "
                                      "replayed, reordered or dropped on the path)",
                           (unsigned long long)(s->rx.ctr - 1));
    }
    if (rc == 0) {
      *in_len += n;
      s->opened++;
      off += rec;
    }
  }
  memmove(s->cin, s->cin + off, s->cin_len - off);
  s->cin_len -= off;
  return rc;
}

int tpx__ctl_seal_in_start(struct ctl_seal *s, uint8_t **in, size_t *in_len, size_t *in_cap, size_t from) {
  size_t n = *in_len - from;
  s->in_due = 0;
  s->in_on = 1;
  int rc = reserve(&s->cin, &s->cin_cap, n > REC_BYTES ? n : REC_BYTES);
  if (rc) return rc;
  if (n) memcpy(s->cin, *in + from, n);
  s->cin_len = n;
  *in_len = from;
  return open_all(s, in, in_len, in_cap);
}

int tpx__ctl_seal_room(struct ctl_seal *s, uint8_t **buf, size_t *room) {
  /* Between reads cin holds less than one whole record (open_all takes
   * every whole one), so a record's room always remains. */
  int rc = reserve(&s->cin, &s->cin_cap, s->cin_len + REC_BYTES);
  if (rc) return rc;
  *buf = s->cin + s->cin_len;
  *room = s->cin_cap - s->cin_len;
  return 0;
}

int tpx__ctl_seal_got(struct ctl_seal *s, size_t got, uint8_t **in, size_t *in_len, size_t *in_cap) {
  s->cin_len += got;
  return open_all(s, in, in_len, in_cap);
}
