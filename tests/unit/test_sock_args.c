/* Built-in transport: bad input. Every entry point validates its arguments
 * (NULL pointers, bad counts and sizes, unknown / closed / wrong-kind handles)
 * and returns a code with a reason; garbage connections to a listen comm are
 * dropped without harming it; connect errors come back as codes. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sock/sock.h"
#include "sock/wire.h"
#include "test_sock_util.h"

static void test_open_args(void **state) {
  (void)state;
  tpx_config_t cfg;
  ts_cfg(&cfg, 0, 0, 0);
  assert_int_equal(tpx_net_open_builtin(&cfg, NULL), TPX_EINVAL);
  tpx_net_t *net = (tpx_net_t *)0x1;
  cfg.nsocks = -1;
  assert_int_equal(tpx_net_open_builtin(&cfg, &net), TPX_EINVAL);
  assert_null(net);
  cfg.nsocks = TPX_SOCK_MAX_NSOCKS + 1;
  assert_int_equal(tpx_net_open_builtin(&cfg, &net), TPX_EINVAL);
  assert_null(net);
  cfg.nsocks = 2;
  cfg.nthreads = 1000;
  assert_int_equal(tpx_net_open_builtin(&cfg, &net), TPX_EINVAL);
  /* NULL config: the process-wide one (TPX_SOCKET_IFNAME=lo). */
  assert_int_equal(tpx_net_open_builtin(NULL, &net), 0);
  int ndev = 0;
  assert_int_equal(net->ops->devices(net, &ndev), 0);
  assert_int_equal(ndev, 1);
  /* A table that is not ours, a NULL net. */
  tpx_net_t fake = *net;
  fake.impl = NULL;
  assert_int_equal(net->ops->devices(&fake, &ndev), TPX_EINVAL);
  assert_int_equal(net->ops->devices(NULL, &ndev), TPX_EINVAL);
  assert_int_equal(net->ops->devices(net, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->get_properties(net, 0, NULL), TPX_EINVAL);
  net->ops->destroy(NULL); /* no crash */
  net->ops->destroy(&fake);
  net->ops->destroy(net);
}

static void test_setup_args(void **state) {
  (void)state;
  tpx_config_t cfg;
  ts_cfg(&cfg, 0, 2, 1);
  cfg.socket_retry_cnt = 0; /* a refused connect fails at once (retries: test_sock_retry) */
  tpx_net_t *net = ts_open_cfg(&cfg);
  unsigned char h[TPX_NET_HANDLE_BYTES];
  void *lc = NULL, *c = NULL;
  assert_int_equal(net->ops->listen(net, 1, h, &lc), TPX_EINVAL);
  assert_int_equal(net->ops->listen(net, -1, h, &lc), TPX_EINVAL);
  assert_int_equal(net->ops->listen(net, 0, NULL, &lc), TPX_EINVAL);
  assert_int_equal(net->ops->listen(net, 0, h, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->listen(net, 0, h, &lc), 0);
  assert_non_null(lc);

  /* connect: bad handles */
  unsigned char bad[TPX_NET_HANDLE_BYTES];
  memset(bad, 0x5a, sizeof(bad));
  assert_int_equal(net->ops->connect(net, 0, bad, &c, NULL), TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "not made by this transport"));
  memcpy(bad, h, sizeof(bad));
  tpx__put16(bad + TPX_WH_VERSION, 99);
  assert_int_equal(net->ops->connect(net, 0, bad, &c, NULL), TPX_EVERSION);
  memcpy(bad, h, sizeof(bad));
  tpx__put16(bad + TPX_WH_NSOCKS, 0);
  assert_int_equal(net->ops->connect(net, 0, bad, &c, NULL), TPX_EINVAL);
  memcpy(bad, h, sizeof(bad));
  tpx__put16(bad + TPX_WH_FAMILY, 9);
  assert_int_equal(net->ops->connect(net, 0, bad, &c, NULL), TPX_EINVAL);
  memcpy(bad, h, sizeof(bad));
  tpx__put64(bad + TPX_WH_STATE, 0x123456789ull); /* a state this process never made */
  assert_int_equal(net->ops->connect(net, 0, bad, &c, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->connect(net, 0, NULL, &c, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->connect(net, 0, h, NULL, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->connect(net, 3, h, &c, NULL), TPX_EINVAL);
  assert_null(c);

  /* accept: bad listen comms */
  void *rc = NULL;
  assert_int_equal(net->ops->accept(net, NULL, &rc, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->accept(net, (void *)0xdeadbeef, &rc, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->accept(net, lc, NULL, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->accept(net, lc, &rc, NULL), 0);
  assert_null(rc);
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  assert_int_equal(net->ops->close_listen(net, lc), TPX_EINVAL);      /* twice */
  assert_int_equal(net->ops->accept(net, lc, &rc, NULL), TPX_EINVAL); /* closed */

  /* Connection refused: the listener is gone. An error code, not a hang. */
  int err = 0;
  for (int i = 0; i < 100000 && err == 0 && c == NULL; i++)
    err = net->ops->connect(net, 0, h, &c, NULL);
  assert_null(c);
  assert_int_equal(err, TPX_EREMOTE);
  assert_non_null(strstr(tpx_last_error(), "refused"));
  /* The failed attempt left nothing behind: the same handle retries afresh. */
  assert_int_equal(tpx__get64(h + TPX_WH_STATE), 0);
  net->ops->destroy(net);
}

static void test_data_args(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 2, 1);
  void *s, *r, *q = NULL;
  ts_pair(net, &s, &r);
  static char buf[4096];
  void *d[1] = {buf};
  size_t n[1] = {sizeof(buf)};
  /* isend */
  assert_int_equal(net->ops->isend(net, s, buf, 10, 0, NULL, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->isend(net, NULL, buf, 10, 0, NULL, &q), TPX_EINVAL);
  assert_int_equal(net->ops->isend(net, r, buf, 10, 0, NULL, &q), TPX_EINVAL); /* recv comm */
  assert_non_null(strstr(tpx_last_error(), "recv comm, not a send comm"));
  assert_int_equal(net->ops->isend(net, (void *)0x77, buf, 10, 0, NULL, &q), TPX_EINVAL);
  assert_int_equal(net->ops->isend(net, s, NULL, 10, 0, NULL, &q), TPX_EINVAL);
  assert_int_equal(net->ops->isend(net, s, buf, (1ull << 40) + 1, 0, NULL, &q), TPX_EINVAL);
  assert_int_equal(net->ops->isend(net, s, buf, SIZE_MAX, 0, NULL, &q), TPX_EINVAL);
  assert_int_equal(net->ops->isend(net, s, (void *)(UINTPTR_MAX - 10), 100, 0, NULL, &q),
                   TPX_EINVAL);
  /* irecv */
  assert_int_equal(net->ops->irecv(net, r, 0, d, n, NULL, NULL, &q), TPX_EINVAL);
  assert_int_equal(net->ops->irecv(net, r, -1, d, n, NULL, NULL, &q), TPX_EINVAL);
  assert_int_equal(net->ops->irecv(net, r, 2, d, n, NULL, NULL, &q), TPX_EINVAL);
  assert_int_equal(net->ops->irecv(net, r, 1, NULL, n, NULL, NULL, &q), TPX_EINVAL);
  assert_int_equal(net->ops->irecv(net, r, 1, d, NULL, NULL, NULL, &q), TPX_EINVAL);
  assert_int_equal(net->ops->irecv(net, r, 1, d, n, NULL, NULL, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->irecv(net, s, 1, d, n, NULL, NULL, &q), TPX_EINVAL); /* send comm */
  void *nd[1] = {NULL};
  assert_int_equal(net->ops->irecv(net, r, 1, nd, n, NULL, NULL, &q), TPX_EINVAL);
  /* test */
  int done = 0;
  assert_int_equal(net->ops->test(net, NULL, &done, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->test(net, (void *)0x1234, &done, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->test(net, s, &done, NULL), TPX_EINVAL); /* a comm, not a request */
  assert_int_equal(net->ops->isend(net, s, buf, 10, 0, NULL, &q), 0);
  assert_int_equal(net->ops->test(net, q, NULL, NULL), TPX_EINVAL);
  assert_int_equal(ts_wait(net, q, NULL), 0);
  assert_int_equal(net->ops->test(net, q, &done, NULL), TPX_EINVAL); /* already released */
  /* Forged request: right comm, a sequence number never posted. */
  void *forged = (void *)((uintptr_t)q + 5);
  assert_int_equal(net->ops->test(net, forged, &done, NULL), TPX_EINVAL);
  /* iflush: host memory, nothing to flush */
  q = (void *)0x1;
  assert_int_equal(net->ops->iflush(net, r, 1, d, n, NULL, &q), 0);
  assert_null(q);
  assert_int_equal(net->ops->iflush(net, s, 1, d, n, NULL, &q), TPX_EINVAL);
  /* the pending 10 bytes, so the pair ends clean */
  assert_int_equal(net->ops->irecv(net, r, 1, d, n, NULL, NULL, &q), 0);
  assert_int_equal(ts_wait(net, q, NULL), 0);

  /* regMr / deregMr */
  void *mh = NULL;
  assert_int_equal(net->ops->reg_mr(net, s, buf, sizeof(buf), TPX_PTR_HOST, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->reg_mr(net, NULL, buf, sizeof(buf), TPX_PTR_HOST, &mh), TPX_EINVAL);
  assert_int_equal(net->ops->reg_mr(net, s, buf, sizeof(buf), TPX_PTR_CUDA, &mh), TPX_ENOTSUP);
  assert_int_equal(net->ops->reg_mr(net, s, buf, sizeof(buf), TPX_PTR_DMABUF, &mh), TPX_ENOTSUP);
  assert_int_equal(net->ops->reg_mr(net, s, buf, sizeof(buf), 0x40, &mh), TPX_EINVAL);
  assert_int_equal(net->ops->reg_mr(net, s, NULL, 100, TPX_PTR_HOST, &mh), TPX_EINVAL);
  assert_null(mh);
  assert_int_equal(net->ops->reg_mr(net, s, buf, sizeof(buf), TPX_PTR_HOST, &mh), 0);
  assert_non_null(mh);
  /* A buffer outside the registration; a forged memory handle. */
  assert_int_equal(net->ops->isend(net, s, buf + 4000, 200, 0, mh, &q), TPX_EINVAL);
  assert_int_equal(net->ops->isend(net, s, buf, 10, 0, (void *)0x999, &q), TPX_EINVAL);
  assert_int_equal(net->ops->isend(net, s, buf, 10, 0, s, &q), TPX_EINVAL); /* a comm */
  void *bmh[1] = {(void *)0x999};
  assert_int_equal(net->ops->irecv(net, r, 1, d, n, NULL, bmh, &q), TPX_EINVAL);
  assert_int_equal(net->ops->dereg_mr(net, s, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->dereg_mr(net, s, s), TPX_EINVAL);
  assert_int_equal(net->ops->dereg_mr(net, NULL, mh), TPX_EINVAL);
  assert_int_equal(net->ops->dereg_mr(net, s, mh), 0);
  assert_int_equal(net->ops->dereg_mr(net, s, mh), TPX_EINVAL); /* twice */

  /* close: wrong kind, twice */
  assert_int_equal(net->ops->close_send(net, r), TPX_EINVAL);
  assert_int_equal(net->ops->close_recv(net, s), TPX_EINVAL);
  assert_int_equal(net->ops->close_send(net, NULL), TPX_EINVAL);
  assert_int_equal(net->ops->close_send(net, s), 0);
  assert_int_equal(net->ops->close_send(net, s), TPX_EINVAL);
  assert_int_equal(net->ops->isend(net, s, buf, 10, 0, NULL, &q), TPX_EINVAL); /* closed */
  assert_int_equal(net->ops->close_recv(net, r), 0);
  assert_int_equal(net->ops->close_recv(net, r), TPX_EINVAL);
  net->ops->destroy(net);
}

static int raw_connect(const unsigned char *h) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  memcpy(&a.sin_addr, h + TPX_WH_ADDR, 4);
  memcpy(&a.sin_port, h + TPX_WH_PORT, 2);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  return fd;
}

static int is_closed(int fd) {
  struct pollfd p = {.fd = fd, .events = POLLIN};
  if (poll(&p, 1, 0) != 1) return 0;
  char c;
  ssize_t n = recv(fd, &c, 1, MSG_DONTWAIT | MSG_PEEK);
  return n == 0 || (n < 0 && errno == ECONNRESET);
}

/* Drive accept (bounded) until the transport closed one of our raw sockets;
 * returns its index in fds, or -1. */
static int closed_by_peer2(tpx_net_t *net, void *lc, const int *fds, int n) {
  for (int i = 0; i < 2000; i++) {
    void *rc = NULL;
    assert_int_equal(net->ops->accept(net, lc, &rc, NULL), 0);
    assert_null(rc);
    for (int k = 0; k < n; k++)
      if (is_closed(fds[k])) return k;
    usleep(1000);
  }
  return -1;
}

static int closed_by_peer(tpx_net_t *net, void *lc, int fd) {
  return closed_by_peer2(net, lc, &fd, 1) == 0;
}

/* Garbage on a listen comm: bad magic, a foreign nonce, a duplicate socket
 * index, a partial hello, a connect-and-vanish. Each is dropped; a real
 * connector on the same listen comm still gets through. */
static void test_garbage_connections(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 2, 1);
  unsigned char *h = calloc(1, TPX_NET_HANDLE_BYTES);
  void *lc;
  assert_int_equal(net->ops->listen(net, 0, h, &lc), 0);

  int g1 = raw_connect(h);
  char junk[64];
  memset(junk, 'x', sizeof(junk));
  assert_int_equal(send(g1, junk, sizeof(junk), 0), (ssize_t)sizeof(junk));
  assert_true(closed_by_peer(net, lc, g1));
  close(g1);

  uint8_t hello[TPX_WIRE_HELLO_BYTES];
  memset(hello, 0, sizeof(hello));
  tpx__put32(hello, TPX_WIRE_HELLO_MAGIC);
  tpx__put16(hello + 4, TPX_WIRE_VERSION);
  tpx__put16(hello + 6, TPX_WIRE_HELLO_BYTES);
  tpx__put64(hello + 8, tpx__get64(h + TPX_WH_NONCE) ^ 1); /* another listen comm's */
  tpx__put64(hello + 16, 42);
  tpx__put16(hello + 26, 2);
  int g2 = raw_connect(h);
  assert_int_equal(send(g2, hello, sizeof(hello), 0), (ssize_t)sizeof(hello));
  assert_true(closed_by_peer(net, lc, g2));
  close(g2);

  /* A partial hello that stalls must not block accept (checked by the real
   * connector below completing while it is pending). */
  int g3 = raw_connect(h);
  assert_int_equal(send(g3, hello, 10, 0), 10);
  /* A connection that goes away at once. */
  int g4 = raw_connect(h);
  close(g4);
  /* Two sockets claiming the same index of one comm: the second is dropped. */
  tpx__put64(hello + 8, tpx__get64(h + TPX_WH_NONCE));
  int g5 = raw_connect(h), g6 = raw_connect(h);
  assert_int_equal(send(g5, hello, sizeof(hello), 0), (ssize_t)sizeof(hello));
  assert_int_equal(send(g6, hello, sizeof(hello), 0), (ssize_t)sizeof(hello));
  int pair[2] = {g5, g6};
  int k = closed_by_peer2(net, lc, pair, 2);
  assert_true(k == 0 || k == 1);
  assert_false(is_closed(pair[1 - k])); /* the first one filed stays */

  /* A real connector completes on the same listen comm. */
  void *s = NULL, *r = NULL;
  uint64_t end = tpx__now_ns() + 20000000000ull;
  while ((s == NULL || r == NULL) && tpx__now_ns() < end) {
    if (s == NULL) assert_int_equal(net->ops->connect(net, 0, h, &s, NULL), 0);
    if (r == NULL) assert_int_equal(net->ops->accept(net, lc, &r, NULL), 0);
  }
  assert_non_null(s);
  assert_non_null(r);
  ts_xfer(net, s, r, 1 << 20, 1 << 20, 3);
  close(g3);
  close(g5);
  close(g6);
  assert_int_equal(net->ops->close_send(net, s), 0);
  assert_int_equal(net->ops->close_recv(net, r), 0);
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  net->ops->destroy(net);
  free(h);
}

/* Several connectors in progress on one listen comm at once, each with its
 * own handle copy; accept hands out each comm once and keeps them apart. */
#define NCONN 5
static void test_concurrent_connects(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 3, 2);
  unsigned char h[TPX_NET_HANDLE_BYTES], hc[NCONN][TPX_NET_HANDLE_BYTES];
  void *lc, *s[NCONN] = {0}, *r[NCONN] = {0};
  assert_int_equal(net->ops->listen(net, 0, h, &lc), 0);
  for (int i = 0; i < NCONN; i++)
    memcpy(hc[i], h, sizeof(h));
  /* One connect step each, interleaved, before any accept. */
  for (int i = 0; i < NCONN; i++)
    assert_int_equal(net->ops->connect(net, 0, hc[i], &s[i], NULL), 0);
  int ns = 0, nr = 0;
  uint64_t end = tpx__now_ns() + 20000000000ull;
  while ((ns < NCONN || nr < NCONN) && tpx__now_ns() < end) {
    ns = 0;
    for (int i = 0; i < NCONN; i++) {
      if (s[i] == NULL) assert_int_equal(net->ops->connect(net, 0, hc[i], &s[i], NULL), 0);
      ns += s[i] != NULL;
    }
    if (nr < NCONN) {
      assert_int_equal(net->ops->accept(net, lc, &r[nr], NULL), 0);
      if (r[nr] != NULL) nr++;
    }
  }
  ns = 0;
  for (int i = 0; i < NCONN; i++)
    ns += s[i] != NULL;
  assert_int_equal(ns, NCONN);
  assert_int_equal(nr, NCONN);
  /* Which recv comm belongs to which send comm: send a marker on each. */
  static char mark[NCONN][8], got[NCONN][8];
  void *sq[NCONN], *rq[NCONN];
  for (int i = 0; i < NCONN; i++) {
    memset(mark[i], 'a' + i, 8);
    assert_int_equal(net->ops->isend(net, s[i], mark[i], 8, 0, NULL, &sq[i]), 0);
    void *d[1] = {got[i]};
    size_t n[1] = {8};
    assert_int_equal(net->ops->irecv(net, r[i], 1, d, n, NULL, NULL, &rq[i]), 0);
  }
  int seen[NCONN] = {0};
  for (int i = 0; i < NCONN; i++) {
    assert_int_equal(ts_wait(net, sq[i], NULL), 0);
    assert_int_equal(ts_wait(net, rq[i], NULL), 0);
    int k = got[i][0] - 'a';
    assert_true(k >= 0 && k < NCONN);
    for (int j = 0; j < 8; j++)
      assert_int_equal(got[i][j], 'a' + k);
    seen[k]++;
  }
  for (int i = 0; i < NCONN; i++)
    assert_int_equal(seen[i], 1);
  for (int i = 0; i < NCONN; i++) {
    assert_int_equal(net->ops->close_send(net, s[i]), 0);
    assert_int_equal(net->ops->close_recv(net, r[i]), 0);
  }
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  net->ops->destroy(net);
}

/* connect completes without accept ever being called (NCCL's connect-first
 * order), and the comm is usable once accept runs later. */
static void test_connect_before_accept(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 4, 2);
  unsigned char h[TPX_NET_HANDLE_BYTES];
  void *lc, *s = NULL, *r = NULL;
  assert_int_equal(net->ops->listen(net, 0, h, &lc), 0);
  int calls = 0;
  while (s == NULL && calls < 1000000) {
    assert_int_equal(net->ops->connect(net, 0, h, &s, NULL), 0);
    calls++;
  }
  assert_non_null(s);
  assert_int_equal(tpx__get64(h + TPX_WH_STATE), 0); /* state released */
  void *sq;
  static char b[100000];
  tu_fill(b, sizeof(b), 9, 0);
  assert_int_equal(net->ops->isend(net, s, b, sizeof(b), 0, NULL, &sq), 0);
  while (r == NULL && calls < 2000000) {
    assert_int_equal(net->ops->accept(net, lc, &r, NULL), 0);
    calls++;
  }
  assert_non_null(r);
  static char rb[100000];
  void *d[1] = {rb}, *rq;
  size_t n[1] = {sizeof(rb)};
  assert_int_equal(net->ops->irecv(net, r, 1, d, n, NULL, NULL, &rq), 0);
  assert_int_equal(ts_wait(net, rq, NULL), 0);
  assert_int_equal(ts_wait(net, sq, NULL), 0);
  assert_int_equal(tu_check(rb, sizeof(rb), 9, 0), SIZE_MAX);
  assert_int_equal(net->ops->close_send(net, s), 0);
  assert_int_equal(net->ops->close_recv(net, r), 0);
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  net->ops->destroy(net);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_open_args, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_setup_args, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_data_args, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_garbage_connections, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_concurrent_connects, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_connect_before_accept, tu_fd_setup, tu_fd_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
