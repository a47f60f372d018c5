/* Built-in transport: the data path over loopback. Sizes from 0 B to 64 MiB
 * checked byte for byte, many requests in flight, back-pressure, truncation,
 * shorter sends, several socket/thread layouts, IPv6, and no fd leaks. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "sock/sock.h"
#include "test_sock_util.h"

static void test_sizes(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 4, 4);
  void *s, *r;
  ts_pair(net, &s, &r);
  const size_t sizes[] = {0,
                          1,
                          2,
                          7,
                          15,
                          16,
                          17,
                          4095,
                          4096,
                          TPX_SOCK_INLINE_MAX,
                          TPX_SOCK_INLINE_MAX + 1,
                          65535,
                          65536 + 7,
                          3 * 65536 + 1,
                          1000003,
                          4u << 20,
                          (4u << 20) + 4097,
                          64u << 20};
  for (size_t i = 0; i < TPX_ARRAY_LEN(sizes); i++)
    ts_xfer(net, s, r, sizes[i], sizes[i], (uint32_t)i + 1);
  ts_close_pair(net, s, r);
}

/* Several layouts of sockets and threads, odd sizes around the split points. */
static void test_layouts(void **state) {
  (void)state;
  const int layout[][2] = {{1, 1}, {2, 1}, {3, 2}, {8, 4}, {5, 3}};
  for (size_t k = 0; k < TPX_ARRAY_LEN(layout); k++) {
    tpx_net_t *net = ts_open(0, layout[k][0], layout[k][1]);
    void *s, *r;
    ts_pair(net, &s, &r);
    const size_t sizes[] = {1, 16385, 131072 * 3 + 5, 777777, 2 * 1024 * 1024 + 3};
    for (size_t i = 0; i < TPX_ARRAY_LEN(sizes); i++)
      ts_xfer(net, s, r, sizes[i], sizes[i], (uint32_t)(k * 100 + i));
    ts_close_pair(net, s, r);
  }
}

#define NFLIGHT 32

/* 32 requests in flight on one comm, mixed sizes, tested in reverse order. */
static void test_inflight(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 4, 2);
  void *s, *r;
  ts_pair(net, &s, &r);
  unsigned char *sb[NFLIGHT], *rb[NFLIGHT];
  size_t sz[NFLIGHT];
  void *sreq[NFLIGHT], *rreq[NFLIGHT];
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < NFLIGHT; i++) {
      sz[i] = (i % 4 == 0) ? (size_t)(i * 37) : (size_t)(i * 65536 + i);
      sb[i] = malloc(sz[i] + 1);
      rb[i] = malloc(sz[i] + 1);
      tu_fill(sb[i], sz[i], (uint32_t)(round * 1000 + i), 0);
      void *d[1] = {rb[i]};
      size_t n[1] = {sz[i]};
      assert_int_equal(net->ops->irecv(net, r, 1, d, n, NULL, NULL, &rreq[i]), 0);
      assert_non_null(rreq[i]);
    }
    for (int i = 0; i < NFLIGHT; i++) {
      assert_int_equal(net->ops->isend(net, s, sb[i], sz[i], 0, NULL, &sreq[i]), 0);
      assert_non_null(sreq[i]);
    }
    for (int i = NFLIGHT - 1; i >= 0; i--) {
      size_t got = 0;
      assert_int_equal(ts_wait(net, rreq[i], &got), 0);
      assert_int_equal(got, sz[i]);
      assert_int_equal(tu_check(rb[i], sz[i], (uint32_t)(round * 1000 + i), 0), SIZE_MAX);
      assert_int_equal(ts_wait(net, sreq[i], &got), 0);
      assert_int_equal(got, sz[i]);
    }
    for (int i = 0; i < NFLIGHT; i++)
      free(sb[i]), free(rb[i]);
  }
  /* A finished request is gone: testing it again is an error, not a hang. */
  int done = 0;
  assert_int_equal(net->ops->test(net, sreq[0], &done, NULL), TPX_EINVAL);
  ts_close_pair(net, s, r);
}

/* Past TPX_SOCK_RING requests in flight, isend/irecv return 0 and no request. */
static void test_backpressure(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 2, 2);
  void *s, *r;
  ts_pair(net, &s, &r);
  static char buf[TPX_SOCK_RING + 1][8];
  void *rreq[TPX_SOCK_RING + 1], *sreq[TPX_SOCK_RING + 1];
  for (int i = 0; i < TPX_SOCK_RING; i++) {
    void *d[1] = {buf[i]};
    size_t n[1] = {8};
    assert_int_equal(net->ops->irecv(net, r, 1, d, n, NULL, NULL, &rreq[i]), 0);
    assert_non_null(rreq[i]);
  }
  void *d[1] = {buf[TPX_SOCK_RING]};
  size_t n[1] = {8};
  rreq[TPX_SOCK_RING] = (void *)0x1; /* NCCL may leave a marker there: must be overwritten */
  assert_int_equal(net->ops->irecv(net, r, 1, d, n, NULL, NULL, &rreq[TPX_SOCK_RING]), 0);
  assert_null(rreq[TPX_SOCK_RING]);
  static char out[TPX_SOCK_RING + 1][8];
  for (int i = 0; i < TPX_SOCK_RING; i++) {
    memset(out[i], i, 8);
    assert_int_equal(net->ops->isend(net, s, out[i], 8, 0, NULL, &sreq[i]), 0);
    assert_non_null(sreq[i]);
  }
  assert_int_equal(net->ops->isend(net, s, out[TPX_SOCK_RING], 8, 0, NULL, &sreq[TPX_SOCK_RING]),
                   0);
  assert_null(sreq[TPX_SOCK_RING]);
  /* Releasing the oldest frees one slot on each side. */
  assert_int_equal(ts_wait(net, rreq[0], NULL), 0);
  assert_int_equal(ts_wait(net, sreq[0], NULL), 0);
  assert_int_equal(net->ops->irecv(net, r, 1, d, n, NULL, NULL, &rreq[TPX_SOCK_RING]), 0);
  assert_non_null(rreq[TPX_SOCK_RING]);
  memset(out[TPX_SOCK_RING], 0x77, 8);
  assert_int_equal(net->ops->isend(net, s, out[TPX_SOCK_RING], 8, 0, NULL, &sreq[TPX_SOCK_RING]),
                   0);
  assert_non_null(sreq[TPX_SOCK_RING]);
  /* Releasing a later one first does not free a slot until the oldest goes. */
  for (int i = 2; i <= TPX_SOCK_RING; i++)
    assert_int_equal(ts_wait(net, rreq[i], NULL), 0);
  void *extra = (void *)0x1;
  assert_int_equal(net->ops->irecv(net, r, 1, d, n, NULL, NULL, &extra), 0);
  assert_null(extra);
  assert_int_equal(ts_wait(net, rreq[1], NULL), 0);
  for (int i = 1; i < TPX_SOCK_RING; i++) {
    unsigned char want[8];
    memset(want, i, 8);
    assert_memory_equal(buf[i], want, 8);
  }
  assert_int_equal(buf[TPX_SOCK_RING][0], 0x77);
  for (int i = 1; i <= TPX_SOCK_RING; i++)
    assert_int_equal(ts_wait(net, sreq[i], NULL), 0);
  ts_close_pair(net, s, r);
}

/* A send larger than the receive: TPX_ETRUNC, done, the excess discarded,
 * and the comm keeps working (inline and split messages). */
static void test_truncation(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 4, 2);
  void *s, *r;
  ts_pair(net, &s, &r);
  const size_t cases[][2] = {{1000, 10},      {100, 0},
                             {300000, 50000}, {5 << 20, (3 << 20) + 1},
                             {200000, 100},   {TPX_SOCK_INLINE_MAX + 1, TPX_SOCK_INLINE_MAX}};
  for (size_t k = 0; k < TPX_ARRAY_LEN(cases); k++) {
    size_t ss = cases[k][0], rs = cases[k][1];
    unsigned char *sb = malloc(ss), *rb = malloc(rs + 16);
    tu_fill(sb, ss, 7 + (uint32_t)k, 0);
    memset(rb, 0xAB, rs + 16);
    void *d[1] = {rb}, *rreq, *sreq;
    size_t n[1] = {rs};
    assert_int_equal(net->ops->irecv(net, r, 1, d, n, NULL, NULL, &rreq), 0);
    assert_int_equal(net->ops->isend(net, s, sb, ss, 0, NULL, &sreq), 0);
    uint64_t end = tpx__now_ns() + 20000000000ull;
    int done = 0, rc = 0;
    size_t got = 0;
    while (rc == 0 && !done && tpx__now_ns() < end)
      rc = net->ops->test(net, rreq, &done, &got);
    assert_int_equal(rc, TPX_ETRUNC);
    assert_int_equal(done, 1);
    assert_int_equal(got, ss);
    assert_non_null(strstr(tpx_last_error(), "larger than the posted receive"));
    assert_int_equal(tu_check(rb, rs, 7 + (uint32_t)k, 0), SIZE_MAX);
    for (size_t i = rs; i < rs + 16; i++)
      assert_int_equal(rb[i], 0xAB); /* nothing past the buffer */
    assert_int_equal(ts_wait(net, sreq, NULL), 0);
    /* The next message arrives intact. */
    ts_xfer(net, s, r, 70000 + k, 70000 + k, 99 + (uint32_t)k);
    free(sb);
    free(rb);
  }
  ts_close_pair(net, s, r);
}

/* A send smaller than the receive reports its own size. */
static void test_short_send(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 4, 2);
  void *s, *r;
  ts_pair(net, &s, &r);
  const size_t cases[][2] = {{1000, 1 << 20}, {0, 100}, {300 * 1024 + 3, 4 << 20}, {1, 2}};
  for (size_t k = 0; k < TPX_ARRAY_LEN(cases); k++)
    ts_xfer(net, s, r, cases[k][0], cases[k][1], 55 + (uint32_t)k);
  ts_close_pair(net, s, r);
}

/* Several comms on one device share the pool; all move data at once. */
#define NPAIRS 6
static void test_many_comms(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 3, 2);
  void *s[NPAIRS], *r[NPAIRS], *sreq[NPAIRS], *rreq[NPAIRS];
  unsigned char *sb[NPAIRS], *rb[NPAIRS];
  const size_t len = (1 << 20) + 333;
  for (int i = 0; i < NPAIRS; i++)
    ts_pair(net, &s[i], &r[i]);
  for (int i = 0; i < NPAIRS; i++) {
    sb[i] = malloc(len);
    rb[i] = malloc(len);
    tu_fill(sb[i], len, 500 + (uint32_t)i, 0);
    void *d[1] = {rb[i]};
    size_t n[1] = {len};
    assert_int_equal(net->ops->irecv(net, r[i], 1, d, n, NULL, NULL, &rreq[i]), 0);
    assert_int_equal(net->ops->isend(net, s[i], sb[i], len, 0, NULL, &sreq[i]), 0);
  }
  for (int i = 0; i < NPAIRS; i++) {
    assert_int_equal(ts_wait(net, rreq[i], NULL), 0);
    assert_int_equal(ts_wait(net, sreq[i], NULL), 0);
    assert_int_equal(tu_check(rb[i], len, 500 + (uint32_t)i, 0), SIZE_MAX);
    free(sb[i]);
    free(rb[i]);
  }
  for (int i = 0; i < NPAIRS; i++) {
    assert_int_equal(net->ops->close_send(net, s[i]), 0);
    assert_int_equal(net->ops->close_recv(net, r[i]), 0);
  }
  net->ops->destroy(net);
}

/* Both directions between two comm pairs, registered memory. */
static void test_registered_bidir(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 2, 2);
  void *s1, *r1, *s2, *r2;
  ts_pair(net, &s1, &r1);
  ts_pair(net, &s2, &r2);
  const size_t len = 3 << 20;
  unsigned char *a = malloc(len), *b = malloc(len), *ra = malloc(len), *rbuf = malloc(len);
  tu_fill(a, len, 1, 0);
  tu_fill(b, len, 2, 0);
  void *mha, *mhb, *mhra, *mhrb;
  assert_int_equal(net->ops->reg_mr(net, s1, a, len, TPX_PTR_HOST, &mha), 0);
  assert_int_equal(net->ops->reg_mr(net, s2, b, len, TPX_PTR_HOST, &mhb), 0);
  assert_int_equal(net->ops->reg_mr(net, r1, ra, len, TPX_PTR_HOST, &mhra), 0);
  assert_int_equal(net->ops->reg_mr(net, r2, rbuf, len, TPX_PTR_HOST, &mhrb), 0);
  void *q[4];
  void *d1[1] = {ra}, *d2[1] = {rbuf}, *m1[1] = {mhra}, *m2[1] = {mhrb};
  size_t n1[1] = {len}, n2[1] = {len};
  assert_int_equal(net->ops->irecv(net, r1, 1, d1, n1, NULL, m1, &q[0]), 0);
  assert_int_equal(net->ops->irecv(net, r2, 1, d2, n2, NULL, m2, &q[1]), 0);
  assert_int_equal(net->ops->isend(net, s1, a, len, 0, mha, &q[2]), 0);
  assert_int_equal(net->ops->isend(net, s2, b, len, 0, mhb, &q[3]), 0);
  for (int i = 0; i < 4; i++)
    assert_int_equal(ts_wait(net, q[i], NULL), 0);
  assert_int_equal(tu_check(ra, len, 1, 0), SIZE_MAX);
  assert_int_equal(tu_check(rbuf, len, 2, 0), SIZE_MAX);
  assert_int_equal(net->ops->dereg_mr(net, s1, mha), 0);
  assert_int_equal(net->ops->dereg_mr(net, s2, mhb), 0);
  assert_int_equal(net->ops->dereg_mr(net, r1, mhra), 0);
  assert_int_equal(net->ops->dereg_mr(net, r2, mhrb), 0);
  assert_int_equal(net->ops->close_send(net, s1), 0);
  assert_int_equal(net->ops->close_recv(net, r1), 0);
  ts_close_pair(net, s2, r2);
  free(a), free(b), free(ra), free(rbuf);
}

/* TPX_SOCKET_FAMILY=AF_INET6 on lo listens on ::1. */
static void test_ipv6(void **state) {
  (void)state;
  tpx_config_t cfg;
  ts_cfg(&cfg, 0, 3, 2);
  snprintf(cfg.socket_family, sizeof(cfg.socket_family), "AF_INET6");
  tpx_net_t *net = ts_open_cfg(&cfg);
  unsigned char handle[TPX_NET_HANDLE_BYTES];
  void *lc;
  assert_int_equal(net->ops->listen(net, 0, handle, &lc), 0);
  assert_int_equal(handle[6], 6); /* family field (wire.h) */
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  void *s, *r;
  ts_pair(net, &s, &r);
  ts_xfer(net, s, r, 5 << 20, 5 << 20, 66);
  ts_xfer(net, s, r, 100, 100, 67);
  ts_close_pair(net, s, r);
}

/* Properties of the lo device are filled truthfully. */
static void test_properties(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 0, 0);
  assert_string_equal(net->name, "tpx");
  assert_int_equal(net->abi_version, 0);
  int ndev = 0;
  assert_int_equal(net->ops->devices(net, &ndev), 0);
  assert_int_equal(ndev, 1); /* TPX_SOCKET_IFNAME=lo */
  tpx_net_props_t p;
  assert_int_equal(net->ops->get_properties(net, 0, &p), 0);
  assert_string_equal(p.name, "lo");
  assert_string_equal(p.pci_path, ""); /* lo has no device */
  assert_int_equal(p.ptr_support, TPX_PTR_HOST);
  assert_int_equal(p.max_recvs, 1);
  assert_true(p.max_comms >= 65536 / 2);
  assert_int_equal(p.dev_type, TPX_NET_DEV_HOST);
  assert_true(p.speed_mbps > 0);
  assert_int_equal(p.max_p2p_bytes, 1ull << 40);
  assert_int_equal(net->ops->get_properties(net, 1, &p), TPX_EINVAL);
  assert_int_equal(net->ops->get_properties(net, -1, &p), TPX_EINVAL);
  net->ops->destroy(net);
}

static int count_threads(void) {
  DIR *d = opendir("/proc/self/task");
  assert_non_null(d);
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n;
}

/* The thread count once exited threads are gone: pthread_join returns
 * before the kernel drops the task from /proc/self/task, which under load
 * takes moments (as eng_res_settled allows for the engine's tests). */
static int threads_settled(int want) {
  int n = count_threads();
  for (int i = 0; i < 300 && n != want; i++) {
    usleep(10000);
    n = count_threads();
  }
  return n;
}

static double cpu_seconds(void) {
  struct timespec ts;
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* A small pool per device (nthreads, however many comms), gone with the last
 * comm; and idle comms cost no CPU: the I/O threads sleep in epoll_wait. */
#define IDLE_PAIRS 16
static void test_threads_and_idle(void **state) {
  (void)state;
  /* The earlier tests' I/O threads may still be leaving /proc/self/task:
   * the base is the main thread alone once they are gone (or whatever
   * remains after the wait). */
  int base = threads_settled(1);
  tpx_net_t *net = ts_open(0, 4, 2);
  assert_int_equal(count_threads(), base); /* pools are created lazily */
  void *s[IDLE_PAIRS], *r[IDLE_PAIRS];
  for (int i = 0; i < IDLE_PAIRS; i++)
    ts_pair(net, &s[i], &r[i]);
  assert_int_equal(count_threads(), base + 2);
  for (int i = 0; i < IDLE_PAIRS; i++)
    ts_xfer(net, s[i], r[i], 200000, 200000, (uint32_t)i);
  /* 16 pairs x 5 sockets x 2 ends, all idle: so is the process. */
  usleep(50000);
  double c0 = cpu_seconds();
  usleep(500000);
  double used = cpu_seconds() - c0;
  if (used > 0.1) fail_msg("idle comms used %.3f s of CPU in 0.5 s", used);
  for (int i = 0; i < IDLE_PAIRS; i++) {
    assert_int_equal(net->ops->close_send(net, s[i]), 0);
    assert_int_equal(net->ops->close_recv(net, r[i]), 0);
  }
  assert_int_equal(threads_settled(base), base);
  net->ops->destroy(net);
  assert_int_equal(threads_settled(base), base);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_properties, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_sizes, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_layouts, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_inflight, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_backpressure, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_truncation, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_short_send, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_many_comms, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_registered_bidir, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_ipv6, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_threads_and_idle, tu_fd_setup, tu_fd_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
