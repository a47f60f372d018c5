/* The error rule (docs/ARCHITECTURE.md, docs/API.md "Errors"): a failure in
 * a layer below the engine (the transport, CUDA) is recorded there quietly
 * and logged once, by the API call that fails, with the lower layer's
 * detail; tpx_last_error() keeps that detail. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "common/log.h"
#include "eng.h"

/* stderr into a file while a case runs, at the default level (the suite
 * runs at TPX_LOG=error). */
struct capture {
  char path[32];
  int fd, saved, level;
};

static void capture_start(struct capture *c) {
  snprintf(c->path, sizeof(c->path), "/tmp/tpx_errlogXXXXXX");
  c->fd = mkstemp(c->path);
  assert_true(c->fd >= 0);
  fflush(stderr);
  c->saved = dup(2);
  assert_true(c->saved >= 0);
  assert_int_equal(dup2(c->fd, 2), 2);
  c->level = tpx__log_level;
  tpx__log_level = TPX_LOG_WARN;
}

/* Lines of the captured log that contain `what`. */
static int capture_end(struct capture *c, const char *what) {
  fflush(stderr);
  tpx__log_level = c->level;
  assert_int_equal(dup2(c->saved, 2), 2);
  close(c->saved);
  close(c->fd);
  FILE *f = fopen(c->path, "r");
  assert_non_null(f);
  char line[2048];
  int n = 0;
  while (fgets(line, sizeof(line), f))
    if (strstr(line, what)) n++;
  fclose(f);
  unlink(c->path);
  return n;
}

/* The built-in transport finds no interface: sock/ records why, the
 * endpoint's creation logs it once. */
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
  struct capture c;
  capture_start(&c);
  int rc = tpx_endpoint_create(&p, &ep);
  int lines = capture_end(&c, "tpxnosuchif0");
  assert_true(rc < 0 && rc > TPX_EUNKNOWN);
  assert_null(ep);
  assert_non_null(strstr(tpx_last_error(), "tpxnosuchif0"));
  assert_int_equal(lines, 1);
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
  struct capture c;
  capture_start(&c);
  int rc = tpx_mem_register(ep, &d, &m);
  int lines = capture_end(&c, "tpx_mem_register");
  assert_true(rc < 0 && rc > TPX_EUNKNOWN);
  assert_null(m);
  assert_int_equal(lines, 1);
  tpx_endpoint_destroy(ep);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transport_failure_logged_once),
      cmocka_unit_test(test_cuda_failure_logged_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
