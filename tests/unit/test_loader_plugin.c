/* libnccl-net-tpx.so (the built-in transport exported as an NCCL plugin)
 * loaded back through our loader, once per ABI version it exports, and its
 * v11 table driven directly the way NCCL 2.28 drives it. Loopback only
 * (TPX_SOCKET_IFNAME=lo). */
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ncclnet/abi.h"
#include "ncclnet/loader.h"
#include "test_loader_util.h"

#ifndef TPX_PLUGIN_SO
#error "TPX_PLUGIN_SO is set by tests/fakes/CMakeLists.txt"
#endif

#define MIB (1024u * 1024u)

static void check_props(tpx_net_t *net, int version) {
  int ndev = 0;
  assert_int_equal(net->ops->devices(net, &ndev), 0);
  assert_true(ndev >= 1);
  tpx_net_props_t props;
  assert_int_equal(net->ops->get_properties(net, 0, &props), 0);
  assert_string_equal(props.name, "lo");
  assert_true(props.ptr_support & TPX_PTR_HOST);
  assert_int_equal(props.ptr_support & TPX_PTR_DMABUF, 0);
  assert_true(props.max_recvs >= 1);
  assert_true(props.speed_mbps > 0);
  if (version >= 9) {
    assert_true(props.max_p2p_bytes > 0);
    assert_true(props.max_p2p_bytes <= NCCLNET_MAX_NET_SIZE_BYTES);
  } else {
    assert_int_equal(props.max_p2p_bytes, SIZE_MAX); /* older ABIs do not say */
  }
}

static void through_loader(int version) {
  tpx_net_t *net = NULL;
  int rc = tpx__net_open_version(TPX_PLUGIN_SO, version, &net);
  if (rc) fail_msg("open v%d: %s", version, tpx_last_error());
  assert_int_equal(net->abi_version, version);
  assert_string_equal(net->name, "tpx");
  assert_string_equal(tpx_net_plugin_file(net), TPX_PLUGIN_SO);
  check_props(net, version);
  struct tl_pair p;
  rc = tl_connect(net, 0, &p, 1);
  if (rc) fail_msg("connect v%d: %s", version, tpx_last_error());
  assert_int_equal(p.rdev.type, TPX_NET_DEV_HOST); /* no offload on the HOST path */
  tl_transfer(net, &p, 1 * MIB, 1 * MIB, 100 + (uint32_t)version);
  tl_transfer(net, &p, 100, 1 * MIB,
              200 + (uint32_t)version); /* receive buffer larger than the send */
  tl_transfer(net, &p, 3 * MIB + 17, 4 * MIB, 300 + (uint32_t)version);
  tl_close(net, &p);
  tpx_net_close(net);
}

static void test_plugin_v11_default(void **state) {
  (void)state;
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(TPX_PLUGIN_SO, &net), 0);
  assert_int_equal(net->abi_version, 11); /* the highest it exports */
  tpx_net_close(net);
  through_loader(11);
}
static void test_plugin_v10(void **state) {
  (void)state;
  through_loader(10);
}
static void test_plugin_v9(void **state) {
  (void)state;
  through_loader(9);
}
static void test_plugin_v8(void **state) {
  (void)state;
  through_loader(8);
}
static void test_plugin_v7(void **state) {
  (void)state;
  through_loader(7);
}

static void test_builtin_specs(void **state) {
  (void)state;
  const char *specs[] = {"", "tpx", "builtin"};
  for (size_t i = 0; i < sizeof(specs) / sizeof(specs[0]); i++) {
    tpx_net_t *net = NULL;
    assert_int_equal(tpx_net_open(specs[i], &net), 0);
    assert_int_equal(net->abi_version, 0);
    assert_null(tpx_net_plugin_file(net));
    tpx_net_close(net);
  }
  /* NULL: TPX_NET_PLUGIN, unset in the test environment -> built-in. */
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(NULL, &net), 0);
  assert_int_equal(net->abi_version, 0);
  tpx_net_close(net);
}

/* ---- the v11 table as NCCL 2.28 uses it ---------------------------------------------------- */

static int log_calls;
static void nccl_logger(int level, unsigned long flags, const char *file, int line, const char *fmt,
                        ...) {
  (void)level, (void)flags, (void)file, (void)line, (void)fmt;
  log_calls++;
}

static void test_v11_table_like_nccl(void **state) {
  (void)state;
  void *dl = dlopen(TPX_PLUGIN_SO, RTLD_NOW | RTLD_LOCAL);
  assert_non_null(dl);
  ncclnet_v11_t *t = dlsym(dl, "ncclNetPlugin_v11");
  assert_non_null(t);
  assert_string_equal(t->name, "tpx");
  assert_null(dlsym(dl, "tpx_net_open_builtin")); /* only the tables are exported */
  /* What NCCL calls unconditionally must be there; optional ones as documented. */
  assert_non_null(t->init);
  assert_non_null(t->finalize);
  assert_null(t->makeVDevice); /* physical devices only */
  assert_null(t->regMrDmaBuf);

  /* Two communicators: two contexts. */
  void *ctx1 = NULL, *ctx2 = NULL;
  ncclnet_comm_config_t cfg = {NCCLNET_TRAFFIC_CLASS_UNDEF};
  assert_int_equal(t->init(&ctx1, 0x1234, &cfg, nccl_logger, NULL), 0);
  assert_int_equal(t->init(&ctx2, 0x5678, &cfg, nccl_logger, NULL), 0);
  assert_non_null(ctx1);
  assert_true(log_calls >= 1); /* the "built-in TCP transport" line */
  int ndev = 0;
  assert_int_equal(t->devices(&ndev), 0);
  assert_true(ndev >= 1);
  ncclnet_props_v11_t pr;
  memset(&pr, 0x5a, sizeof(pr));
  assert_int_equal(t->getProperties(0, &pr), 0);
  assert_string_equal(pr.name, "lo");
  assert_null(pr.pciPath);
  assert_int_equal(pr.netDeviceType, NCCLNET_DEVICE_HOST);
  assert_int_equal(pr.vProps.ndevs, 1);
  assert_int_equal(pr.vProps.devs[0], 0);
  assert_true(pr.maxP2pBytes > 0 && pr.maxP2pBytes <= NCCLNET_MAX_NET_SIZE_BYTES);
  assert_true(pr.maxCollBytes > 0 && pr.maxCollBytes <= NCCLNET_MAX_NET_SIZE_BYTES);
  assert_int_equal(pr.maxMultiRequestSize, 1);
  assert_int_equal(t->getProperties(ndev, &pr), NCCLNET_INVALID_ARGUMENT);

  ncclnet_attr_t attr;
  memset(&attr, 0xff, sizeof(attr));
  assert_int_equal(t->setNetAttr(ctx1, &attr), 0);

  /* Connect as NCCL: same handle / listen comm on every retry; HOST device
   * handles are pointers to NULL. */
  char handle[NCCLNET_HANDLE_MAXSIZE] = {0};
  void *lc = NULL, *sc = NULL, *rc = NULL;
  ncclnet_dev_handle_t *sdh = NULL, *rdh = NULL;
  assert_int_equal(t->listen(ctx1, 0, handle, &lc), 0);
  assert_non_null(lc);
  uint64_t end = tl_now() + TL_DEADLINE_NS;
  for (int i = 0; i < TL_MAX_SPINS && (!sc || !rc) && tl_now() < end; i++) {
    if (!sc) assert_int_equal(t->connect(ctx2, 0, handle, &sc, &sdh), 0);
    if (!rc) assert_int_equal(t->accept(lc, &rc, &rdh), 0);
    if (i > 100) usleep(100);
  }
  assert_non_null(sc);
  assert_non_null(rc);
  assert_null(sdh);
  assert_null(rdh);

  size_t len = 1 * MIB;
  char *s = malloc(len), *r = malloc(len);
  assert_non_null(s);
  assert_non_null(r);
  tu_fill(s, len, 77, 0);
  memset(r, 0, len);
  void *smh = NULL, *rmh = NULL;
  assert_int_equal(t->regMr(sc, s, len, NCCLNET_PTR_HOST, &smh), 0);
  assert_int_equal(t->regMr(rc, r, len, NCCLNET_PTR_HOST, &rmh), 0);
  /* NCCL may leave its optional-completion hint (0x1) in *request. */
  void *rreq = NULL, *sreq = NULL;
  void *data[1] = {r}, *mhs[1] = {rmh}, *phs[1] = {NULL};
  size_t sizes[1] = {len};
  int tags[1] = {3};
  for (int i = 0; i < TL_MAX_SPINS && rreq == NULL; i++) {
    rreq = NCCLNET_OPTIONAL_RECV_COMPLETION; /* NCCL's hint: must be overwritten */
    assert_int_equal(t->irecv(rc, 1, data, sizes, tags, mhs, phs, &rreq), 0);
    assert_true(rreq != NCCLNET_OPTIONAL_RECV_COMPLETION);
  }
  assert_non_null(rreq);
  for (int i = 0; i < TL_MAX_SPINS && sreq == NULL; i++)
    assert_int_equal(t->isend(sc, s, len, 3, smh, NULL, &sreq), 0);
  assert_non_null(sreq);
  int sdone = 0, rdone = 0, ssize = -1, rsizes[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  end = tl_now() + TL_DEADLINE_NS;
  for (int i = 0; i < TL_MAX_SPINS && (!sdone || !rdone) && tl_now() < end; i++) {
    if (!sdone) assert_int_equal(t->test(sreq, &sdone, &ssize), 0);
    if (!rdone) assert_int_equal(t->test(rreq, &rdone, rsizes), 0);
    if (i > 1000) usleep(20);
  }
  assert_true(sdone && rdone);
  assert_int_equal(rsizes[0], (int)len);
  assert_int_equal(rsizes[1], 0); /* one buffer, one size */
  assert_int_equal(tu_check(r, len, 77, 0), SIZE_MAX);
  /* NCCL calls irecvConsumed after every receive, HOST too, with the
   * request test already completed: must be harmless. */
  assert_int_equal(t->irecvConsumed(rc, 1, rreq), 0);
  /* A flush of host memory completes at once. */
  void *freq = (void *)0x1;
  int isz[1] = {(int)len};
  assert_int_equal(t->iflush(rc, 1, data, isz, mhs, &freq), 0);
  assert_null(freq);

  assert_int_equal(t->deregMr(sc, smh), 0);
  assert_int_equal(t->deregMr(rc, rmh), 0);
  assert_int_equal(t->closeSend(sc), 0);
  assert_int_equal(t->closeRecv(rc), 0);
  assert_int_equal(t->closeListen(lc), 0);
  assert_int_equal(t->finalize(ctx1), 0);
  assert_int_equal(t->finalize(ctx2), 0);
  assert_int_equal(t->finalize(NULL), 0); /* NCCL finalizes even after a failed init */

  /* Init again after the last finalize: the transport reopens. */
  void *ctx3 = NULL;
  assert_int_equal(t->init(&ctx3, 9, &cfg, nccl_logger, NULL), 0);
  assert_int_equal(t->devices(&ndev), 0);
  assert_true(ndev >= 1);
  assert_int_equal(t->finalize(ctx3), 0);
  free(s);
  free(r);
  dlclose(dl);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_builtin_specs),       cmocka_unit_test(test_plugin_v11_default),
      cmocka_unit_test(test_plugin_v10),          cmocka_unit_test(test_plugin_v9),
      cmocka_unit_test(test_plugin_v8),           cmocka_unit_test(test_plugin_v7),
      cmocka_unit_test(test_v11_table_like_nccl),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
