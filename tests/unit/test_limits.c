/* The pieces of the bounds against exhaustion by unauthenticated peers
 * (docs/SECURITY.md) that need no network: a connection's source as the
 * per-source share sees it, the rate limiter of repeated log lines, and the
 * new settings' ranges (API and environment alike). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/ratelog.h"
#include "engine/admit.h"
#include "testutil.h"
#include "tpx/config.h"
#include "tpx/error.h"

static struct tpx_src src6(const char *a) {
  struct sockaddr_in6 s = {.sin6_family = AF_INET6};
  assert_int_equal(inet_pton(AF_INET6, a, &s.sin6_addr), 1);
  struct tpx_src out;
  tpx__src_of((struct sockaddr *)&s, &out);
  return out;
}

static struct tpx_src src4(const char *a) {
  struct sockaddr_in s = {.sin_family = AF_INET};
  assert_int_equal(inet_pton(AF_INET, a, &s.sin_addr), 1);
  struct tpx_src out;
  tpx__src_of((struct sockaddr *)&s, &out);
  return out;
}

static int same(struct tpx_src a, struct tpx_src b) { return a.fam == b.fam && memcmp(a.b, b.b, sizeof(a.b)) == 0; }

/* IPv4: the address; IPv6: its /64; IPv4-mapped IPv6: the IPv4 address. */
static void test_source_key(void **state) {
  (void)state;
  assert_true(same(src4("198.18.0.1"), src4("198.18.0.1")));
  assert_false(same(src4("198.18.0.1"), src4("198.18.0.2")));
  assert_true(same(src6("2001:db8:1:2::1"), src6("2001:db8:1:2:ffff::9"))); /* one /64 */
  assert_false(same(src6("2001:db8:1:2::1"), src6("2001:db8:1:3::1")));
  assert_true(same(src6("::ffff:198.18.0.1"), src4("198.18.0.1")));
  assert_int_equal(src6("::1").fam, 6);
  struct sockaddr other = {.sa_family = AF_UNIX};
  struct tpx_src none;
  tpx__src_of(&other, &none);
  assert_int_equal(none.fam, 0);
}

/* The first TPX_RATELOG_BURST lines in full; then counted, one summary per
 * period with the count; a flush gives the rest; a quiet spell restores full
 * lines. Time is given, not read. */
static void test_ratelog(void **state) {
  (void)state;
  struct tpx_ratelog r = {0};
  uint64_t t = 1000, n = 0, counted = 0;
  for (int i = 0; i < TPX_RATELOG_BURST; i++) assert_int_equal(tpx__ratelog(&r, t++, &n), TPX_RATELOG_FULL);
  for (int i = 0; i < 1000; i++) assert_int_equal(tpx__ratelog(&r, t++, &n), TPX_RATELOG_SKIP);
  t += TPX_RATELOG_PERIOD_NS;
  assert_int_equal(tpx__ratelog(&r, t++, &n), TPX_RATELOG_SUMMARY);
  assert_int_equal(n, 1001); /* this one included */
  counted += n;
  for (int i = 0; i < 10; i++) assert_int_equal(tpx__ratelog(&r, t++, &n), TPX_RATELOG_SKIP);
  assert_int_equal(tpx__ratelog_flush(&r), 10);
  assert_int_equal(tpx__ratelog_flush(&r), 0);
  t += TPX_RATELOG_QUIET_NS + 1;
  assert_int_equal(tpx__ratelog(&r, t, &n), TPX_RATELOG_FULL);
  assert_int_equal(counted + 10, 1011); /* every line after the burst counted once */
}

/* The settings added against exhaustion: the same ranges through the API
 * and the environment. */
static void test_limit_settings(void **state) {
  (void)state;
  tpx_config_t c;
  tpx_config_defaults(&c);
  assert_int_equal(c.max_unauth_per_source, 16);
  assert_int_equal(c.max_ep_notif_bytes, 64u << 20);
  assert_int_equal(tpx_config_set(&c, "TPX_MAX_UNAUTH_PER_SOURCE", "0"), TPX_EINVAL);
  assert_int_equal(tpx_config_set(&c, "TPX_MAX_UNAUTH_PER_SOURCE", "4"), 0);
  assert_int_equal(c.max_unauth_per_source, 4);
  assert_int_equal(tpx_config_set(&c, "TPX_MAX_EP_NOTIF_BYTES", "4K"), TPX_EINVAL);
  assert_int_equal(tpx_config_set(&c, "TPX_MAX_EP_NOTIF_BYTES", "1M"), 0);
  assert_int_equal(c.max_ep_notif_bytes, 1u << 20);
  c.max_unauth_per_source = 0;
  assert_int_equal(tpx_config_check(&c), TPX_EINVAL);
  setenv("TPX_MAX_UNAUTH_PER_SOURCE", "70000", 1);
  assert_int_equal(tpx_config_from_env(&c), TPX_EINVAL);
  assert_int_equal(c.max_unauth_per_source, 16); /* refused: the default kept */
  setenv("TPX_MAX_UNAUTH_PER_SOURCE", "3", 1);
  setenv("TPX_MAX_EP_NOTIF_BYTES", "2M", 1);
  assert_int_equal(tpx_config_from_env(&c), 0);
  assert_int_equal(c.max_unauth_per_source, 3);
  assert_int_equal(c.max_ep_notif_bytes, 2u << 20);
  unsetenv("TPX_MAX_UNAUTH_PER_SOURCE");
  unsetenv("TPX_MAX_EP_NOTIF_BYTES");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_source_key),
      cmocka_unit_test(test_ratelog),
      cmocka_unit_test(test_limit_settings),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
