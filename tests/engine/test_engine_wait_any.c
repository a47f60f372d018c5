/* tpx_xfer_wait_any: a serving loop with 1,000 transfers outstanding waits
 * for whichever settles first, in one call, instead of testing each. */
#include <stdlib.h>
#include <string.h>

#include "eng.h"

#define NX 1000
#define SLOT 1024

/* One wait_any call that must succeed; returns the index it reported. */
static size_t next_done(tpx_xfer_t *const *set, size_t n, int poll) {
  size_t idx = n;
  int rc = TPX_ETIMEDOUT;
  /* poll: timeout 0 in a loop bounded by count (each poll of a caller-driven
   * endpoint runs a progress pass), then a real wait if it comes to that */
  for (int i = 0; poll && rc == TPX_ETIMEDOUT && i < 100000; i++) rc = tpx_xfer_wait_any(set, n, 0, &idx);
  if (rc == TPX_ETIMEDOUT) rc = tpx_xfer_wait_any(set, n, 60000, &idx);
  if (rc) fail_msg("wait_any: %d (%s): %s", rc, tpx_strerror(rc), tpx_last_error());
  assert_true(idx < n);
  assert_non_null(set[idx]);
  assert_int_equal(tpx_xfer_test(set[idx]), 0);
  return idx;
}

/* Drain a set: every transfer reported exactly once, then taken out (NULL). */
static void drain(tpx_xfer_t **set, size_t n, int poll) {
  size_t left = 0;
  for (size_t i = 0; i < n; i++) left += set[i] != NULL;
  int *seen = calloc(n, sizeof(int));
  assert_non_null(seen);
  for (; left > 0; left--) {
    size_t idx = next_done(set, n, poll);
    assert_int_equal(seen[idx]++, 0);
    set[idx] = NULL;
  }
  free(seen);
}

/* 1,000 writes of 1 KiB posted at once into distinct slots, twice (the
 * second round re-posts the same handles); every slot holds its pattern. */
static void run_1000_writes(const tpx_config_t *ca, const tpx_config_t *cb, int poll) {
  eng_pair_t P;
  eng_pair_open2(&P, ca, cb, 0);
  eng_buf_t a, b;
  eng_buf(P.a, (size_t)NX * SLOT, 0, &a);
  eng_buf(P.b, (size_t)NX * SLOT, TPX_ACCESS_WRITE, &b);
  tpx_xfer_t **x = calloc(NX, sizeof(*x)), **set = calloc(NX, sizeof(*set));
  assert_true(x && set);
  for (int round = 0; round < 2; round++) {
    for (size_t i = 0; i < NX; i++) {
      tu_fill(a.p + i * SLOT, SLOT, (uint32_t)(round * NX + i), 0);
      tpx_iov_t v = {a.mem, i * SLOT, b.rmem, i * SLOT, SLOT};
      if (round == 0) assert_int_equal(tpx_xfer_prep_write(P.ab, &v, 1, NULL, 0, &x[i]), 0);
      assert_int_equal(tpx_xfer_post(x[i]), 0);
      set[i] = x[i];
    }
    drain(set, NX, poll);
    for (size_t i = 0; i < NX; i++)
      assert_int_equal(tu_check(b.p + i * SLOT, SLOT, (uint32_t)(round * NX + i), 0), SIZE_MAX);
  }
  for (size_t i = 0; i < NX; i++) tpx_xfer_free(x[i]);
  free(x);
  free(set);
  eng_buf_free(&a);
  eng_buf_free(&b);
  eng_pair_close(&P);
}

static void test_1000_writes(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  run_1000_writes(&cfg, &cfg, 0);
}

/* The initiator without a progress thread: wait_any drives progress, and
 * each poll (timeout 0) runs one pass. */
static void test_1000_writes_caller_driven(void **state) {
  (void)state;
  tpx_config_t ca, cb;
  eng_cfg(&ca);
  eng_cfg(&cb);
  ca.progress_thread = 0;
  run_1000_writes(&ca, &cb, 0);
  run_1000_writes(&ca, &cb, 1);
}

/* 1,000 recvs (distinct tags) outstanding; 1,000 sends come in reverse
 * order. The receiver's loop re-posts each recv once on completion (2,000
 * completions through one set); the sender re-posts each send with new
 * data once its first round is done. Lengths and bytes are checked. */
static size_t len_of(size_t i) { return SLOT - i % 7; }

static void test_1000_recvs_repost(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  eng_buf_t a, b;
  eng_buf(P.a, (size_t)NX * SLOT, 0, &a);
  eng_buf(P.b, (size_t)NX * SLOT, 0, &b);
  tpx_xfer_t **r = calloc(NX, sizeof(*r)), **s = calloc(NX, sizeof(*s)), **set = calloc(NX, sizeof(*set));
  int *round = calloc(NX, sizeof(int));
  assert_true(r && s && set && round);
  for (size_t i = 0; i < NX; i++) assert_int_equal(tpx_recv(P.ba, b.mem, i * SLOT, SLOT, i, &r[i]), 0);
  for (size_t k = 0; k < NX; k++) {
    size_t i = NX - 1 - k;
    tu_fill(a.p + i * SLOT, len_of(i), (uint32_t)i, 0);
    assert_int_equal(tpx_send(P.ab, a.mem, i * SLOT, len_of(i), i, &s[i]), 0);
    set[i] = s[i];
  }
  /* Sender: each first-round send that completes is refilled and re-posted
   * (its recv is re-posted by the loop below). */
  for (size_t left = NX; left > 0; left--) {
    size_t i = next_done(set, NX, 0);
    set[i] = NULL;
    tu_fill(a.p + i * SLOT, len_of(i), (uint32_t)(NX + i), 0);
    assert_int_equal(tpx_xfer_post(s[i]), 0);
  }
  /* Receiver: the serving loop. */
  memcpy(set, r, NX * sizeof(*set));
  for (int completions = 0; completions < 2 * NX; completions++) {
    size_t i = next_done(set, NX, 0);
    assert_int_equal(tpx_xfer_received(r[i]), len_of(i));
    assert_int_equal(tu_check(b.p + i * SLOT, len_of(i), (uint32_t)(round[i] * NX + i), 0), SIZE_MAX);
    if (round[i]++ == 0) assert_int_equal(tpx_xfer_post(r[i]), 0);
    else set[i] = NULL;
  }
  for (size_t i = 0; i < NX; i++) assert_null(set[i]);
  memcpy(set, s, NX * sizeof(*set));
  drain(set, NX, 0);
  for (size_t i = 0; i < NX; i++) {
    tpx_xfer_free(r[i]);
    tpx_xfer_free(s[i]);
  }
  free(r);
  free(s);
  free(set);
  free(round);
  eng_buf_free(&a);
  eng_buf_free(&b);
  eng_pair_close(&P);
}

/* tpx_xfer_run: post + wait in one call, again and again on one handle. */
static void test_run(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  eng_buf_t a, b;
  eng_buf(P.a, 64 * 1024, 0, &a);
  eng_buf(P.b, 64 * 1024, TPX_ACCESS_WRITE, &b);
  tpx_iov_t v = {a.mem, 0, b.rmem, 0, a.len};
  tpx_xfer_t *x;
  assert_int_equal(tpx_xfer_prep_write(P.ab, &v, 1, NULL, 0, &x), 0);
  for (uint32_t i = 0; i < 3; i++) {
    tu_fill(a.p, a.len, 77 + i, 0);
    assert_int_equal(tpx_xfer_run(x, 60000), 0);
    assert_int_equal(tu_check(b.p, b.len, 77 + i, 0), SIZE_MAX);
  }
  tpx_xfer_t *r;
  assert_int_equal(tpx_recv(P.ab, a.mem, 0, 16, 1, &r), 0);
  assert_int_equal(tpx_xfer_run(r, 0), TPX_EUSAGE); /* still in flight: not posted twice */
  assert_int_equal(tpx_xfer_run(NULL, 0), TPX_EINVAL);
  tpx_xfer_free(x);
  tpx_peer_close(P.ab);
  P.ab = NULL;
  eng_wait(r, TPX_ECANCELED);
  tpx_xfer_free(r);
  eng_buf_free(&a);
  eng_buf_free(&b);
  eng_pair_close(&P);
}

/* Arguments, timeouts, never-posted and failed transfers, NULL slots. */
static void test_edges(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  eng_pair_t P, Q;
  eng_pair_open(&P, &cfg);
  eng_pair_open(&Q, &cfg);
  eng_buf_t b, q;
  eng_buf(P.b, SLOT, 0, &b);
  eng_buf(Q.b, SLOT, 0, &q);
  tpx_xfer_t *r, *other, *idle;
  assert_int_equal(tpx_recv(P.ba, b.mem, 0, SLOT, 7, &r), 0);
  assert_int_equal(tpx_recv(Q.ba, q.mem, 0, SLOT, 7, &other), 0);
  assert_int_equal(tpx_xfer_prep_recv(P.ba, b.mem, 0, SLOT, 8, &idle), 0);
  size_t idx = 99;
  tpx_xfer_t *set[3] = {NULL, r, NULL};
  assert_int_equal(tpx_xfer_wait_any(set, 3, 0, NULL), TPX_EINVAL);
  assert_int_equal(tpx_xfer_wait_any(NULL, 3, 0, &idx), TPX_EINVAL);
  tpx_xfer_t *none[2] = {NULL, NULL};
  assert_int_equal(tpx_xfer_wait_any(none, 2, 0, &idx), TPX_EINVAL);
  assert_int_equal(idx, 2);
  tpx_xfer_t *mixed[2] = {r, other};
  assert_int_equal(tpx_xfer_wait_any(mixed, 2, 0, &idx), TPX_EINVAL);
  /* nothing settles: the wait times out, the recv goes on */
  assert_int_equal(tpx_xfer_wait_any(set, 3, 0, &idx), TPX_ETIMEDOUT);
  assert_int_equal(idx, 3);
  assert_int_equal(tpx_xfer_wait_any(set, 3, 20, &idx), TPX_ETIMEDOUT);
  assert_int_equal(tpx_xfer_test(r), TPX_EINPROGRESS);
  /* a prepared, never-posted transfer counts as settled */
  tpx_xfer_t *with_idle[2] = {r, idle};
  assert_int_equal(tpx_xfer_wait_any(with_idle, 2, 1000, &idx), TPX_EUSAGE);
  assert_int_equal(idx, 1);
  /* the peer goes away: the recv fails, and wait_any reports its error */
  tpx_peer_close(P.ab);
  P.ab = NULL;
  int rc = tpx_xfer_wait_any(set, 3, 20000, &idx);
  assert_int_equal(idx, 1);
  assert_true(rc < 0 && rc != TPX_ETIMEDOUT && rc != TPX_EINPROGRESS);
  assert_int_equal(tpx_xfer_test(r), rc);
  tpx_xfer_free(r);
  tpx_xfer_free(idle);
  tpx_peer_close(Q.ba); /* cancels `other`, which then lets go of q */
  Q.ba = NULL;
  tpx_xfer_t *oset[1] = {other};
  assert_int_equal(tpx_xfer_wait_any(oset, 1, 20000, &idx), TPX_ECANCELED);
  tpx_xfer_free(other);
  eng_buf_free(&b);
  eng_buf_free(&q);
  eng_pair_close(&P);
  eng_pair_close(&Q);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_1000_writes),
      cmocka_unit_test(test_1000_writes_caller_driven),
      cmocka_unit_test(test_1000_recvs_repost),
      cmocka_unit_test(test_run),
      cmocka_unit_test(test_edges),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
