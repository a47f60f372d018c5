/* The record layer of TPX_ENCRYPT (sock.h, "record layer"; wire.h, 4).
 *
 * Each data socket carries one direction, so each has one key: derived with
 * HKDF-SHA256 from the session key and the socket's hello (the listen
 * comm's random nonce, the comm id, the socket index and the connector's
 * fresh per-socket nonce, all under the hello's MAC). The byte stream is cut
 * into records of at most TPX_SEAL_REC_MAX plaintext bytes:
 *   u32 length (plaintext bytes, 1..TPX_SEAL_REC_MAX; authenticated as aad)
 *   ciphertext (length bytes)
 *   tag (16 bytes)
 * sealed with AES-256-GCM under a nonce that is the record's number on the
 * socket (4 zero bytes, then the u64 little-endian), never sent: a record
 * replayed, reordered, dropped or moved from another socket fails to open.
 * Every TPX_SEAL_REKEY_RECORDS records both ends step to the next key
 * (common/aead.h), far below AES-GCM's per-key bounds; the record number
 * never wraps (a socket that could would fail instead).
 *
 * The caller's I/O keeps its shape: seal_send takes what sendmsg would (a
 * list of the plaintext from the first unsent byte) and returns the bytes of
 * a whole record once its last byte is in the kernel; seal_recv returns
 * plaintext of records whose tag was checked, never a byte of one that was
 * not. Both run in the socket's I/O thread, into or out of its bounce
 * buffer, so the work spreads over TPX_NTHREADS. */
#define _GNU_SOURCE
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/error.h"
#include "common/hmac.h"
#include "common/le.h"
#include "common/util.h"
#include "sock/sock.h"
#include "sock/wire.h"

/* Bytes read past an unknown header: a small record whole in one read. */
#define PEEK (32u * 1024u)
#define CAP (TPX_SEAL_REC_MAX + 2u * TPX_SEAL_HDR + TPX_SEAL_TAG)
/* Failure as the socket calls report it: errno says why (not a tpx code). */
#define SYS_FAIL (-1)

struct tpx_sock_seal {
  tpx_aead_dir_t dir; /* the socket's key and record number */
  uint8_t *buf;       /* CAP bytes, allocated at first use */
  /* send: the record in buf, its plaintext bytes, how much of it is out */
  size_t plain, len, sent;
  /* recv: bytes [lo, hi) of buf are read and not consumed; the checked
   * plaintext being handed out is [pt, pt_end) of the record ending at rec_end */
  size_t lo, hi, pt, pt_end, rec_end;
};

int tpx__sock_seal_key(const uint8_t *session_key, const uint8_t *hello, uint8_t out[TPX_AEAD_KEY_BYTES]) {
  static const char info[] = "tpx sock record key v1";
  return tpx__hkdf_sha256(session_key, TPX_NET_KEY_BYTES, hello, TPX_WIRE_HELLO_MACED, (const uint8_t *)info,
                          sizeof(info) - 1, out, TPX_AEAD_KEY_BYTES);
}

int tpx__sock_seal_new(const uint8_t key[TPX_AEAD_KEY_BYTES], int send, uint64_t rekey, tpx_sock_seal_t **out) {
  *out = NULL;
  tpx_sock_seal_t *s = calloc(1, sizeof(*s));
  if (s == NULL) return tpx_err_quiet(TPX_ENOMEM, "sock: out of memory for a record layer");
  int rc = tpx__aead_dir_init(&s->dir, key, send, rekey ? rekey : TPX_SEAL_REKEY_RECORDS);
  if (rc != 0) {
    tpx__sock_seal_free(s);
    return rc;
  }
  *out = s;
  return 0;
}

void tpx__sock_seal_free(tpx_sock_seal_t *s) {
  if (s == NULL) return;
  tpx__aead_dir_fini(&s->dir);
  if (s->buf) tpx__cleanse(s->buf, CAP); /* plaintext of the last record */
  free(s->buf);
  free(s);
}

/* The next record's nonce; -1 with errno (EOVERFLOW: the numbers ran out;
 * EIO: libcrypto) as the socket calls fail. */
static int next_nonce(tpx_sock_seal_t *s, uint8_t nonce[TPX_AEAD_NONCE_BYTES]) {
  int rc = tpx__aead_dir_nonce(&s->dir, nonce);
  if (rc == 0) return 0;
  errno = rc == TPX_EPROTO ? EOVERFLOW : EIO;
  return SYS_FAIL;
}

static int grow(tpx_sock_seal_t *s) {
  if (s->buf) return 0;
  s->buf = malloc(CAP);
  if (s->buf) return 0;
  errno = ENOMEM;
  return SYS_FAIL;
}

ssize_t tpx__sock_seal_send(tpx_sock_seal_t *s, int fd, const struct iovec *iov, int niov) {
  if (s->len == 0) { /* seal the next record from the front of iov */
    if (grow(s) != 0) return SYS_FAIL;
    struct iovec take[TPX_SEAL_IOV];
    int n = 0;
    size_t plain = 0;
    for (int i = 0; i < niov && n < TPX_SEAL_IOV && plain < TPX_SEAL_REC_MAX; i++) {
      size_t k = TPX_MIN(iov[i].iov_len, TPX_SEAL_REC_MAX - plain);
      if (k == 0) continue;
      take[n++] = (struct iovec){iov[i].iov_base, k};
      plain += k;
    }
    if (plain == 0) return 0;
    uint8_t nonce[TPX_AEAD_NONCE_BYTES];
    if (next_nonce(s, nonce) != 0) return SYS_FAIL;
    tpx__put32(s->buf, (uint32_t)plain);
    if (tpx__aead_seal(&s->dir.aead, nonce, s->buf, TPX_SEAL_HDR, take, n, s->buf + TPX_SEAL_HDR,
                       s->buf + TPX_SEAL_HDR + plain) != 0) {
      errno = EIO;
      return SYS_FAIL;
    }
    s->plain = plain;
    s->len = TPX_SEAL_HDR + plain + TPX_SEAL_TAG;
    s->sent = 0;
  }
  while (s->sent < s->len) {
    ssize_t n = send(fd, s->buf + s->sent, s->len - s->sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return SYS_FAIL; /* EAGAIN: the rest goes at the next writable edge */
    s->sent += (size_t)n;
  }
  s->len = 0;
  return (ssize_t)s->plain;
}

/* Copy checked plaintext into the caller's list. */
static size_t hand_out(tpx_sock_seal_t *s, const struct iovec *iov, int niov) {
  size_t done = 0;
  for (int i = 0; i < niov && s->pt < s->pt_end; i++) {
    size_t k = TPX_MIN(iov[i].iov_len, s->pt_end - s->pt);
    memcpy(iov[i].iov_base, s->buf + s->pt, k);
    s->pt += k;
    done += k;
  }
  if (s->pt == s->pt_end) s->lo = s->rec_end;
  return done;
}

ssize_t tpx__sock_seal_recv(tpx_sock_seal_t *s, int fd, const struct iovec *iov, int niov) {
  if (grow(s) != 0) return SYS_FAIL;
  for (;;) {
    if (s->pt < s->pt_end) return (ssize_t)hand_out(s, iov, niov);
    if (s->lo == s->hi) s->lo = s->hi = 0;
    size_t have = s->hi - s->lo, want;
    if (have >= TPX_SEAL_HDR) {
      uint32_t plain = tpx__get32(s->buf + s->lo);
      if (plain == 0 || plain > TPX_SEAL_REC_MAX) { /* hostile or damaged: never read on */
        errno = EMSGSIZE;
        return SYS_FAIL;
      }
      size_t rec = TPX_SEAL_HDR + plain + TPX_SEAL_TAG;
      if (have >= rec) {
        uint8_t nonce[TPX_AEAD_NONCE_BYTES];
        uint8_t *r = s->buf + s->lo;
        if (next_nonce(s, nonce) != 0) return SYS_FAIL;
        /* The caller takes the whole record: open it straight into its
         * buffer (no copy; a record that fails fails the comm, and the bytes
         * it left there are never counted). Else open it in place and hand
         * it out piece by piece. */
        size_t room = 0;
        for (int i = 0; i < niov && room < plain; i++) room += iov[i].iov_len;
        int direct = room >= plain;
        struct iovec self = {r + TPX_SEAL_HDR, plain};
        int rc = tpx__aead_open(&s->dir.aead, nonce, r, TPX_SEAL_HDR, r + TPX_SEAL_HDR, plain, direct ? iov : &self,
                                direct ? niov : 1, r + TPX_SEAL_HDR + plain);
        if (rc != 0) {
          errno = rc == TPX_EAUTH ? EBADMSG : EIO;
          return SYS_FAIL;
        }
        if (direct) {
          s->lo += rec;
          return (ssize_t)plain;
        }
        s->pt = s->lo + TPX_SEAL_HDR;
        s->pt_end = s->pt + plain;
        s->rec_end = s->lo + rec;
        continue;
      }
      want = rec + TPX_SEAL_HDR; /* this record and the next one's length */
    } else {
      want = PEEK;
    }
    if (s->lo + want > CAP) { /* keep the record whole in buf: move the partial one down */
      memmove(s->buf, s->buf + s->lo, have);
      s->lo = 0;
      s->hi = have;
    }
    size_t room = TPX_MIN(s->lo + want, (size_t)CAP) - s->hi;
    ssize_t n = recv(fd, s->buf + s->hi, room, MSG_DONTWAIT);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return n; /* 0: the peer closed (a cut record is never handed out) */
    s->hi += (size_t)n;
  }
}
