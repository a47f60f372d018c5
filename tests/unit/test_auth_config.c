/* The authentication key's configuration (docs/CONFIG.md, TPX_AUTH_KEY and
 * TPX_AUTH_KEY_FILE): the same checks from the environment, tpx_config_set
 * and tpx_config_set_auth_key; a key file that others may read, an empty or
 * oversize key are refused naming the problem; a refused key from the
 * environment stops endpoints (never "no key" instead); the key is never
 * printed. */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "testutil.h"
#include "tpx/tpx.h"

static char dir[64];

static int setup(void **state) {
  (void)state;
  snprintf(dir, sizeof(dir), "/tmp/tpx-authcfg-XXXXXX");
  assert_non_null(mkdtemp(dir));
  unsetenv("TPX_AUTH_KEY");
  unsetenv("TPX_AUTH_KEY_FILE");
  return 0;
}

static int teardown(void **state) {
  (void)state;
  char cmd[128];
  snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
  assert_int_equal(system(cmd), 0);
  unsetenv("TPX_AUTH_KEY");
  unsetenv("TPX_AUTH_KEY_FILE");
  return 0;
}

/* A file under dir with these bytes and mode; returns its path (static). */
static const char *key_file(const char *name, const void *data, size_t len, mode_t mode) {
  static char path[128];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC, 0600);
  assert_true(fd >= 0);
  assert_true(write(fd, data, len) == (ssize_t)len);
  assert_int_equal(fchmod(fd, mode), 0);
  close(fd);
  return path;
}

static void expect_refused(tpx_config_t *cfg, const char *key, const char *val, const char *why) {
  tpx_config_t before = *cfg;
  assert_int_equal(tpx_config_set(cfg, key, val), TPX_EINVAL);
  if (!strstr(tpx_last_error(), why)) fail_msg("'%s' does not say '%s'", tpx_last_error(), why);
  assert_memory_equal(cfg, &before, sizeof(before)); /* unchanged */
}

/* Lengths: 16..256 bytes, from either setter. */
static void test_key_length_bounds(void **state) {
  (void)state;
  tpx_config_t cfg;
  tpx_config_defaults(&cfg);
  assert_int_equal(cfg.auth_key_len, 0);
  char k[300];
  memset(k, 'k', sizeof(k));
  k[15] = 0;
  expect_refused(&cfg, "TPX_AUTH_KEY", k, "at least 16");
  expect_refused(&cfg, "auth_key", "", "empty");
  k[15] = 'k';
  k[16] = 0;
  assert_int_equal(tpx_config_set(&cfg, "auth_key", k), 0);
  assert_int_equal(cfg.auth_key_len, 16);
  assert_memory_equal(cfg.auth_key, k, 16);
  k[16] = 'k';
  k[TPX_AUTH_KEY_MAX] = 0;
  assert_int_equal(tpx_config_set(&cfg, "TPX_AUTH_KEY", k), 0);
  assert_int_equal(cfg.auth_key_len, TPX_AUTH_KEY_MAX);
  k[TPX_AUTH_KEY_MAX] = 'k';
  k[TPX_AUTH_KEY_MAX + 1] = 0;
  expect_refused(&cfg, "TPX_AUTH_KEY", k, "oversize");
  /* binary keys through the API: the same bounds */
  uint8_t bin[TPX_AUTH_KEY_MAX + 1] = {0, 1, 2, 0, 255};
  assert_int_equal(tpx_config_set_auth_key(&cfg, bin, 15), TPX_EINVAL);
  assert_int_equal(tpx_config_set_auth_key(&cfg, bin, sizeof(bin)), TPX_EINVAL);
  assert_int_equal(tpx_config_set_auth_key(&cfg, NULL, 5), TPX_EINVAL);
  assert_int_equal(tpx_config_set_auth_key(&cfg, bin, 32), 0);
  assert_int_equal(cfg.auth_key_len, 32);
  assert_memory_equal(cfg.auth_key, bin, 32);
  assert_int_equal(tpx_config_check(&cfg), 0);
  assert_int_equal(tpx_config_set_auth_key(&cfg, NULL, 0), 0); /* removed */
  assert_int_equal(cfg.auth_key_len, 0);
  /* a length set in code outside the range is refused where endpoints start */
  cfg.auth_key_len = 3;
  assert_int_equal(tpx_config_check(&cfg), TPX_EINVAL);
  cfg.auth_key_len = TPX_AUTH_KEY_MAX + 1;
  assert_int_equal(tpx_config_check(&cfg), TPX_EINVAL);
}

/* Key files: only the owner may read or write them; not a directory; the
 * content within the bounds; one trailing newline is not part of the key. */
static void test_key_file_checks(void **state) {
  (void)state;
  tpx_config_t cfg;
  tpx_config_defaults(&cfg);
  const char *good = "0123456789abcdef0123456789abcdef";
  expect_refused(&cfg, "TPX_AUTH_KEY_FILE", key_file("g", good, 32, 0640), "group or others");
  expect_refused(&cfg, "TPX_AUTH_KEY_FILE", key_file("o", good, 32, 0604), "group or others");
  expect_refused(&cfg, "TPX_AUTH_KEY_FILE", key_file("w", good, 32, 0620), "group or others");
  expect_refused(&cfg, "TPX_AUTH_KEY_FILE", key_file("e", "", 0, 0600), "empty");
  expect_refused(&cfg, "TPX_AUTH_KEY_FILE", key_file("n", "\n", 1, 0600), "empty");
  expect_refused(&cfg, "TPX_AUTH_KEY_FILE", key_file("s", "short\n", 6, 0600), "at least 16");
  static char big[TPX_AUTH_KEY_MAX + 10];
  memset(big, 'b', sizeof(big));
  expect_refused(&cfg, "TPX_AUTH_KEY_FILE", key_file("b", big, sizeof(big), 0600), "oversize");
  expect_refused(&cfg, "TPX_AUTH_KEY_FILE", dir, "not a regular file");
  char missing[128];
  snprintf(missing, sizeof(missing), "%s/none", dir);
  expect_refused(&cfg, "TPX_AUTH_KEY_FILE", missing, "No such file");
  /* accepted: 0600 and 0400, newline dropped, binary bytes kept */
  const char *p = key_file("ok", "0123456789abcdef0123456789abcdef\n", 33, 0600);
  assert_int_equal(tpx_config_set(&cfg, "TPX_AUTH_KEY_FILE", p), 0);
  assert_int_equal(cfg.auth_key_len, 32);
  assert_memory_equal(cfg.auth_key, good, 32);
  assert_string_equal(cfg.auth_key_file, p);
  uint8_t bin[20] = {0, 10, 13, 0xff, 0};
  bin[19] = 7;
  p = key_file("bin", bin, sizeof(bin), 0400);
  assert_int_equal(tpx_config_set(&cfg, "auth_key_file", p), 0);
  assert_int_equal(cfg.auth_key_len, sizeof(bin));
  assert_memory_equal(cfg.auth_key, bin, sizeof(bin));
  /* a symlink to a good file is fine (the file itself is checked) */
  char link[160];
  snprintf(link, sizeof(link), "%s/link", dir);
  assert_int_equal(symlink(p, link), 0);
  assert_int_equal(tpx_config_set(&cfg, "TPX_AUTH_KEY_FILE", link), 0);
  assert_int_equal(cfg.auth_key_len, sizeof(bin));
}

/* From the environment: a refused key never means "no key": endpoints
 * refuse to start, naming the problem; both variables at once are refused. */
static void test_env_refusal_stops_endpoints(void **state) {
  (void)state;
  tpx_config_t cfg;
  setenv("TPX_AUTH_KEY_FILE", key_file("g", "0123456789abcdef", 16, 0644), 1);
  assert_int_equal(tpx_config_from_env(&cfg), TPX_EINVAL);
  assert_int_equal(cfg.auth_key_len, 0);
  assert_non_null(strstr(cfg.auth_error, "group or others"));
  assert_int_equal(tpx_config_check(&cfg), TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "group or others"));
  tpx_endpoint_params_t ep;
  tpx_endpoint_params_init(&ep);
  ep.cfg = &cfg;
  ep.port = TPX_PORT_EPHEMERAL;
  ep.listen_host = "127.0.0.1";
  tpx_endpoint_t *e = NULL;
  assert_int_equal(tpx_endpoint_create(&ep, &e), TPX_EINVAL);
  assert_null(e);
  /* the key set in code replaces the refused one */
  assert_int_equal(tpx_config_set(&cfg, "TPX_AUTH_KEY", "0123456789abcdef"), 0);
  assert_int_equal(tpx_config_check(&cfg), 0);
  /* both set */
  setenv("TPX_AUTH_KEY_FILE", key_file("ok", "0123456789abcdef", 16, 0600), 1);
  setenv("TPX_AUTH_KEY", "0123456789abcdef", 1);
  assert_int_equal(tpx_config_from_env(&cfg), TPX_EINVAL);
  assert_non_null(strstr(cfg.auth_error, "both"));
  assert_int_equal(cfg.auth_key_len, 0);
  assert_int_equal(tpx_config_check(&cfg), TPX_EINVAL);
  /* one, good */
  unsetenv("TPX_AUTH_KEY_FILE");
  assert_int_equal(tpx_config_from_env(&cfg), 0);
  assert_int_equal(cfg.auth_key_len, 16);
  assert_int_equal(tpx_config_check(&cfg), 0);
  setenv("TPX_AUTH_KEY", "short", 1);
  assert_int_equal(tpx_config_from_env(&cfg), TPX_EINVAL);
  assert_int_equal(tpx_config_check(&cfg), TPX_EINVAL);
}

/* tpx-info's table says whether a key is set, never what it is. */
static void test_key_never_printed(void **state) {
  (void)state;
  tpx_config_t cfg;
  tpx_config_defaults(&cfg);
  assert_int_equal(tpx_config_set(&cfg, "TPX_AUTH_KEY", "do-not-print-this-secret"), 0);
  char *out = NULL;
  size_t len = 0;
  FILE *f = open_memstream(&out, &len);
  assert_non_null(f);
  tpx_config_print(&cfg, f);
  fclose(f);
  assert_null(strstr(out, "do-not-print"));
  assert_non_null(strstr(out, "(set, 24 bytes)"));
  free(out);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_setup_teardown(test_key_length_bounds, setup, teardown),
      cmocka_unit_test_setup_teardown(test_key_file_checks, setup, teardown),
      cmocka_unit_test_setup_teardown(test_env_refusal_stops_endpoints, setup, teardown),
      cmocka_unit_test_setup_teardown(test_key_never_printed, setup, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
