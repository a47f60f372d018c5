/* Built-in transport: the choice of devices and addresses from a synthetic
 * interface list (pure functions). The NCCL_SOCKET_IFNAME matcher itself is
 * tested in test_ifname.c. */
#include <arpa/inet.h>
#include <string.h>

#include "sock/sock.h"
#include "test_sock_util.h"

static tpx_sock_ifaddr_t v4(const char *name, const char *ip, int up, int loop) {
  tpx_sock_ifaddr_t a;
  memset(&a, 0, sizeof(a));
  strcpy(a.name, name);
  a.up = up;
  a.loopback = loop;
  struct sockaddr_in *s = (struct sockaddr_in *)&a.addr;
  s->sin_family = AF_INET;
  inet_pton(AF_INET, ip, &s->sin_addr);
  return a;
}

static tpx_sock_ifaddr_t v6(const char *name, const char *ip, int up, int loop) {
  tpx_sock_ifaddr_t a;
  memset(&a, 0, sizeof(a));
  strcpy(a.name, name);
  a.up = up;
  a.loopback = loop;
  struct sockaddr_in6 *s = (struct sockaddr_in6 *)&a.addr;
  s->sin6_family = AF_INET6;
  inet_pton(AF_INET6, ip, &s->sin6_addr);
  return a;
}

static const char *ip_of(const tpx_sock_ifaddr_t *a, char *buf) {
  char tmp[80];
  tpx__sock_addr_str(&a->addr, tmp, sizeof(tmp));
  strcpy(buf, tmp);
  return buf;
}

static void test_select(void **state) {
  (void)state;
  tpx_sock_ifaddr_t all[] = {
      v4("lo", "127.0.0.1", 1, 1),       v6("lo", "::1", 1, 1),
      v6("eth0", "fe80::1", 1, 0),       v4("eth0", "10.0.0.2", 1, 0),
      v6("eth0", "fd00::2", 1, 0),       v4("eth1", "10.0.1.2", 0, 0), /* down */
      v6("eth2", "fe80::2", 1, 0),       v6("eth2", "2001:db8::2", 1, 0),
      v4("docker0", "172.17.0.1", 1, 0), v4("lo", "127.0.0.2", 1, 1),
  };
  int n = (int)TPX_ARRAY_LEN(all);
  tpx_sock_ifaddr_t out[8];
  char b[80];

  /* Default (NCCL's): up, neither docker* nor lo*, first-seen order, IPv4
   * preferred. */
  int k = tpx__sock_select(NULL, 0, all, n, out, 8);
  assert_int_equal(k, 2);
  assert_string_equal(out[0].name, "eth0");
  assert_string_equal(ip_of(&out[0], b), "10.0.0.2:0");
  assert_string_equal(out[1].name, "eth2");
  assert_string_equal(ip_of(&out[1], b), "[2001:db8::2]:0"); /* global over link-local */

  /* Only loopback up: the default falls back to lo (127.0.0.1 exactly). */
  tpx_sock_ifaddr_t only_lo[] = {v4("lo", "127.0.0.2", 1, 1), v4("lo", "127.0.0.1", 1, 1),
                                 v4("eth0", "10.0.0.2", 0, 0)};
  k = tpx__sock_select("", 0, only_lo, 3, out, 8);
  assert_int_equal(k, 1);
  assert_string_equal(out[0].name, "lo");
  assert_string_equal(ip_of(&out[0], b), "127.0.0.1:0");

  /* NCCL's fallbacks: docker before lo; ib* before everything else; an
   * interface without a usable address (family) does not count. */
  tpx_sock_ifaddr_t fall[] = {v4("lo", "127.0.0.1", 1, 1), v4("docker0", "172.17.0.1", 1, 0),
                              v4("eth0", "10.0.0.2", 0, 0), v6("eth1", "fd00::1", 1, 0)};
  k = tpx__sock_select(NULL, AF_INET, fall, 4, out, 8);
  assert_int_equal(k, 1);
  assert_string_equal(out[0].name, "docker0");
  k = tpx__sock_select(NULL, 0, fall, 4, out, 8);
  assert_int_equal(k, 1);
  assert_string_equal(out[0].name, "eth1");
  tpx_sock_ifaddr_t ib[] = {v4("eth0", "10.0.0.2", 1, 0), v4("ib0", "10.1.0.2", 1, 0),
                            v4("lo", "127.0.0.1", 1, 1)};
  k = tpx__sock_select(NULL, 0, ib, 3, out, 8);
  assert_int_equal(k, 1);
  assert_string_equal(out[0].name, "ib0");
  /* An explicit list has no fallback: ^eth here means ib0 and lo. */
  k = tpx__sock_select("^eth", 0, ib, 3, out, 8);
  assert_int_equal(k, 2);
  assert_string_equal(out[0].name, "ib0");
  assert_string_equal(out[1].name, "lo");

  /* Explicit lists. */
  k = tpx__sock_select("lo", 0, all, n, out, 8);
  assert_int_equal(k, 1);
  assert_string_equal(ip_of(&out[0], b), "127.0.0.1:0");
  k = tpx__sock_select("lo", AF_INET6, all, n, out, 8);
  assert_int_equal(k, 1);
  assert_string_equal(ip_of(&out[0], b), "[::1]:0");
  k = tpx__sock_select("^docker,lo", 0, all, n, out, 8);
  assert_int_equal(k, 2);
  k = tpx__sock_select("=eth", 0, all, n, out, 8);
  assert_int_equal(k, 0);
  k = tpx__sock_select("eth", AF_INET, all, n, out, 8);
  assert_int_equal(k, 1); /* eth1 is down, eth2 has no IPv4 */
  assert_string_equal(out[0].name, "eth0");
  k = tpx__sock_select("eth", AF_INET6, all, n, out, 8);
  assert_int_equal(k, 2);
  assert_string_equal(ip_of(&out[0], b), "[fd00::2]:0");
  k = tpx__sock_select("=eth1", 0, all, n, out, 8);
  assert_int_equal(k, 0); /* down */
  /* max bounds the output. */
  k = tpx__sock_select(NULL, 0, all, n, out, 1);
  assert_int_equal(k, 1);
  assert_int_equal(tpx__sock_select("abcdefghijklmnopqrstu", 0, all, n, out, 8), TPX_EINVAL);
}

static void test_family(void **state) {
  (void)state;
  assert_int_equal(tpx__sock_parse_family(""), 0);
  assert_int_equal(tpx__sock_parse_family(NULL), 0);
  assert_int_equal(tpx__sock_parse_family("AF_INET"), AF_INET);
  assert_int_equal(tpx__sock_parse_family("af_inet6"), AF_INET6);
  assert_int_equal(tpx__sock_parse_family("6"), AF_INET6);
  assert_int_equal(tpx__sock_parse_family("AF_UNIX"), TPX_EINVAL);
}

/* The real system through the transport: no match -> TPX_ENOENT, lo -> one
 * device, a bad family -> TPX_EINVAL. */
static void test_open_ifname(void **state) {
  (void)state;
  tpx_config_t cfg;
  ts_cfg(&cfg, 0, 0, 0);
  tpx_net_t *net = NULL;
  snprintf(cfg.socket_ifname, sizeof(cfg.socket_ifname), "=nosuchif0");
  assert_int_equal(tpx_net_open_builtin(&cfg, &net), TPX_ENOENT);
  assert_null(net);
  snprintf(cfg.socket_ifname, sizeof(cfg.socket_ifname), "=lo");
  snprintf(cfg.socket_family, sizeof(cfg.socket_family), "AF_BOGUS");
  assert_int_equal(tpx_net_open_builtin(&cfg, &net), TPX_EINVAL);
  cfg.socket_family[0] = '\0';
  assert_int_equal(tpx_net_open_builtin(&cfg, &net), 0);
  int ndev = 0;
  assert_int_equal(net->ops->devices(net, &ndev), 0);
  assert_int_equal(ndev, 1);
  net->ops->destroy(net);
  /* The default (no list) finds at least one device on any machine. */
  cfg.socket_ifname[0] = '\0';
  assert_int_equal(tpx_net_open_builtin(&cfg, &net), 0);
  assert_int_equal(net->ops->devices(net, &ndev), 0);
  assert_true(ndev >= 1);
  for (int i = 0; i < ndev; i++) {
    tpx_net_props_t p;
    assert_int_equal(net->ops->get_properties(net, i, &p), 0);
    assert_true(p.speed_mbps > 0);
    if (ndev > 1 || strcmp(p.name, "lo") != 0) assert_string_not_equal(p.name, "lo");
  }
  net->ops->destroy(net);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_select),
      cmocka_unit_test(test_family),
      cmocka_unit_test(test_open_ifname),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
