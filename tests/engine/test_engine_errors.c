/* The error rule (docs/ARCHITECTURE.md, docs/API.md "Errors"): a failure in
 * a layer below the engine (the transport, CUDA) is recorded there quietly
 * and logged once, by the API call that fails, with the lower layer's
 * detail, at INFO: the caller gets it (tpx_last_error() keeps that detail)
 * and reports it, so at the default level (warn) the library says nothing. */
#include <stdio.h>
#include <string.h>

#include "eng.h"

/* The built-in transport finds no interface: sock/ records why (naming
 * the variable and the interfaces that exist), the endpoint's creation logs
 * it once. */
static void test_transport_failure_logged_once(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  snprintf(cfg.socket_ifname, sizeof(cfg.socket_ifname), "=tpxnosuchif0");
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.no_listen = 1;
  tpx_endpoint_t *ep = NULL;
  tu_log_capture_t c;
  tu_log_capture_start_at(&c, TPX_LOG_INFO);
  int rc = tpx_endpoint_create(&p, &ep);
  int lines = tu_log_capture_end(&c, "tpxnosuchif0");
  assert_true(rc < 0 && rc > TPX_EUNKNOWN);
  assert_null(ep);
  assert_non_null(strstr(tpx_last_error(), "tpxnosuchif0"));
  /* the variable named, and what exists: loopback at least */
  assert_non_null(strstr(tpx_last_error(), "TPX_SOCKET_IFNAME '=tpxnosuchif0'"));
  const char *have = strstr(tpx_last_error(), "address: ");
  assert_non_null(have);
  assert_non_null(strstr(have, "lo"));
  assert_int_equal(lines, 1);
  tu_log_capture_start(&c);
  rc = tpx_endpoint_create(&p, &ep);
  assert_true(rc < 0);
  assert_int_equal(tu_log_capture_end(&c, "tpxnosuchif0"), 0);
}

/* CUDA memory the CUDA layer refuses (no GPU here; on a GPU machine a host
 * pointer is not device memory): one line, naming the call. */
static void test_cuda_failure_logged_once(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  tpx_endpoint_t *ep = eng_ep_open(&cfg, "errors");
  static char host[4096];
  tpx_mem_desc_t d;
  memset(&d, 0, sizeof(d));
  d.addr = host;
  d.len = sizeof(host);
  d.type = TPX_MEM_CUDA;
  d.device = 0;
  d.access = TPX_ACCESS_READ | TPX_ACCESS_WRITE;
  tpx_mem_t *m = NULL;
  tu_log_capture_t c;
  tu_log_capture_start_at(&c, TPX_LOG_INFO);
  int rc = tpx_mem_register(ep, &d, &m);
  int lines = tu_log_capture_end(&c, "tpx_mem_register");
  assert_true(rc < 0 && rc > TPX_EUNKNOWN);
  assert_null(m);
  assert_int_equal(lines, 1);
  tu_log_capture_start(&c);
  rc = tpx_mem_register(ep, &d, &m);
  assert_true(rc < 0);
  assert_int_equal(tu_log_capture_end(&c, "tpx_mem_register"), 0);
  tpx_endpoint_destroy(ep);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transport_failure_logged_once),
      cmocka_unit_test(test_cuda_failure_logged_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
