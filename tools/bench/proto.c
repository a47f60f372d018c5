/* The client and the server talk through engine notifications on their one
 * peer: "TPXB", a type byte, then little-endian 64-bit fields, then (HELLO,
 * MD, ERR) bytes. Everything the peer sends is checked before use; the server
 * also bounds what it will allocate. Every wait here is bounded and ends
 * early when the peer fails or a signal asks us to stop. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "version.h"
#include "common/le.h"
#include <time.h>

_Atomic int bench_stop;
_Atomic int bench_abort;

#define HDR 5
#define RUN_FIELDS 11

static size_t head(uint8_t *b, enum bench_msg t) {
  memcpy(b, "TPXB", 4);
  b[4] = (uint8_t)t;
  return HDR;
}

#define HELLO_FIELDS 4 /* span, cuda, pairs, pair */

size_t bench_msg_hello(uint8_t *b, const struct bench_hello *h, const uint8_t *md, size_t mdl) {
  size_t k = head(b, M_HELLO);
  uint64_t f[HELLO_FIELDS] = {h->span, (uint64_t)h->cuda, (uint64_t)h->npairs, (uint64_t)h->pair};
  for (int i = 0; i < HELLO_FIELDS; i++) tpx__put64(b + k + 8 * i, f[i]);
  memcpy(b + k + 8 * HELLO_FIELDS, md, mdl);
  return k + 8 * HELLO_FIELDS + mdl;
}

size_t bench_msg_run(uint8_t *b, const struct bench_run_msg *r) {
  size_t k = head(b, M_RUN);
  uint64_t f[RUN_FIELDS] = {(uint64_t)r->op,       (uint64_t)r->batch, (uint64_t)r->iters,
                            (uint64_t)r->warmup,   (uint64_t)r->inflight, (uint64_t)r->check,
                            (uint64_t)r->latency, r->block,           r->stride,
                            (uint64_t)r->regions, r->region};
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

/* The pair counts are only checked for sense here; whether they match this
 * server is the server's to say (with a message naming both). */
int bench_msg_get_hello(const tpx_notif_t *n, struct bench_hello *h, const uint8_t **md, size_t *mdl) {
  const size_t k = HDR + 8 * HELLO_FIELDS;
  if (bench_msg_type(n) != M_HELLO || n->len < k || n->len - k > TPX_MD_MAX) return -1;
  uint64_t f[HELLO_FIELDS];
  for (int i = 0; i < HELLO_FIELDS; i++) f[i] = tpx__get64(n->msg + HDR + 8 * i);
  if (f[1] > 1 || f[2] < 1 || f[2] > BENCH_MAX_GPUS || f[3] >= f[2]) return -1;
  h->span = f[0], h->cuda = (int)f[1], h->npairs = (int)f[2], h->pair = (int)f[3];
  *md = n->msg + k;
  *mdl = n->len - k;
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
  /* regions: one copy of the layout for sends and ping-pongs; a copy spans
   * (batch - 1) x stride + block (< 2^64: batch and stride bounded above) */
  if (f[9] < 1 || f[9] > BENCH_MAX_INFLIGHT || ((f[0] == TPX_OP_SEND || f[6]) && f[9] != 1) ||
      f[10] < (f[1] - 1) * f[8] + f[7])
    return -1;
  r->op = (int)f[0], r->batch = (int)f[1], r->iters = (int)f[2], r->warmup = (int)f[3];
  r->inflight = (int)f[4], r->check = (int)f[5], r->latency = (int)f[6];
  r->block = f[7], r->stride = f[8], r->regions = (int)f[9], r->region = f[10];
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

struct bench_gate {
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int n, arrived;
  unsigned gen;
};

struct bench_gate *bench_gate_new(int n) {
  struct bench_gate *g = calloc(1, sizeof(*g));
  if (!g) return NULL;
  pthread_mutex_init(&g->mu, NULL);
  pthread_cond_init(&g->cv, NULL);
  g->n = n;
  return g;
}

void bench_gate_free(struct bench_gate *g) {
  if (!g) return;
  pthread_mutex_destroy(&g->mu);
  pthread_cond_destroy(&g->cv);
  free(g);
}

void bench_abort_all(void) { bench_abort = 1; }

/* A barrier that a failed pair or a signal breaks (pthread_barrier waits for
 * ever); polled in slices like every other wait here. */
int bench_gate_wait(struct bench_gate *g, int timeout_ms) {
  double end = bench_now_ms() + timeout_ms;
  pthread_mutex_lock(&g->mu);
  unsigned gen = g->gen;
  if (++g->arrived == g->n) {
    g->arrived = 0;
    g->gen++;
    pthread_cond_broadcast(&g->cv);
  }
  int rc = 0;
  while (g->gen == gen && rc == 0) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    ts.tv_nsec += SLICE_MS * 1000000L;
    if (ts.tv_nsec >= 1000000000L) ts.tv_sec++, ts.tv_nsec -= 1000000000L;
    pthread_cond_timedwait(&g->cv, &g->mu, &ts);
    if (g->gen != gen) break;
    if (bench_stop || bench_abort) rc = TPX_ECANCELED;
    else if (bench_now_ms() > end) rc = TPX_ETIMEDOUT;
  }
  if (rc) g->arrived--; /* this pair left: the gate stays consistent for nobody (the run ends) */
  pthread_mutex_unlock(&g->mu);
  return rc;
}

int bench_wait_xfer(tpx_xfer_t *x, tpx_peer_t *peer, int timeout_ms, char *why, size_t whylen) {
  double end = bench_now_ms() + timeout_ms;
  for (;;) {
    int rc = tpx_xfer_wait(x, SLICE_MS);
    if (rc != TPX_ETIMEDOUT) return rc;
    rc = tpx_xfer_test(x); /* the wait's own timeout, or the transfer's? */
    if (rc != TPX_EINPROGRESS) return rc;
    /* the slice's "still in flight after 50 ms" is not the reason: ours is */
    if (bench_stop || bench_abort) {
      snprintf(why, whylen, "stopped (%s)", bench_stop ? "a signal" : "another pair failed");
      return TPX_ECANCELED;
    }
    if ((rc = tpx_peer_status(peer)) != 0) return rc; /* its reason is in tpx_last_error() */
    if (bench_now_ms() > end) {
      snprintf(why, whylen, "no completion within %d ms (timed out)", timeout_ms);
      return TPX_ETIMEDOUT;
    }
  }
}

int bench_wait_msg(tpx_endpoint_t *ep, tpx_peer_t *peer, int timeout_ms, tpx_notif_t *n, const char *what, char *why,
                   size_t whylen) {
  double end = bench_now_ms() + timeout_ms;
  for (;;) {
    int rc = tpx_wait_notif(ep, SLICE_MS, n);
    if (rc == 1 && n->peer == peer) return 0;
    if (rc < 0) {
      snprintf(why, whylen, "waiting for %s: %s", what, tool_error(rc));
      return rc;
    }
    if (rc == 1) continue; /* another peer's (a previous client's): not ours to answer */
    if (bench_stop || bench_abort) {
      snprintf(why, whylen, "waiting for %s: stopped (%s)", what, bench_stop ? "a signal" : "another pair failed");
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
