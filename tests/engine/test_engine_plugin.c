/* Endpoints on loaded plugins (the fakes of tests/fakes): one plugin instance
 * per process shared by every endpoint (a plugin that refuses a second init
 * still serves two), v11 finalize only when the last endpoint goes,
 * TPX_NET_ABI through the configuration, and TPX_GPU_NIC_MAP choosing the
 * net devices of an endpoint's channels. */
#include <stdio.h>
#include <string.h>

#include "engine/core.h"
#include "engine/placement.h"
#include "eng.h"
#include "fake_open.h"

static void fake_cfg(tpx_config_t *c, const char *fake) {
  eng_cfg(c);
  snprintf(c->net_plugin, sizeof(c->net_plugin), "%s", fake_path(fake));
  c->num_channels = 4;
}

static void assert_error_mentions(const char *what) {
  if (strstr(tpx_last_error(), what) == NULL) fail_msg("last error '%s' lacks '%s'", tpx_last_error(), what);
}

/* Two connected endpoints on a plugin whose second init fails: one init,
 * one instance, data moves. */
static void test_shared_instance(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold("fake-initonce", &dl);
  tpx_config_t c;
  fake_cfg(&c, "fake-initonce");
  eng_pair_t P;
  eng_pair_open(&P, &c);
  assert_int_equal(st->init, 1);
  assert_ptr_equal(P.a->net, P.b->net);
  assert_string_equal(tpx_endpoint_transport(P.a), "fake_v7");
  eng_buf_t src, dst;
  eng_buf(P.a, 3u << 20, 0, &src);
  eng_buf(P.b, 3u << 20, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &dst);
  eng_write_check(P.ab, &src, &dst, 77);
  eng_buf_free(&src);
  eng_buf_free(&dst);
  eng_pair_close(&P);
  assert_int_equal(st->init, 1);
  assert_int_equal(st->live_comms, 0);
  dlclose(dl);
}

static tpx_endpoint_t *ep_open(const tpx_config_t *c, int gpu) {
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = c;
  p.gpu = gpu;
  p.no_listen = 1;
  tpx_endpoint_t *ep = NULL;
  int rc = tpx_endpoint_create(&p, &ep);
  if (rc) fail_msg("endpoint on %s: %s", c->net_plugin, tpx_last_error());
  return ep;
}

static int ep_fails(const tpx_config_t *c, int gpu) {
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = c;
  p.gpu = gpu;
  p.no_listen = 1;
  tpx_endpoint_t *ep = (tpx_endpoint_t *)0x1;
  int rc = tpx_endpoint_create(&p, &ep);
  assert_null(ep);
  return rc;
}

/* v11: finalize when the last endpoint closes, never before; init once. */
static void test_v11_finalize_last(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold("fake-v11", &dl);
  tpx_config_t c;
  fake_cfg(&c, "fake-v11");
  tpx_endpoint_t *a = ep_open(&c, 0), *b = ep_open(&c, 1);
  assert_int_equal(st->init, 1);
  tpx_endpoint_destroy(a);
  assert_int_equal(st->finalize, 0);
  tpx_endpoint_destroy(b);
  assert_int_equal(st->finalize, 1);
  /* Loaded again afterwards: a new instance, initialised again. */
  a = ep_open(&c, 0);
  assert_int_equal(st->init, 2);
  tpx_endpoint_destroy(a);
  assert_int_equal(st->finalize, 2);
  dlclose(dl);
}

/* cfg.net_abi (TPX_NET_ABI) forces the table; range-checked like the environment. */
static void test_net_abi(void **state) {
  (void)state;
  tpx_config_t c;
  fake_cfg(&c, "fake-all");
  for (int v = 7; v <= 12; v++) {
    c.net_abi = v;
    tpx_endpoint_t *ep = ep_open(&c, 0);
    char want[16];
    snprintf(want, sizeof(want), "fake_v%d", v & 0xff);
    assert_string_equal(tpx_endpoint_transport(ep), want);
    assert_int_equal(ep->net->abi_version, v);
    tpx_endpoint_destroy(ep);
  }
  c.net_abi = 6;
  assert_int_equal(ep_fails(&c, 0), TPX_EINVAL);
  c.net_abi = 13;
  assert_int_equal(ep_fails(&c, 0), TPX_EINVAL);
  fake_cfg(&c, "fake-v11");
  c.net_abi = 7;
  assert_int_equal(ep_fails(&c, 0), TPX_EVERSION);
  assert_error_mentions("no ncclNetPlugin_v7, which TPX_NET_ABI=7 forces; it exports ncclNetPlugin_v11");
  /* A loaded instance is never initialised again at another version. */
  fake_cfg(&c, "fake-all");
  tpx_endpoint_t *ep = ep_open(&c, 0);
  assert_int_equal(ep->net->abi_version, 12);
  c.net_abi = 9;
  assert_int_equal(ep_fails(&c, 1), TPX_EUSAGE);
  assert_error_mentions("already loaded in this process at ncclNet v12");
  c.net_abi = 12;
  tpx_endpoint_t *same = ep_open(&c, 1);
  assert_ptr_equal(same->net, ep->net);
  tpx_endpoint_destroy(same);
  tpx_endpoint_destroy(ep);
}

/* The fakes have two devices, fake0 and fake1. */
static void test_gpu_nic_map(void **state) {
  (void)state;
  tpx_config_t c;
  fake_cfg(&c, "fake-all");
  tpx_endpoint_t *ep = ep_open(&c, 1); /* no map, no topology: (c + gpu) % ndev as before */
  assert_int_equal(ep->nchdev, 0);
  for (int ch = 0; ch < 4; ch++)
    assert_int_equal(tpx__placement_dev(ep, ch), (ch + 1) % 2);
  tpx_endpoint_destroy(ep);

  snprintf(c.gpu_nic_map, sizeof(c.gpu_nic_map), "0-3:fake1;4-7:fake1,fake0");
  ep = ep_open(&c, 2);
  assert_int_equal(ep->nchdev, 1);
  for (int ch = 0; ch < 4; ch++)
    assert_int_equal(tpx__placement_dev(ep, ch), 1);
  tpx_endpoint_destroy(ep);
  ep = ep_open(&c, 4); /* both, in the map's order, spread from the GPU's offset */
  assert_int_equal(ep->nchdev, 2);
  for (int ch = 0; ch < 4; ch++)
    assert_int_equal(tpx__placement_dev(ep, ch), (ch + 4) % 2 == 0 ? 1 : 0);
  tpx_endpoint_destroy(ep);
  ep = ep_open(&c, 9); /* not in the map: as before */
  assert_int_equal(ep->nchdev, 0);
  tpx_endpoint_destroy(ep);

  snprintf(c.gpu_nic_map, sizeof(c.gpu_nic_map), "0:fake9");
  assert_int_equal(ep_fails(&c, 0), TPX_EINVAL);
  assert_error_mentions("'fake9' is not one of the transport's (fake0, fake1)");
  snprintf(c.gpu_nic_map, sizeof(c.gpu_nic_map), "0;fake1");
  assert_int_equal(ep_fails(&c, 0), TPX_EINVAL);
  assert_error_mentions("'0' has no ':'");
}

/* Channels on the mapped device carry data end to end. */
static void test_map_transfer(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold("fake-all", &dl);
  tpx_config_t c;
  fake_cfg(&c, "fake-all");
  snprintf(c.gpu_nic_map, sizeof(c.gpu_nic_map), "0-7:fake1");
  eng_pair_t P;
  eng_pair_open(&P, &c);
  eng_buf_t src, dst;
  eng_buf(P.a, 2u << 20, 0, &src);
  eng_buf(P.b, 2u << 20, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &dst);
  eng_write_check(P.ab, &src, &dst, 78);
  assert_int_equal(st->listen_dev[0], 0); /* every channel of both sides on fake1 */
  assert_true(st->listen_dev[1] >= 4);
  assert_int_equal(st->connect_dev_calls[0], 0);
  assert_true(st->connect_dev_calls[1] >= 4);
  eng_buf_free(&src);
  eng_buf_free(&dst);
  eng_pair_close(&P);
  dlclose(dl);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_shared_instance),
      cmocka_unit_test(test_v11_finalize_last),
      cmocka_unit_test(test_net_abi),
      cmocka_unit_test(test_gpu_nic_map),
      cmocka_unit_test(test_map_transfer),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
