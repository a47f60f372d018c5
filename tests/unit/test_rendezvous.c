/* The rendezvous without an etcd: base64 (strict, the network's text),
 * names, the settings and every refusal that needs no store. The store
 * itself: tests/rendezvous (a real etcd-server). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "rendezvous/base64.h"
#include "testutil.h"
#include "tpx/rendezvous.h"

static void test_base64_vectors(void **state) {
  (void)state;
  static const char *plain[] = {"", "f", "fo", "foo", "foob", "fooba", "foobar"};
  static const char *coded[] = {"", "Zg==", "Zm8=", "Zm9v", "Zm9vYg==", "Zm9vYmE=", "Zm9vYmFy"};
  for (int i = 0; i < 7; i++) {
    char out[16];
    uint8_t back[16];
    size_t n = 99;
    tpx__b64_encode(plain[i], strlen(plain[i]), out);
    assert_string_equal(out, coded[i]);
    assert_int_equal(strlen(out) + 1, tpx__b64_encoded_size(strlen(plain[i])));
    assert_int_equal(tpx__b64_decode(coded[i], strlen(coded[i]), back, sizeof(back), &n), 0);
    assert_int_equal(n, strlen(plain[i]));
    assert_memory_equal(back, plain[i], n);
  }
}

static void test_base64_roundtrip(void **state) {
  (void)state;
  uint8_t in[300], back[300];
  char text[tpx__b64_encoded_size(300)];
  for (size_t len = 0; len <= sizeof(in); len++) {
    tu_fill(in, len, (uint32_t)len, 0);
    tpx__b64_encode(in, len, text);
    size_t n = 0;
    assert_int_equal(tpx__b64_decode(text, strlen(text), back, len, &n), 0);
    assert_int_equal(n, len);
    assert_memory_equal(back, in, len);
    if (len > 0) assert_int_equal(tpx__b64_decode(text, strlen(text), back, len - 1, &n), TPX_EINVAL); /* does not fit */
  }
}

static void test_base64_strict(void **state) {
  (void)state;
  static const char *bad[] = {"Zg=", "Zg", "Z===", "====", "Zg==Zg==", "Zh==", "Zm9=", "Zm9v!A==", "Zm 9v", "Zm9v\n"};
  uint8_t out[16];
  size_t n;
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
    assert_int_equal(tpx__b64_decode(bad[i], strlen(bad[i]), out, sizeof(out), &n), TPX_EINVAL);
}

static void test_names(void **state) {
  (void)state;
  assert_true(tpx__config_name_ok("node-3.gpu_0", 64));
  char long_name[80];
  memset(long_name, 'a', sizeof(long_name));
  long_name[63] = '\0';
  assert_true(tpx__config_name_ok(long_name, 64));
  long_name[63] = 'a';
  long_name[64] = '\0';
  assert_false(tpx__config_name_ok(long_name, 64));
  static const char *bad[] = {"", "a/b", "..", ".", "a b", "a\n", "ü", "a*"};
  for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) assert_false(tpx__config_name_ok(bad[i], 64));
}

static void test_settings(void **state) {
  (void)state;
  tpx_config_t cfg;
  tpx_config_defaults(&cfg);
  assert_string_equal(cfg.etcd_endpoints, "");
  assert_int_equal(cfg.etcd_timeout_ms, 10000);
  assert_int_equal(cfg.etcd_ttl_s, 10);
  assert_int_equal(tpx_config_set(&cfg, "TPX_ETCD_JOB", "a/b"), TPX_EINVAL);
  assert_int_equal(tpx_config_set(&cfg, "etcd_job", "prefill-7"), 0);
  assert_string_equal(cfg.etcd_job, "prefill-7");
  assert_int_equal(tpx_config_set(&cfg, "TPX_ETCD_TTL_S", "1"), TPX_EINVAL);
  assert_int_equal(tpx_config_set(&cfg, "TPX_ETCD_TIMEOUT_MS", "0"), TPX_EINVAL);
  setenv("TPX_ETCD_JOB", "no/slashes", 1);
  setenv("TPX_ETCD_ENDPOINTS", "http://127.0.0.1:2379", 1);
  assert_int_equal(tpx_config_from_env(&cfg), TPX_EINVAL); /* reported, default kept */
  assert_string_equal(cfg.etcd_job, "");
  assert_string_equal(cfg.etcd_endpoints, "http://127.0.0.1:2379");
  unsetenv("TPX_ETCD_JOB");
  unsetenv("TPX_ETCD_ENDPOINTS");
}

static int open_with(const char *endpoints, const char *job, tpx_rdv_t **r) {
  tpx_config_t cfg;
  tpx_config_defaults(&cfg);
  snprintf(cfg.etcd_endpoints, sizeof(cfg.etcd_endpoints), "%s", endpoints);
  snprintf(cfg.etcd_job, sizeof(cfg.etcd_job), "%s", job);
  return tpx_rdv_open(&cfg, r);
}

static void test_open_refusals(void **state) {
  (void)state;
  tpx_rdv_t *r = NULL;
  if (!tpx_rdv_supported()) { /* a build without libcurl/jansson says so */
    assert_int_equal(open_with("http://127.0.0.1:1", "", &r), TPX_ENOTSUP);
    assert_non_null(strstr(tpx_last_error(), "libcurl"));
    return;
  }
  assert_int_equal(open_with("", "", &r), TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "TPX_ETCD_ENDPOINTS"));
  assert_int_equal(open_with("ftp://127.0.0.1:1", "", &r), TPX_EINVAL);
  assert_int_equal(open_with("http://127.0.0.1:1,,", "", &r), TPX_EINVAL);
  assert_int_equal(open_with("http://user@127.0.0.1:1", "", &r), TPX_EINVAL);
  assert_int_equal(open_with("http://127.0.0.1:1", "bad job", &r), TPX_EINVAL);
  char many[256] = "";
  for (int i = 0; i < 17; i++) strcat(many, "127.0.0.1:1,");
  many[strlen(many) - 1] = '\0';
  assert_int_equal(open_with(many, "", &r), TPX_EINVAL);
  assert_null(r);
  /* a good one talks to nobody yet; names are refused before any request */
  assert_int_equal(open_with(" 127.0.0.1:1 , http://127.0.0.1:2/ ", "", &r), 0);
  assert_string_equal(tpx_rdv_job(r), "default");
  uint8_t buf[8];
  size_t n;
  assert_int_equal(tpx_rdv_get(r, "a/b", "conn", buf, sizeof(buf), &n, 0), TPX_EINVAL);
  assert_int_equal(tpx_rdv_get(r, "ok", "", buf, sizeof(buf), &n, 0), TPX_EINVAL);
  assert_int_equal(tpx_rdv_put(r, "ok", "x", NULL, 1), TPX_EINVAL);
  assert_int_equal(tpx_rdv_put(r, "ok", "x", buf, TPX_RDV_VALUE_MAX + 1), TPX_EINVAL);
  assert_int_equal(tpx_rdv_put(r, "..", "x", buf, 1), TPX_EINVAL);
  assert_int_equal(tpx_rdv_publish_mem(r, "ok", "a/b", (const tpx_mem_t *)buf), TPX_EINVAL);
  tpx_rdv_close(r);
  tpx_rdv_close(NULL);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_base64_vectors), cmocka_unit_test(test_base64_roundtrip),
      cmocka_unit_test(test_base64_strict),  cmocka_unit_test(test_names),
      cmocka_unit_test(test_settings),       cmocka_unit_test(test_open_refusals),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
