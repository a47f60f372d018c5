/* Transport capabilities (tpx_net_t.caps), filled once by the open calls:
 * the built-in transport in its default, strict and unpack modes, fake
 * plugins (HOST, UNPACK, a HOST build named like TCPX), our own exported
 * plugin, and the one "is this spec the built-in transport" decision.
 * ctest runs this twice: plainly and with TPX_SOCK_STRICT=1, which the
 * environment-driven opens (tpx_net_open) must honour. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sock/sock.h"
#include "test_sock_util.h"

#ifndef TPX_FAKES_DIR
#error "TPX_FAKES_DIR must name the directory of the fake plugins"
#endif

/* Every device's pointer support, ANDed: what caps.host_ptr / cuda_ptr say. */
static void props_ptr_all(tpx_net_t *net, int *host, int *cuda) {
  int ndev = 0;
  assert_int_equal(net->ops->devices(net, &ndev), 0);
  assert_true(ndev >= 1);
  *host = *cuda = 1;
  for (int d = 0; d < ndev; d++) {
    tpx_net_props_t p;
    assert_int_equal(net->ops->get_properties(net, d, &p), 0);
    if (!(p.ptr_support & TPX_PTR_HOST)) *host = 0;
    if (!(p.ptr_support & TPX_PTR_CUDA)) *cuda = 0;
  }
}

static tpx_net_t *open_builtin(int strict, int unpack) {
  tpx_config_t cfg;
  ts_cfg(&cfg, strict, 0, 0);
  cfg.sock_unpack = unpack;
  return ts_open_cfg(&cfg);
}

static void test_builtin_default(void **state) {
  (void)state;
  tpx_net_t *net = open_builtin(0, 0);
  const tpx_net_caps_t *c = &net->caps;
  assert_int_equal(c->max_requests, TPX_NET_NCCL_MAX_REQUESTS);
  assert_int_equal(c->max_requests, 32);
  assert_false(c->unpack);
  assert_true(c->host_ptr);
  assert_false(c->cuda_ptr);
  assert_true(c->builtin);
  assert_true(c->flush); /* the built-in has iflush (a no-op for host memory) */
  assert_true(c->iov);   /* isendv / irecvv in plain mode */
  assert_non_null(net->ops->isendv);
  net->ops->destroy(net);
}

static void test_builtin_strict(void **state) {
  (void)state;
  tpx_net_t *net = open_builtin(1, 0);
  const tpx_net_caps_t *c = &net->caps;
  assert_int_equal(c->max_requests, TPX_NET_TCPX_MAX_REQUESTS);
  assert_int_equal(c->max_requests, 16);
  assert_int_equal(TPX_SOCK_STRICT_REQUESTS, TPX_NET_TCPX_MAX_REQUESTS);
  assert_false(c->unpack);
  assert_true(c->host_ptr);
  assert_true(c->builtin);
  assert_false(c->iov); /* the TCPX contract: one buffer per request */
  net->ops->destroy(net);
}

/* TPX_SOCK_UNPACK=1 through the environment, as users set it. */
static void test_builtin_unpack(void **state) {
  (void)state;
  const char *old = getenv("TPX_SOCK_UNPACK");
  char *saved = old ? strdup(old) : NULL;
  assert_int_equal(setenv("TPX_SOCK_UNPACK", "1", 1), 0);
  tpx_config_t cfg;
  tpx_config_from_env(&cfg);
  if (saved) {
    assert_int_equal(setenv("TPX_SOCK_UNPACK", saved, 1), 0);
    free(saved);
  } else {
    assert_int_equal(unsetenv("TPX_SOCK_UNPACK"), 0);
  }
  assert_true(cfg.sock_unpack);
  cfg.sock_strict = 0; /* unpack mode alone brings the TCPX limit */
  tpx_net_t *net = ts_open_cfg(&cfg);
  const tpx_net_caps_t *c = &net->caps;
  assert_int_equal(c->max_requests, TPX_NET_TCPX_MAX_REQUESTS);
  assert_true(c->unpack);
  assert_true(c->builtin);
  assert_true(c->flush);
  int host = 0, cuda = 0;
  props_ptr_all(net, &host, &cuda);
  assert_true(c->host_ptr);
  assert_int_equal(c->host_ptr, host);
  assert_int_equal(c->cuda_ptr, cuda); /* CUDA too when a GPU is usable */
  assert_false(c->iov);
  assert_null(net->ops->isendv);
  assert_null(net->ops->irecvv);
  net->ops->destroy(net);
}

static void test_spec_is_builtin(void **state) {
  (void)state;
  assert_true(tpx_net_spec_is_builtin(NULL));
  assert_true(tpx_net_spec_is_builtin(""));
  assert_true(tpx_net_spec_is_builtin("tpx"));
  assert_true(tpx_net_spec_is_builtin("builtin"));
  assert_false(tpx_net_spec_is_builtin("tcpx"));
  assert_false(tpx_net_spec_is_builtin("./tpx"));
  assert_false(tpx_net_spec_is_builtin("libnccl-net-tpx.so"));
  assert_false(tpx_net_spec_is_builtin(TPX_FAKES_DIR "/libnccl-net-fake-v7.so"));

  /* tpx_net_open takes the same decision: the built-in, with its caps. */
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open("builtin", &net), 0);
  assert_true(net->caps.builtin);
  assert_int_equal(net->caps.max_requests, tpx_config_global()->sock_strict
                                               ? TPX_NET_TCPX_MAX_REQUESTS
                                               : TPX_NET_NCCL_MAX_REQUESTS);
  tpx_net_close(net);
}

static tpx_net_t *open_fake(const char *name) {
  char path[512];
  snprintf(path, sizeof(path), "%s/libnccl-net-%s.so", TPX_FAKES_DIR, name);
  tpx_net_t *net = NULL;
  int rc = tpx_net_open(path, &net);
  if (rc != 0) fail_msg("tpx_net_open(%s): %d %s", path, rc, tpx_last_error());
  return net;
}

static void test_fake_host(void **state) {
  (void)state;
  tpx_net_t *net = open_fake("fake-v7");
  const tpx_net_caps_t *c = &net->caps;
  assert_string_equal(net->name, "fake_v7");
  assert_int_equal(c->max_requests, TPX_NET_NCCL_MAX_REQUESTS);
  assert_false(c->unpack);
  assert_true(c->host_ptr);
  assert_false(c->cuda_ptr);
  assert_false(c->builtin);
  assert_false(c->iov); /* ncclNet: one buffer per request */
  assert_true(c->flush);
  tpx_net_close(net);
}

static void test_fake_unpack(void **state) {
  (void)state;
  tpx_net_t *net = open_fake("fake-unpack");
  const tpx_net_caps_t *c = &net->caps;
  assert_int_equal(c->max_requests, TPX_NET_TCPX_MAX_REQUESTS); /* from the device type */
  assert_true(c->unpack);
  assert_true(c->host_ptr);
  assert_false(c->builtin);
  assert_false(c->iov); /* ncclNet: one buffer per request */
  tpx_net_close(net);
}

/* The name fallback: a HOST-type plugin named like GPUDirect-TCPX. */
static void test_fake_tcpx_name(void **state) {
  (void)state;
  tpx_net_t *net = open_fake("fake-tcpxhost");
  assert_string_equal(net->name, "GPUDirectTCPX_host");
  assert_int_equal(net->caps.max_requests, TPX_NET_TCPX_MAX_REQUESTS);
  assert_false(net->caps.unpack);
  assert_false(net->caps.builtin);
  assert_false(net->caps.iov);
  tpx_net_close(net);
}

/* Our libnccl-net-tpx.so: a plugin (not the built-in), strict when the
 * environment makes it so. */
static void test_exported_plugin(void **state) {
  (void)state;
#ifdef TPX_PLUGIN_SO
  tpx_net_t *net = NULL;
  int rc = tpx_net_open(TPX_PLUGIN_SO, &net);
  if (rc != 0) fail_msg("tpx_net_open(%s): %d %s", TPX_PLUGIN_SO, rc, tpx_last_error());
  assert_string_equal(net->name, "tpx");
  assert_false(net->caps.builtin);
  assert_false(net->caps.iov);
  assert_true(net->caps.host_ptr);
  assert_int_equal(net->caps.max_requests, tpx_config_global()->sock_strict
                                               ? TPX_NET_TCPX_MAX_REQUESTS
                                               : TPX_NET_NCCL_MAX_REQUESTS);
  tpx_net_close(net);
#else
  skip();
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_builtin_default), cmocka_unit_test(test_builtin_strict),
      cmocka_unit_test(test_builtin_unpack),  cmocka_unit_test(test_spec_is_builtin),
      cmocka_unit_test(test_fake_host),       cmocka_unit_test(test_fake_unpack),
      cmocka_unit_test(test_fake_tcpx_name),  cmocka_unit_test(test_exported_plugin),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
