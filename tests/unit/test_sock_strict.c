/* Built-in transport, strict mode (TPX_SOCK_STRICT=1): the GPUDirect-TCPX
 * plugin's rules. 16 requests per comm (the 17th is TPX_EINTERNAL), test only
 * on the oldest request (else TPX_EINTERNAL), no receive sizes, and rc 2
 * (TPX_ESYSTEM, done=0) once the peer closed while data may still arrive,
 * and for good once it cannot; a complete request is rc 0 / done 1, closed
 * peer or not. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "sock/sock.h"
#include "test_sock_util.h"

static void post_recv(tpx_net_t *net, void *r, void *buf, size_t len, void **req) {
  void *d[1] = {buf};
  size_t n[1] = {len};
  int tags[1] = {12345}; /* ignored */
  assert_int_equal(net->ops->irecv(net, r, 1, d, n, tags, NULL, req), 0);
  assert_non_null(*req);
}

/* White box: has the comm seen its peer close? */
static int peer_closed(tpx_net_t *net, void *comm) {
  tpx_sock_net_t *sn = net->impl;
  tpx_sock_comm_t *m = tpx__sock_reg_get(&sn->reg, (uint64_t)(uintptr_t)comm, TPX_SK_NONE, NULL);
  assert_non_null(m);
  return atomic_load(&m->peer_closed);
}

static void wait_peer_closed(tpx_net_t *net, void *comm) {
  uint64_t end = tpx__now_ns() + 10000000000ull;
  while (!peer_closed(net, comm) && tpx__now_ns() < end)
    usleep(1000);
  assert_true(peer_closed(net, comm));
}

static void test_request_limit(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(1, 2, 2);
  void *s, *r;
  ts_pair(net, &s, &r);
  static char rb[TPX_SOCK_STRICT_REQUESTS + 1][64], sb[TPX_SOCK_STRICT_REQUESTS + 1][64];
  void *rq[TPX_SOCK_STRICT_REQUESTS + 1], *sq[TPX_SOCK_STRICT_REQUESTS + 1];
  for (int i = 0; i < TPX_SOCK_STRICT_REQUESTS; i++)
    post_recv(net, r, rb[i], 64, &rq[i]);
  void *d[1] = {rb[16]}, *extra = (void *)0x1;
  size_t n[1] = {64};
  assert_int_equal(net->ops->irecv(net, r, 1, d, n, NULL, NULL, &extra), TPX_EINTERNAL);
  assert_null(extra);
  assert_non_null(strstr(tpx_last_error(), "unable to allocate requests"));
  for (int i = 0; i < TPX_SOCK_STRICT_REQUESTS; i++) {
    memset(sb[i], i + 1, 64);
    assert_int_equal(net->ops->isend(net, s, sb[i], 64, i * 7 /* tag ignored */, NULL, &sq[i]), 0);
  }
  extra = (void *)0x1;
  assert_int_equal(net->ops->isend(net, s, sb[16], 64, 0, NULL, &extra), TPX_EINTERNAL);
  assert_null(extra);
  /* maxRecvs 1 */
  void *d2[2] = {rb[0], rb[1]};
  size_t n2[2] = {64, 64};
  assert_int_equal(net->ops->irecv(net, r, 2, d2, n2, NULL, NULL, &extra), TPX_EINVAL);
  /* Head-only testing, FIFO; receive sizes are left untouched. */
  for (int i = 0; i < TPX_SOCK_STRICT_REQUESTS; i++) {
    size_t sz = 4242;
    if (i + 1 < TPX_SOCK_STRICT_REQUESTS) {
      int done = 7;
      assert_int_equal(net->ops->test(net, rq[i + 1], &done, &sz), TPX_EINTERNAL);
      assert_non_null(strstr(tpx_last_error(), "not the oldest"));
    }
    assert_int_equal(ts_wait(net, rq[i], &sz), 0);
    assert_int_equal(sz, 4242);
    unsigned char want[64];
    memset(want, i + 1, 64);
    assert_memory_equal(rb[i], want, 64);
    assert_int_equal(ts_wait(net, sq[i], &sz), 0);
    assert_int_equal(sz, 64); /* send sizes are reported */
  }
  /* With the window drained, the next post works again. */
  post_recv(net, r, rb[16], 64, &rq[16]);
  assert_int_equal(net->ops->isend(net, s, sb[16], 0, 0, NULL, &sq[16]), 0);
  assert_int_equal(ts_wait(net, rq[16], NULL), 0);
  assert_int_equal(ts_wait(net, sq[16], NULL), 0);
  ts_close_pair(net, s, r);
}

/* The sender closes right after its last send: the receiver's completed
 * requests come back as rc 2 with done=1 and intact data; a receive the
 * sender never matched is rc 2 with done=0 (transient), then a real error. */
static void test_peer_close_rc2(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(1, 3, 2);
  void *s, *r;
  ts_pair(net, &s, &r);
  const size_t sizes[3] = {100, 300000, 2 << 20};
  unsigned char *sb[3], *rb[3];
  void *sq[3], *rq[4];
  for (int i = 0; i < 3; i++) {
    sb[i] = malloc(sizes[i]);
    rb[i] = malloc(sizes[i]);
    tu_fill(sb[i], sizes[i], 40 + (uint32_t)i, 0);
    assert_int_equal(net->ops->isend(net, s, sb[i], sizes[i], 0, NULL, &sq[i]), 0);
  }
  for (int i = 0; i < 3; i++)
    assert_int_equal(ts_wait(net, sq[i], NULL), 0);
  assert_int_equal(net->ops->close_send(net, s), 0);
  wait_peer_closed(net, r);
  for (int i = 0; i < 3; i++)
    post_recv(net, r, rb[i], sizes[i], &rq[i]);
  static char tail[16];
  post_recv(net, r, tail, sizeof(tail), &rq[3]);
  for (int i = 0; i < 3; i++) {
    uint64_t end = tpx__now_ns() + 10000000000ull;
    int done = 0, rc;
    size_t sz = 999;
    do
      rc = net->ops->test(net, rq[i], &done, &sz);
    while (rc == TPX_ESYSTEM && !done && tpx__now_ns() < end);
    assert_int_equal(rc, 0); /* the plugin never returns rc 2 with done 1 */
    assert_int_equal(done, 1);
    assert_int_equal(sz, 999);
    assert_int_equal(tu_check(rb[i], sizes[i], 40 + (uint32_t)i, 0), SIZE_MAX);
  }
  /* Unmatched: rc 2 / done 0, and for good (the plugin's control socket
   * reads end-of-file on every call): never another code, never released. */
  int done = 0;
  for (int i = 0; i < 50; i++) {
    assert_int_equal(net->ops->test(net, rq[3], &done, NULL), TPX_ESYSTEM);
    assert_int_equal(done, 0);
    usleep(1000);
  }
  assert_int_equal(net->ops->close_recv(net, r), 0);
  for (int i = 0; i < 3; i++)
    free(sb[i]), free(rb[i]);
  net->ops->destroy(net);
}

/* The receiver closes: the sender's completed sends still report rc 0 / done 1
 * (the plugin's test returns its errors before it sets done). */
static void test_receiver_close_rc2(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(1, 2, 2);
  void *s, *r, *sq, *rq;
  ts_pair(net, &s, &r);
  static char b[64], out[64];
  post_recv(net, r, b, sizeof(b), &rq);
  assert_int_equal(net->ops->isend(net, s, out, sizeof(out), 0, NULL, &sq), 0);
  assert_int_equal(ts_wait(net, rq, NULL), 0);
  assert_int_equal(net->ops->close_recv(net, r), 0);
  wait_peer_closed(net, s);
  int done = 0;
  size_t sz = 0;
  assert_int_equal(net->ops->test(net, sq, &done, &sz), 0);
  assert_int_equal(done, 1);
  assert_int_equal(sz, sizeof(b));
  assert_int_equal(net->ops->close_send(net, s), 0);
  net->ops->destroy(net);
}

/* Strict mode still moves large messages over all sockets. */
static void test_strict_data(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(1, 4, 2);
  void *s, *r;
  ts_pair(net, &s, &r);
  size_t len = 4 << 20;
  unsigned char *sb = malloc(len), *rb = malloc(8 * len);
  tu_fill(sb, len, 5, 0);
  void *sq[8], *rq[8];
  for (int k = 0; k < 3; k++) {
    for (int i = 0; i < 8; i++)
      post_recv(net, r, rb + (size_t)i * len, len, &rq[i]);
    for (int i = 0; i < 8; i++)
      assert_int_equal(net->ops->isend(net, s, sb, len, 0, NULL, &sq[i]), 0);
    for (int i = 0; i < 8; i++) {
      assert_int_equal(ts_wait(net, rq[i], NULL), 0);
      assert_int_equal(ts_wait(net, sq[i], NULL), 0);
      assert_int_equal(tu_check(rb + (size_t)i * len, len, 5, 0), SIZE_MAX);
    }
  }
  ts_close_pair(net, s, r);
  free(sb);
  free(rb);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_request_limit, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_peer_close_rc2, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_receiver_close_rc2, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_strict_data, tu_fd_setup, tu_fd_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
