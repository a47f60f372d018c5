/* Pieces of the hostile-peer bounds (docs/SECURITY.md) on their own: the
 * escaping of peer-supplied strings (common/printable.h), a rate limit with
 * its own burst (common/ratelog.h), and the built-in transport's SYN budget
 * (TPX_DIAL_SYNS): a connect to a port that refuses gives up once its
 * sockets' budget is spent, naming the setting, well before its deadline
 * and its retry count. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/printable.h"
#include "common/ratelog.h"
#include "sock/sock.h"
#include "sock/wire.h"
#include "test_sock_util.h"

static void test_printable_escapes(void **state) {
  (void)state;
  char out[128];
  const char in[] = "ok \\ line\n[tpx forged]\x1b[2J\xff";
  assert_string_equal(tpx__printable(out, sizeof(out), in, sizeof(in)),
                      "ok \\\\ line\\x0a[tpx forged]\\x1b[2J\\xff");
  for (const char *c = out; *c; c++) assert_true(*c >= 0x20 && *c <= 0x7e);
  /* bounded by len as well as by the NUL */
  assert_string_equal(tpx__printable(out, sizeof(out), "abcdef", 3), "abc");
}

static void test_printable_cut_whole(void **state) {
  (void)state;
  char out[8]; /* "ab" + "\x0a" would need 7 bytes and the NUL: 8 */
  assert_string_equal(tpx__printable(out, sizeof(out), "ab\ncd", 5), "ab\\x0ac");
  char small[5]; /* room for "ab" and not the whole escape: it is left out, never cut */
  assert_string_equal(tpx__printable(small, sizeof(small), "ab\ncd", 5), "ab");
  char one[1];
  assert_string_equal(tpx__printable(one, sizeof(one), "x", 1), "");
}

static void test_ratelog_burst(void **state) {
  (void)state;
  struct tpx_ratelog r = {0};
  uint64_t n = 0, t = 1000;
  for (int i = 0; i < 20; i++) assert_int_equal(tpx__ratelog_burst(&r, t++, 20, &n), TPX_RATELOG_FULL);
  assert_int_equal(tpx__ratelog_burst(&r, t++, 20, &n), TPX_RATELOG_SKIP);
  assert_int_equal(tpx__ratelog_burst(&r, t + TPX_RATELOG_PERIOD_NS, 20, &n), TPX_RATELOG_SUMMARY);
  assert_int_equal(n, 2); /* the skipped one and this one */
}

/* A connect (3 sockets) to a bound port that does not listen: every attempt
 * refused. With retries and time to spare, the SYN budget ends it. */
static void test_syn_budget(void **state) {
  (void)state;
  tpx_config_t cfg;
  ts_cfg(&cfg, 0, 2, 1);
  cfg.socket_retry_cnt = 1000;
  cfg.socket_retry_sleep_msec = 1;
  cfg.connect_timeout_ms = 20000;
  assert_int_equal(cfg.dial_syns, 2); /* the default */
  tpx_net_t *net = ts_open_cfg(&cfg);
  uint16_t port;
  int held = tu_held_port(&port);
  uint32_t lo = htonl(INADDR_LOOPBACK);
  uint16_t np = htons(port);
  unsigned char h[TPX_NET_HANDLE_BYTES];
  void *lc = NULL, *c = NULL;
  assert_int_equal(net->ops->listen(net, 0, h, &lc), 0);
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  tpx__put16(h + TPX_WH_FAMILY, 4); /* 127.0.0.1, whatever interface the transport listened on */
  memset(h + TPX_WH_ADDR, 0, 16);
  memcpy(h + TPX_WH_ADDR, &lo, 4);
  memcpy(h + TPX_WH_PORT, &np, 2);
  uint64_t t0 = tpx__now_ns();
  int rc = 0;
  for (int i = 0; i < 10000 && rc == 0 && c == NULL; i++) {
    rc = net->ops->connect(net, 0, h, &c, NULL);
    if (rc == 0 && c == NULL) usleep(1000);
  }
  double ms = (double)(tpx__now_ns() - t0) / 1e6;
  print_message("SYN budget: %s after %.0f ms: %s\n", tpx_strerror(rc), ms, tpx_last_error());
  assert_null(c);
  assert_int_equal(rc, TPX_EREMOTE);
  assert_non_null(strstr(tpx_last_error(), "TPX_DIAL_SYNS=2"));
  assert_true(ms < 5000); /* the budget, not the 20 s deadline */
  assert_int_equal(tpx__get64(h + TPX_WH_STATE), 0);
  close(held);
  net->ops->destroy(net);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_printable_escapes),
      cmocka_unit_test(test_printable_cut_whole),
      cmocka_unit_test(test_ratelog_burst),
      cmocka_unit_test(test_syn_budget),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
