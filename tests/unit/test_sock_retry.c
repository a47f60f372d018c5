/* Built-in transport: connects ride out transient errors (docs/RELIABILITY.md,
 * "Connection setup"). The peer's port is held by a bound socket that does
 * not listen, so connects to it are refused (and no other test can take the
 * port meanwhile); when the socket starts listening, the listener "appears".
 * Refused connects are retried until TPX_CONNECT_TIMEOUT_MS and fail there,
 * not before, naming every attempt's cause; a listener that appears 200 ms
 * after the first attempt gets the comm; TPX_SOCKET_RETRY_CNT bounds the
 * attempts; the settings, their NCCL synonyms and range checks. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sock/sock.h"
#include "sock/wire.h"
#include "test_sock_util.h"

static double ms_since(uint64_t t0) { return (double)(tpx__now_ns() - t0) / 1e6; }

/* A socket bound to 127.0.0.1:<ephemeral>, not listening: connects to it
 * are refused. Its port goes into *port. */
static int held_port(int *port) {
  uint16_t p;
  int fd = tu_held_port(&p);
  *port = p;
  return fd;
}

/* A listen handle of net, pointed at port (the listen comm closed again). */
static void handle_for(tpx_net_t *net, int port, unsigned char *h) {
  void *lc = NULL;
  assert_int_equal(net->ops->listen(net, 0, h, &lc), 0);
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  uint16_t p = htons((uint16_t)port);
  memcpy(h + TPX_WH_PORT, &p, 2);
}

/* The transport with these retry settings, a held port and a handle to it. */
static tpx_net_t *open_retry(int retries, int sleep_ms, int timeout_ms, int *held, unsigned char *h) {
  tpx_config_t cfg;
  ts_cfg(&cfg, 0, 2, 1);
  cfg.socket_retry_cnt = retries;
  cfg.socket_retry_sleep_msec = sleep_ms;
  cfg.connect_timeout_ms = timeout_ms;
  cfg.dial_syns = 100000; /* the retry count and the deadline are what is shown here (the budget: test_sock_hostile) */
  tpx_net_t *net = ts_open_cfg(&cfg);
  int port;
  *held = held_port(&port);
  handle_for(net, port, h);
  return net;
}

/* Calls connect with the same buffer until it ends (bounded by limit_ms). */
static int connect_until_end(tpx_net_t *net, unsigned char *h, void **c, int limit_ms) {
  uint64_t t0 = tpx__now_ns();
  int rc = 0;
  while (rc == 0 && *c == NULL && ms_since(t0) < limit_ms) {
    rc = net->ops->connect(net, 0, h, c, NULL);
    if (rc == 0 && *c == NULL) usleep(1000);
  }
  return rc;
}

static void test_refused_until_deadline(void **state) {
  (void)state;
  int fds = tu_count_fds();
  int held;
  unsigned char h[TPX_NET_HANDLE_BYTES];
  tpx_net_t *net = open_retry(1000, 20, 600, &held, h);
  void *c = NULL;
  uint64_t t0 = tpx__now_ns();
  int rc = connect_until_end(net, h, &c, 20000);
  double took = ms_since(t0);
  print_message("refused for good: %s after %.0f ms: %s\n", tpx_strerror(rc), took, tpx_last_error());
  assert_null(c);
  assert_int_equal(rc, TPX_ETIMEDOUT);
  assert_true(took >= 600); /* at the deadline, not before */
  assert_true(took < 600 + 10000);
  assert_non_null(strstr(tpx_last_error(), "Connection refused (attempts 1-"));
  assert_int_equal(tpx__get64(h + TPX_WH_STATE), 0); /* nothing left behind */
  close(held);
  net->ops->destroy(net);
  assert_int_equal(tu_count_fds(), fds);
}

static void test_listener_appears(void **state) {
  (void)state;
  int fd;
  unsigned char h[TPX_NET_HANDLE_BYTES];
  tpx_net_t *net = open_retry(1000, 20, 10000, &fd, h);
  void *c = NULL;
  uint64_t t0 = tpx__now_ns();
  assert_int_equal(net->ops->connect(net, 0, h, &c, NULL), 0); /* refused: retries pending */
  assert_null(c);
  while (ms_since(t0) < 200) assert_int_equal(net->ops->connect(net, 0, h, &c, NULL), 0), usleep(2000);
  assert_null(c);
  assert_int_equal(listen(fd, 16), 0); /* the listener appears */
  int rc = connect_until_end(net, h, &c, 20000);
  print_message("listener after 200 ms: %s, comm after %.0f ms\n", tpx_strerror(rc), ms_since(t0));
  assert_int_equal(rc, 0);
  assert_non_null(c);
  /* Every data socket (and the control one) arrived, each with its hello. */
  for (int i = 0; i < 3; i++) {
    int a = accept(fd, NULL, NULL);
    assert_true(a >= 0);
    uint8_t hello[TPX_WIRE_HELLO_BYTES];
    assert_int_equal(recv(a, hello, sizeof(hello), MSG_WAITALL), (ssize_t)sizeof(hello));
    assert_int_equal(tpx__get32(hello), TPX_WIRE_HELLO_MAGIC);
    close(a);
  }
  assert_int_equal(net->ops->close_send(net, c), 0);
  close(fd);
  net->ops->destroy(net);
}

static void test_retry_count(void **state) {
  (void)state;
  int held;
  unsigned char h[TPX_NET_HANDLE_BYTES];
  tpx_net_t *net = open_retry(2, 1, 60000, &held, h);
  void *c = NULL;
  int rc = connect_until_end(net, h, &c, 20000);
  print_message("two retries: %s: %s\n", tpx_strerror(rc), tpx_last_error());
  assert_int_equal(rc, TPX_EREMOTE);
  assert_non_null(strstr(tpx_last_error(), "after 3 attempts (TPX_SOCKET_RETRY_CNT=2)"));
  close(held);
  net->ops->destroy(net);
}

static void test_retry_settings(void **state) {
  (void)state;
  tpx_config_t cfg;
  tpx_config_defaults(&cfg);
  assert_int_equal(cfg.socket_retry_cnt, 34);
  assert_int_equal(cfg.socket_retry_sleep_msec, 100);
  assert_int_equal(tpx_config_set(&cfg, "NCCL_SOCKET_RETRY_CNT", "5"), 0);
  assert_int_equal(cfg.socket_retry_cnt, 5);
  assert_int_equal(tpx_config_set(&cfg, "socket_retry_sleep_msec", "250"), 0);
  assert_int_equal(cfg.socket_retry_sleep_msec, 250);
  assert_int_equal(tpx_config_set(&cfg, "TPX_SOCKET_RETRY_CNT", "-1"), TPX_EINVAL);
  assert_int_equal(tpx_config_set(&cfg, "TPX_SOCKET_RETRY_SLEEP_MSEC", "0"), TPX_EINVAL);
  cfg.socket_retry_sleep_msec = 0; /* the API's struct: the same range */
  assert_int_equal(tpx_config_check(&cfg), TPX_EINVAL);
  setenv("NCCL_SOCKET_RETRY_SLEEP_MSEC", "7", 1);
  setenv("NCCL_SOCKET_RETRY_CNT", "3", 1);
  setenv("TPX_SOCKET_RETRY_CNT", "4", 1); /* ours wins over NCCL's */
  assert_int_equal(tpx_config_from_env(&cfg), 0);
  assert_int_equal(cfg.socket_retry_sleep_msec, 7);
  assert_int_equal(cfg.socket_retry_cnt, 4);
  setenv("TPX_SOCKET_RETRY_CNT", "10001", 1);
  assert_int_equal(tpx_config_from_env(&cfg), TPX_EINVAL); /* out of range: default kept */
  assert_int_equal(cfg.socket_retry_cnt, 34);
  unsetenv("NCCL_SOCKET_RETRY_SLEEP_MSEC");
  unsetenv("NCCL_SOCKET_RETRY_CNT");
  unsetenv("TPX_SOCKET_RETRY_CNT");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_refused_until_deadline),
      cmocka_unit_test(test_listener_appears),
      cmocka_unit_test(test_retry_count),
      cmocka_unit_test(test_retry_settings),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
