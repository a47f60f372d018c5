/* TPX_ENCRYPT's record layers against an on-path attacker: a sealed stream
 * made from the input's plaintext (cut into records where the input says),
 * then altered as the input says (bytes flipped, a record dropped, the
 * stream cut short, bytes inserted), is read back through the data
 * sockets' reader (src/sock/seal.c, tpx__sock_seal_recv over a socketpair,
 * with read sizes from the input) and the control connection's
 * (src/engine/ctl_seal.c, fed in pieces from the input).
 *
 * Checked: what either reader hands out is always a prefix of the
 * plaintext (never a byte that differs, never one of an altered record);
 * with no alteration, every byte comes back; after an alteration the
 * reader fails or stops short; no sanitizer report. */
#define _GNU_SOURCE
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/ctl_seal.h"
#include "engine/wire.h"
#include "fuzz.h"
#include "sock/sock.h"

#define MAX_PLAIN 6000
#define MAX_WIRE (MAX_PLAIN * 25) /* one-byte records: 21 bytes of framing each */

static const uint8_t key[TPX_AEAD_KEY_BYTES] = "fuzz key, thirty-two bytes long";

static void fuzz_setup(void) {}

/* The sealed stream of plain (records cut by the input) through a
 * socketpair: what the sender puts on the wire. */
static size_t seal_sock(struct fuzz_in *in, const uint8_t *plain, size_t n, uint8_t *wire, uint64_t rekey) {
  int sp[2];
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
  tpx_sock_seal_t *tx = NULL;
  FUZZ_CHECK(tpx__sock_seal_new(key, 1, rekey, &tx) == 0);
  size_t got = 0;
  for (size_t off = 0; off < n;) {
    size_t cut = 1 + fuzz_u16(in) % 2048;
    struct iovec v = {(void *)(plain + off), cut < n - off ? cut : n - off};
    ssize_t k;
    for (int guard = 0;; guard++) { /* a full socket: take what is there, and again */
      k = tpx__sock_seal_send(tx, sp[0], &v, 1);
      if (k >= 0 || errno != EAGAIN || guard > 1000) break;
      ssize_t r = recv(sp[1], wire + got, MAX_WIRE - got, MSG_DONTWAIT);
      if (r > 0) got += (size_t)r;
    }
    FUZZ_CHECK(k == (ssize_t)v.iov_len);
    off += (size_t)k;
  }
  tpx__sock_seal_free(tx);
  shutdown(sp[0], SHUT_WR);
  for (;;) {
    ssize_t k = recv(sp[1], wire + got, MAX_WIRE - got, 0);
    if (k <= 0) break;
    got += (size_t)k;
  }
  close(sp[0]);
  close(sp[1]);
  return got;
}

/* The attacker's edit; 1 when the stream changed. */
static int alter(struct fuzz_in *in, uint8_t *wire, size_t *len) {
  int changed = 0;
  int edits = fuzz_u8(in) % 4;
  for (int e = 0; e < edits && *len > 0; e++) {
    size_t at = fuzz_u16(in) % *len;
    switch (fuzz_u8(in) % 4) {
    case 0: { /* flip */
      uint8_t x = fuzz_u8(in) | 1;
      wire[at] ^= x;
      changed = 1;
      break;
    }
    case 1: /* cut short */
      *len = at;
      changed = 1;
      break;
    case 2: { /* drop a span */
      size_t n = 1 + fuzz_u16(in) % 64;
      if (n > *len - at) n = *len - at;
      memmove(wire + at, wire + at + n, *len - at - n);
      *len -= n;
      changed = 1;
      break;
    }
    default: { /* insert a copy of earlier bytes (a replay) */
      size_t n = 1 + fuzz_u16(in) % 64;
      if (n > at) n = at;
      if (*len + n > MAX_WIRE || n == 0) break;
      memmove(wire + at + n, wire + at, *len - at);
      memcpy(wire + at, wire + at - n, n);
      *len += n;
      changed = 1;
      break;
    }
    }
  }
  return changed;
}

static void read_sock(struct fuzz_in *in, const uint8_t *plain, size_t n, const uint8_t *wire, size_t len,
                      int changed, uint64_t rekey) {
  int sp[2];
  FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM, 0, sp) == 0);
  int big = MAX_WIRE * 2;
  (void)setsockopt(sp[0], SOL_SOCKET, SO_SNDBUF, &big, sizeof(big));
  FUZZ_CHECK(len == 0 || send(sp[0], wire, len, 0) == (ssize_t)len);
  shutdown(sp[0], SHUT_WR);
  tpx_sock_seal_t *rx = NULL;
  FUZZ_CHECK(tpx__sock_seal_new(key, 0, rekey, &rx) == 0);
  static uint8_t out[MAX_PLAIN + 4096];
  size_t got = 0;
  int failed = 0;
  for (int guard = 0; guard < 100000; guard++) {
    size_t want = 1 + fuzz_u16(in) % 4096;
    struct iovec v[2] = {{out + got, want / 2 + 1}, {out + got + want / 2 + 1, want / 2}};
    ssize_t k = tpx__sock_seal_recv(rx, sp[1], v, 2);
    if (k == 0) break;
    if (k < 0) {
      FUZZ_CHECK(errno != EAGAIN); /* the whole stream is in the socket */
      failed = 1;
      break;
    }
    FUZZ_CHECK(got + (size_t)k <= n); /* never more than was sealed */
    got += (size_t)k;
  }
  FUZZ_CHECK(memcmp(out, plain, got) == 0);
  if (!changed) FUZZ_CHECK(got == n && !failed);
  tpx__sock_seal_free(rx);
  close(sp[0]);
  close(sp[1]);
}

/* The control connection's records, by its own writer and reader. */
static void ctl_round(struct fuzz_in *in, const uint8_t *plain, size_t n) {
  uint8_t nc[32] = {1}, ns[32] = {2};
  struct ctl_seal *tx = NULL, *rx = NULL;
  FUZZ_CHECK(tpx__ctl_seal_new(key, sizeof(key), nc, ns, 1, 0, &tx) == 0);
  FUZZ_CHECK(tpx__ctl_seal_new(key, sizeof(key), nc, ns, 0, 0, &rx) == 0);
  struct tpx__wbuf w = {0};
  for (size_t off = 0; off < n;) { /* frames appended, then flushed: records */
    size_t cut = 1 + fuzz_u16(in) % 3000;
    if (cut > n - off) cut = n - off;
    uint8_t *p = realloc(w.p, w.len + cut + 1);
    FUZZ_CHECK(p != NULL);
    w.p = p;
    w.cap = w.len + cut + 1;
    memcpy(w.p + w.len, plain + off, cut);
    w.len += cut;
    FUZZ_CHECK(tpx__ctl_seal_out(tx, &w) == 0);
    off += cut;
  }
  static uint8_t wire[MAX_WIRE];
  size_t len = w.len < MAX_WIRE ? w.len : MAX_WIRE;
  memcpy(wire, w.p, len);
  int changed = len != w.len;
  changed |= alter(in, wire, &len);
  uint8_t *got = NULL;
  size_t got_len = 0, got_cap = 0;
  FUZZ_CHECK(tpx__ctl_seal_in_start(rx, &got, &got_len, &got_cap, 0) == 0);
  int failed = 0;
  for (size_t off = 0; off < len && !failed;) {
    uint8_t *to;
    size_t room;
    FUZZ_CHECK(tpx__ctl_seal_room(rx, &to, &room) == 0 && room > 0);
    size_t k = 1 + fuzz_u16(in) % 9000;
    if (k > room) k = room;
    if (k > len - off) k = len - off;
    memcpy(to, wire + off, k);
    off += k;
    failed = tpx__ctl_seal_got(rx, k, &got, &got_len, &got_cap) != 0;
    FUZZ_CHECK(got_len <= n && (got_len == 0 || memcmp(got, plain, got_len) == 0));
  }
  if (!changed) FUZZ_CHECK(got_len == n && !failed);
  free(got);
  free(w.p);
  tpx__ctl_seal_free(tx);
  tpx__ctl_seal_free(rx);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fuzz_in in = {data, size, 0};
  static uint8_t plain[MAX_PLAIN], wire[MAX_WIRE];
  size_t n = 1 + fuzz_u16(&in) % MAX_PLAIN;
  for (size_t i = 0; i < n; i++) plain[i] = (uint8_t)(i * 131 + 7);
  size_t got;
  const uint8_t *b = fuzz_bytes(&in, 64, &got);
  memcpy(plain, b, got); /* the front from the input */
  uint64_t rekey = 1 + fuzz_u8(&in) % 4; /* keys step every few records, as both ends agree */
  size_t len = seal_sock(&in, plain, n, wire, rekey);
  int changed = alter(&in, wire, &len);
  read_sock(&in, plain, n, wire, len, changed, rekey);
  ctl_round(&in, plain, n);
  return 0;
}
