/* Error codes, configuration parsing. */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "testutil.h"
#include "tpx/config.h"
#include "tpx/error.h"
#include "common/error.h"

static void test_strerror(void **state) {
  (void)state;
  assert_string_equal(tpx_strerror(TPX_OK), "success");
  assert_string_equal(tpx_strerror(TPX_ETRUNC), "message truncated");
  assert_string_equal(tpx_strerror(-999), "unknown error");
  assert_string_equal(tpx_strerror(5), "unknown error");
}

static void test_nccl_mapping(void **state) {
  (void)state;
  for (int r = 0; r <= 7; r++) assert_int_equal(tpx_to_nccl(tpx_from_nccl(r)), r);
  assert_int_equal(tpx_from_nccl(42), TPX_EINTERNAL);
  assert_int_equal(tpx_to_nccl(TPX_ETRUNC), 5);
}

static void test_last_error(void **state) {
  (void)state;
  int rc = tpx_err_quiet(TPX_EINVAL, "widget %d is bad", 7);
  assert_int_equal(rc, TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "widget 7 is bad"));
  assert_non_null(strstr(tpx_last_error(), "invalid argument"));
}

static void test_config_env(void **state) {
  (void)state;
  tpx_config_t cfg, def;
  tpx_config_defaults(&def);
  setenv("TPX_NSOCKS", "8", 1);
  setenv("UCCL_TCPX_CHUNK_BYTES", "1M", 1);
  setenv("TPX_LOG", "debug", 1);
  assert_int_equal(tpx_config_from_env(&cfg), 0);
  assert_int_equal(cfg.nsocks, 8);
  assert_int_equal(cfg.chunk_bytes, 1 << 20);
  assert_int_equal(cfg.log_level, TPX_LOG_DEBUG);
  /* The TPX_ name wins over its synonym. */
  setenv("TPX_CHUNK_BYTES", "65536", 1);
  assert_int_equal(tpx_config_from_env(&cfg), 0);
  assert_int_equal(cfg.chunk_bytes, 65536);
  /* Out of range or malformed: default kept, error reported. */
  setenv("TPX_CHUNK_BYTES", "8M", 1);
  setenv("TPX_NSOCKS", "many", 1);
  assert_int_equal(tpx_config_from_env(&cfg), TPX_EINVAL);
  assert_int_equal(cfg.chunk_bytes, def.chunk_bytes);
  assert_int_equal(cfg.nsocks, def.nsocks);
  unsetenv("TPX_NSOCKS");
  unsetenv("TPX_CHUNK_BYTES");
  unsetenv("UCCL_TCPX_CHUNK_BYTES");
  unsetenv("TPX_LOG");
}

/* Sockets per comm: an explicit TPX_NSOCKS wins; automatic is the machine's
 * one-comm default shared among the comms of one peer, at least 1. */
static void test_config_nsocks(void **state) {
  (void)state;
  tpx_config_t cfg;
  tpx_config_defaults(&cfg);
  assert_int_equal(cfg.nsocks, 0);
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  int one = ncpu <= 2 ? 2 : 4;
  assert_int_equal(tpx_config_nsocks(&cfg, 1), one);
  assert_int_equal(tpx_config_nsocks(&cfg, 0), one);
  assert_int_equal(tpx_config_nsocks(NULL, 1), one);
  /* Together no more data sockets than CPUs, 1..one each. */
  for (int comms = 2; comms <= 64; comms *= 2) {
    long fit = ncpu / comms;
    int want = fit < 1 ? 1 : fit > one ? one : (int)fit;
    assert_int_equal(tpx_config_nsocks(&cfg, comms), want);
  }
  assert_int_equal(tpx_config_nsocks(&cfg, (int)ncpu + 1), 1);
  cfg.nsocks = 3;
  assert_int_equal(tpx_config_nsocks(&cfg, 8), 3);
  setenv("TPX_NSOCKS", "0", 1);
  assert_int_equal(tpx_config_from_env(&cfg), 0);
  assert_int_equal(cfg.nsocks, 0);
  unsetenv("TPX_NSOCKS");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strerror),
      cmocka_unit_test(test_nccl_mapping),
      cmocka_unit_test(test_last_error),
      cmocka_unit_test(test_config_env),
      cmocka_unit_test(test_config_nsocks),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
