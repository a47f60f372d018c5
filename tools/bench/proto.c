/* The client and the server talk through engine notifications on their one
 * peer: "TPXB", a type byte, then little-endian 64-bit fields, then (HELLO,
 * MD, ERR) bytes. Everything the peer sends is checked before use; the server
 * also bounds what it will allocate. Every wait here is bounded and ends
 * early when the peer fails or a signal asks us to stop. */
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "common/le.h"

volatile sig_atomic_t bench_stop;

#define HDR 5
#define RUN_FIELDS 9

static size_t head(uint8_t *b, enum bench_msg t) {
  memcpy(b, "TPXB", 4);
  b[4] = (uint8_t)t;
  return HDR;
}

size_t bench_msg_hello(uint8_t *b, uint64_t span, int cuda, const uint8_t *md, size_t mdl) {
  size_t k = head(b, M_HELLO);
  tpx__put64(b + k, span);
  tpx__put64(b + k + 8, (uint64_t)cuda);
  memcpy(b + k + 16, md, mdl);
  return k + 16 + mdl;
}

size_t bench_msg_run(uint8_t *b, const struct bench_run_msg *r) {
  size_t k = head(b, M_RUN);
  uint64_t f[RUN_FIELDS] = {(uint64_t)r->op,       (uint64_t)r->batch, (uint64_t)r->iters,
                            (uint64_t)r->warmup,   (uint64_t)r->inflight, (uint64_t)r->check,
                            (uint64_t)r->latency, r->block,           r->stride};
  for (int i = 0; i < RUN_FIELDS; i++) tpx__put64(b + k + 8 * i, f[i]);
  return k + 8 * RUN_FIELDS;
}

/* a: one number; text: bytes (an MD blob, an error text), may be NULL. */
size_t bench_msg_simple(uint8_t *b, enum bench_msg t, uint64_t a, const char *text) {
  size_t k = head(b, t);
  tpx__put64(b + k, a);
  size_t tl = text ? strnlen(text, BENCH_MSG_MAX - k - 8) : 0;
  if (tl) memcpy(b + k + 8, text, tl);
  return k + 8 + tl;
}

int bench_msg_type(const tpx_notif_t *n) {
  if (n->len < HDR + 8 || memcmp(n->msg, "TPXB", 4) != 0 || n->msg[4] < M_HELLO || n->msg[4] > M_ERR) return -1;
  return n->msg[4];
}

int bench_msg_get_hello(const tpx_notif_t *n, uint64_t *span, const uint8_t **md, size_t *mdl) {
  if (bench_msg_type(n) != M_HELLO || n->len < HDR + 16 || n->len - HDR - 16 > TPX_MD_MAX) return -1;
  *span = tpx__get64(n->msg + HDR);
  *md = n->msg + HDR + 16;
  *mdl = n->len - HDR - 16;
  return 0;
}

/* Only what a client may ask for: a known op, counts in the command line's
 * ranges, a layout that is what bench_layout_init would make. */
int bench_msg_get_run(const tpx_notif_t *n, struct bench_run_msg *r) {
  if (bench_msg_type(n) != M_RUN || n->len != HDR + 8 * RUN_FIELDS) return -1;
  uint64_t f[RUN_FIELDS];
  for (int i = 0; i < RUN_FIELDS; i++) f[i] = tpx__get64(n->msg + HDR + 8 * i);
  if ((f[0] != TPX_OP_WRITE && f[0] != TPX_OP_READ && f[0] != TPX_OP_SEND) || f[1] < 1 || f[1] > TPX_XFER_MAX_IOV ||
      f[2] < 1 || f[2] > 100000000 || f[3] > 100000000 || f[4] < 1 || f[4] > BENCH_MAX_INFLIGHT || f[5] > 1 ||
      f[6] > 1 || f[7] < 1 || f[7] > BENCH_MAX_SIZE)
    return -1;
  if (f[8] != (f[1] > 1 ? f[7] + BENCH_GAP : f[7])) return -1;
  if ((f[0] == TPX_OP_SEND || f[6]) && f[1] != 1) return -1;
  r->op = (int)f[0], r->batch = (int)f[1], r->iters = (int)f[2], r->warmup = (int)f[3];
  r->inflight = (int)f[4], r->check = (int)f[5], r->latency = (int)f[6];
  r->block = f[7], r->stride = f[8];
  return 0;
}

int bench_msg_get_simple(const tpx_notif_t *n, uint64_t *a, char *text, size_t cap) {
  if (bench_msg_type(n) < 0) return -1;
  *a = tpx__get64(n->msg + HDR);
  if (text && cap) {
    size_t tl = n->len - HDR - 8;
    if (tl >= cap) tl = cap - 1;
    for (size_t i = 0; i < tl; i++) { /* the peer's text reaches a terminal: printable only */
      uint8_t ch = n->msg[HDR + 8 + i];
      text[i] = ch >= 0x20 && ch < 0x7f ? (char)ch : '?';
    }
    text[tl] = '\0';
  }
  return 0;
}

int bench_send(tpx_peer_t *peer, const uint8_t *buf, size_t len) { return tpx_notify(peer, buf, len); }

#define SLICE_MS 50

int bench_wait_xfer(tpx_xfer_t *x, tpx_peer_t *peer, int timeout_ms) {
  double end = bench_now_ms() + timeout_ms;
  for (;;) {
    int rc = tpx_xfer_wait(x, SLICE_MS);
    if (rc != TPX_ETIMEDOUT) return rc;
    rc = tpx_xfer_test(x); /* the wait's own timeout, or the transfer's? */
    if (rc != TPX_EINPROGRESS) return rc;
    if (bench_stop) return TPX_ECANCELED;
    if ((rc = tpx_peer_status(peer)) != 0) return rc;
    if (bench_now_ms() > end) return TPX_ETIMEDOUT;
  }
}

int bench_wait_msg(tpx_endpoint_t *ep, tpx_peer_t *peer, int timeout_ms, tpx_notif_t *n, const char *what, char *why,
                   size_t whylen) {
  double end = bench_now_ms() + timeout_ms;
  for (;;) {
    int rc = tpx_wait_notif(ep, SLICE_MS, n);
    if (rc == 1 && n->peer == peer) return 0;
    if (rc < 0) {
      snprintf(why, whylen, "waiting for %s: %s (%s)", what, tpx_strerror(rc), tpx_last_error());
      return rc;
    }
    if (rc == 1) continue; /* another peer's (a previous client's): not ours to answer */
    if (bench_stop) {
      snprintf(why, whylen, "waiting for %s: stopped by a signal", what);
      return TPX_ECANCELED;
    }
    if ((rc = tpx_peer_status(peer)) != 0) {
      snprintf(why, whylen, "waiting for %s: the peer failed: %s", what, tpx_strerror(rc));
      return rc;
    }
    if (bench_now_ms() > end) {
      snprintf(why, whylen, "no %s within %d ms", what, timeout_ms);
      return TPX_ETIMEDOUT;
    }
  }
}
