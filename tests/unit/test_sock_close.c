/* Built-in transport: closing. Peer close and reset come back from test as
 * TPX_EREMOTE (never a hang, never SIGPIPE); a sender that closes right after
 * its last send completed never fails the receiver; closing with requests in
 * flight, and destroying with comms left open, neither crash nor leak. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/le.h"
#include "sock/sock.h"
#include "sock/wire.h"
#include "test_sock_util.h"

static void post_recv(tpx_net_t *net, void *r, void *buf, size_t len, void **req) {
  void *d[1] = {buf};
  size_t n[1] = {len};
  assert_int_equal(net->ops->irecv(net, r, 1, d, n, NULL, NULL, req), 0);
  assert_non_null(*req);
}

/* The sender goes away with a receive posted: TPX_EREMOTE naming the peer. */
static void test_peer_close_pending_recv(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 2, 2);
  void *s, *r, *rq;
  ts_pair(net, &s, &r);
  static char buf[1 << 20];
  post_recv(net, r, buf, sizeof(buf), &rq);
  assert_int_equal(net->ops->close_send(net, s), 0);
  assert_int_equal(ts_wait(net, rq, NULL), TPX_EREMOTE);
  assert_non_null(strstr(tpx_last_error(), "127.0.0.1"));
  assert_non_null(strstr(tpx_last_error(), "closed by peer"));
  /* Later receives fail the same way, at once. */
  post_recv(net, r, buf, 10, &rq);
  assert_int_equal(ts_wait(net, rq, NULL), TPX_EREMOTE);
  assert_int_equal(net->ops->close_recv(net, r), 0);
  net->ops->destroy(net);
}

/* The sender dies in the middle of a large message (after its first part). */
static void test_peer_close_mid_message(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 4, 2);
  void *s, *r, *rq, *sq;
  ts_pair(net, &s, &r);
  size_t len = 32u << 20;
  char *rb = malloc(len), *sb = malloc(len);
  memset(sb, 1, len);
  post_recv(net, r, rb, len, &rq);
  assert_int_equal(net->ops->isend(net, s, sb, len, 0, NULL, &sq), 0);
  /* Close the sender with its request in flight: the receiver cannot get all
   * bytes, so it must fail (or, if the kernel had taken them all, succeed). */
  assert_int_equal(net->ops->close_send(net, s), 0);
  int rc = ts_wait(net, rq, NULL);
  assert_true(rc == TPX_EREMOTE || rc == 0);
  assert_int_equal(net->ops->close_recv(net, r), 0);
  net->ops->destroy(net);
  free(rb);
  free(sb);
}

/* The receiver goes away: the sender's big sends fail with TPX_EREMOTE
 * (ECONNRESET / EPIPE) instead of hanging or raising SIGPIPE. */
static void test_receiver_close(void **state) {
  (void)state;
  signal(SIGPIPE, SIG_DFL); /* a SIGPIPE would kill the test */
  tpx_net_t *net = ts_open(0, 2, 2);
  void *s, *r, *rq;
  ts_pair(net, &s, &r);
  size_t len = 16u << 20;
  char *sb = calloc(1, len), *rb = malloc(len);
  /* Some bytes arrive unread at the receiver, so its close resets. */
  post_recv(net, r, rb, 100, &rq);
  void *sq[8];
  for (int i = 0; i < 8; i++)
    assert_int_equal(net->ops->isend(net, s, sb, i ? len : 100, 0, NULL, &sq[i]), 0);
  assert_int_equal(ts_wait(net, rq, NULL), 0);
  assert_int_equal(net->ops->close_recv(net, r), 0);
  int failed = 0;
  for (int i = 0; i < 8; i++) {
    int rc = ts_wait(net, sq[i], NULL);
    assert_true(rc == 0 || rc == TPX_EREMOTE);
    if (rc == TPX_EREMOTE) {
      failed++;
      assert_non_null(strstr(tpx_last_error(), "send comm to peer 127.0.0.1"));
    }
  }
  assert_true(failed > 0); /* 112 MiB cannot all fit in socket buffers */
  assert_int_equal(net->ops->close_send(net, s), 0);
  net->ops->destroy(net);
  free(sb);
  free(rb);
}

/* The race from the 2025 engine: the sender closes right after its last send
 * completed. Every message whose bytes were sent must arrive intact; only a
 * receive with no matching send fails. 200 rounds. */
#define RACE_ROUNDS 200
#define RACE_MSGS 6
static void test_close_after_last_send(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 4, 2);
  const size_t sizes[RACE_MSGS] = {1, 4096, 65536 + 5, 300000, 1 << 20, 17};
  unsigned char *sb[RACE_MSGS], *rb[RACE_MSGS];
  for (int i = 0; i < RACE_MSGS; i++) {
    sb[i] = malloc(sizes[i]);
    rb[i] = malloc(sizes[i]);
    tu_fill(sb[i], sizes[i], (uint32_t)i + 1, 0);
  }
  for (int round = 0; round < RACE_ROUNDS; round++) {
    void *s, *r, *sq[RACE_MSGS], *rq[RACE_MSGS], *extra;
    ts_pair(net, &s, &r);
    int recv_first = round % 2;
    if (recv_first)
      for (int i = 0; i < RACE_MSGS; i++)
        post_recv(net, r, rb[i], sizes[i], &rq[i]);
    for (int i = 0; i < RACE_MSGS; i++)
      assert_int_equal(net->ops->isend(net, s, sb[i], sizes[i], 0, NULL, &sq[i]), 0);
    for (int i = 0; i < RACE_MSGS; i++)
      assert_int_equal(ts_wait(net, sq[i], NULL), 0);
    assert_int_equal(net->ops->close_send(net, s), 0);
    if (!recv_first)
      for (int i = 0; i < RACE_MSGS; i++)
        post_recv(net, r, rb[i], sizes[i], &rq[i]);
    static char tail[8];
    post_recv(net, r, tail, sizeof(tail), &extra);
    for (int i = 0; i < RACE_MSGS; i++) {
      size_t got = 0;
      int rc = ts_wait(net, rq[i], &got);
      if (rc != 0) fail_msg("round %d message %d: rc %d: %s", round, i, rc, tpx_last_error());
      assert_int_equal(got, sizes[i]);
      assert_int_equal(tu_check(rb[i], sizes[i], (uint32_t)i + 1, 0), SIZE_MAX);
    }
    assert_int_equal(ts_wait(net, extra, NULL), TPX_EREMOTE);
    assert_int_equal(net->ops->close_recv(net, r), 0);
  }
  for (int i = 0; i < RACE_MSGS; i++)
    free(sb[i]), free(rb[i]);
  net->ops->destroy(net);
}

/* Close both ends with many large requests in flight, in both orders. */
static void test_close_while_busy(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 4, 2);
  size_t len = 4u << 20;
  char *sb = calloc(1, len), *rb = malloc(len * 8);
  for (int round = 0; round < 6; round++) {
    void *s, *r, *q;
    ts_pair(net, &s, &r);
    for (int i = 0; i < 8; i++)
      post_recv(net, r, rb + (size_t)i * len, len, &q);
    void *last = NULL;
    for (int i = 0; i < 16; i++)
      assert_int_equal(net->ops->isend(net, s, sb, len, 0, NULL, &last), 0);
    if (round % 2) {
      assert_int_equal(net->ops->close_recv(net, r), 0);
      assert_int_equal(net->ops->close_send(net, s), 0);
    } else {
      assert_int_equal(net->ops->close_send(net, s), 0);
      assert_int_equal(net->ops->close_recv(net, r), 0);
    }
    /* Requests of a closed comm are gone. */
    int done = 0;
    assert_int_equal(net->ops->test(net, last, &done, NULL), TPX_EINVAL);
    assert_int_equal(done, 0);
  }
  net->ops->destroy(net);
  free(sb);
  free(rb);
}

/* destroy() closes whatever the caller left open: comms with requests in
 * flight, listen comms with half-done connections, connects in progress,
 * memory handles. */
static void test_destroy_with_open_objects(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 3, 2);
  void *s, *r, *q, *mh;
  ts_pair(net, &s, &r);
  static char buf[1 << 20], out[1000];
  post_recv(net, r, buf, sizeof(buf), &q);
  assert_int_equal(net->ops->isend(net, s, out, sizeof(out), 0, NULL, &q), 0);
  assert_int_equal(net->ops->reg_mr(net, s, buf, sizeof(buf), TPX_PTR_HOST, &mh), 0);
  unsigned char h[TPX_NET_HANDLE_BYTES];
  void *lc, *half = NULL;
  assert_int_equal(net->ops->listen(net, 0, h, &lc), 0);
  assert_int_equal(net->ops->connect(net, 0, h, &half, NULL), 0); /* started, maybe done */
  void *lc2;
  unsigned char h2[TPX_NET_HANDLE_BYTES];
  assert_int_equal(net->ops->listen(net, 0, h2, &lc2), 0);
  net->ops->destroy(net);
}

/* A connect that cannot complete (a listener that never accepts, its queue
 * full: SYNs are dropped) given up with connect_abort: its sockets close at
 * once and the handle's connector state is cleared; a handle with none is
 * left alone, one with state this process never wrote is refused. */
static void test_connect_abort(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 8, 1);
  int lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  assert_int_equal(bind(lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(lfd, 0), 0);
  socklen_t sl = sizeof(sa);
  assert_int_equal(getsockname(lfd, (struct sockaddr *)&sa, &sl), 0);
  int filler = socket(AF_INET, SOCK_STREAM, 0);
  assert_int_equal(connect(filler, (struct sockaddr *)&sa, sizeof(sa)), 0); /* the queue is full now */
  unsigned char h[TPX_NET_HANDLE_BYTES], real[TPX_NET_HANDLE_BYTES];
  void *lc, *comm = NULL;
  assert_int_equal(net->ops->listen(net, 0, real, &lc), 0);
  memcpy(h, real, sizeof(h)); /* a handle of this transport, pointed at the blackhole */
  memcpy(h + TPX_WH_PORT, &sa.sin_port, 2);
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  int before = tu_count_fds();
  for (int i = 0; i < 3; i++) assert_int_equal(net->ops->connect(net, 0, h, &comm, NULL), 0);
  assert_null(comm);
  assert_int_equal(tu_count_fds(), before + 9); /* 8 data sockets + 1 */
  unsigned char forged[TPX_NET_HANDLE_BYTES];
  memcpy(forged, h, sizeof(h));
  forged[TPX_WH_CHECK] ^= 1;
  assert_int_equal(net->ops->connect_abort(net, forged), TPX_EINVAL);
  assert_int_equal(net->ops->connect_abort(net, h), 0);
  assert_int_equal(tu_count_fds(), before);
  assert_int_equal(tpx__get64(h + TPX_WH_STATE), 0);
  assert_int_equal(net->ops->connect_abort(net, h), 0); /* nothing in progress: nothing to do */
  net->ops->destroy(net);
  close(filler);
  close(lfd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_peer_close_pending_recv, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_peer_close_mid_message, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_receiver_close, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_close_after_last_send, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_close_while_busy, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_destroy_with_open_objects, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_connect_abort, tu_fd_setup, tu_fd_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
