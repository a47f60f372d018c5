/* The plugin loader against the fake plugins of tests/fakes: finding files,
 * probing versions, clear errors, and each per-version adapter end to end. */
#include <dlfcn.h>
#include <limits.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fake_open.h"
#include "fake_stats.h"
#include "ncclnet/adapt.h"
#include "ncclnet/loader.h"
#include "test_loader_util.h"
#include "tpx/tcpx.h"

static void assert_error_mentions(const char *what) {
  if (strstr(tpx_last_error(), what) == NULL)
    fail_msg("last error '%s' lacks '%s'", tpx_last_error(), what);
}

/* ---- errors ----------------------------------------------------------------------------- */

static void test_missing_path(void **state) {
  (void)state;
  tpx_net_t *net = (tpx_net_t *)0x1;
  assert_int_equal(tpx_net_open("/nonexistent/dir/libnccl-net-x.so", &net), TPX_ENOENT);
  assert_null(net);
  assert_error_mentions("/nonexistent/dir/libnccl-net-x.so");
  assert_error_mentions("No such file or directory"); /* dlerror text */
}

static void test_missing_bare_name(void **state) {
  (void)state;
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open("nosuchplugin", &net), TPX_ENOENT);
  assert_null(net);
  assert_error_mentions("libnccl-net-nosuchplugin.so");
  assert_error_mentions("/usr/local/tcpx/lib64/libnccl-net-nosuchplugin.so");
  assert_error_mentions("No such file or directory");
}

static void test_not_a_library(void **state) {
  (void)state;
  /* Exists but is no shared object: a load failure, not "not found". */
  char path[] = "/tmp/libnccl-net-junk-XXXXXX.so";
  int fd = mkstemps(path, 3);
  assert_true(fd >= 0);
  assert_int_equal(write(fd, "not an ELF file\n", 16), 16);
  close(fd);
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(path, &net), TPX_ESYSTEM);
  assert_null(net);
  assert_error_mentions("cannot be loaded");
  assert_error_mentions(path);
  unlink(path);
}

static void test_no_symbol(void **state) {
  (void)state;
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(fake_path("fake-nosym"), &net), TPX_ENOSYM);
  assert_null(net);
  assert_error_mentions("no ncclNetPlugin_vN symbol");
}

static void test_v6_only(void **state) {
  (void)state;
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(fake_path("fake-v6"), &net), TPX_EVERSION);
  assert_null(net);
  assert_error_mentions("ncclNetPlugin_v6");
}

static void test_init_fails(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold("fake-initfail", &dl);
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(fake_path("fake-initfail"), &net),
                   TPX_ESYSTEM); /* ncclSystemError */
  assert_null(net);
  assert_error_mentions("init failed");
  assert_int_equal(st->init, 1);
  assert_int_equal(st->devices, 0);
  dlclose(dl);
}

static void test_bad_arguments_to_open(void **state) {
  (void)state;
  assert_int_equal(tpx_net_open(fake_path("fake-v7"), NULL), TPX_EINVAL);
  tpx_net_t *net = NULL;
  assert_int_equal(tpx__net_open_version(fake_path("fake-v7"), 6, &net), TPX_EINVAL);
  assert_int_equal(tpx__net_open_version(fake_path("fake-v7"), 13, &net), TPX_EINVAL);
  tpx_net_close(NULL); /* no-op */
}

/* ---- probing and search --------------------------------------------------------------------- */

static void test_probe_highest(void **state) {
  (void)state;
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(fake_path("fake-all"), &net), 0);
  assert_int_equal(net->abi_version, 12);
  assert_string_equal(net->name, "fake_v12");
  assert_string_equal(tpx_net_plugin_file(net), fake_path("fake-all"));
  tpx_net_close(net);
  for (int v = 7; v <= 12; v++) {
    char want[32];
    snprintf(want, sizeof(want), "fake_v%d", v & 0xff);
    assert_int_equal(tpx__net_open_version(fake_path("fake-all"), v, &net), 0);
    assert_int_equal(net->abi_version, v);
    assert_string_equal(net->name, want);
    tpx_net_close(net);
  }
  /* Only v11 exported, v7..v9 asked for: nothing usable, and the error says what is there. */
  assert_int_equal(tpx__net_open_version(fake_path("fake-v11"), 9, &net), TPX_EVERSION);
  assert_error_mentions("ncclNetPlugin_v11");
}

static void test_bare_name_search(void **state) {
  (void)state;
  /* "fake-v8" is no file; libnccl-net-fake-v8.so is found through
   * LD_LIBRARY_PATH (set by main), i.e. the normal dlopen search. */
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open("fake-v8", &net), 0);
  assert_int_equal(net->abi_version, 8);
  const char *file = tpx_net_plugin_file(net);
  assert_non_null(file);
  assert_non_null(strstr(file, "libnccl-net-fake-v8.so"));
  tpx_net_close(net);
  /* A file name without a slash is also tried as given. */
  assert_int_equal(tpx_net_open("libnccl-net-fake-v9.so", &net), 0);
  assert_int_equal(net->abi_version, 9);
  tpx_net_close(net);
}

/* ---- each adapter end to end -------------------------------------------------------------------
 */

static void exercise(const char *fake, int version) {
  void *dl;
  struct fake_stats *st = hold(fake, &dl);
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(fake_path(fake), &net), 0);
  assert_int_equal(net->abi_version, version);
  assert_int_equal(st->version, version);
  assert_int_equal(st->init, 1);
  assert_true(st->logger_set);

  int ndev = -1;
  assert_int_equal(net->ops->devices(net, &ndev), 0);
  assert_int_equal(ndev, 2);
  tpx_net_props_t props;
  assert_int_equal(net->ops->get_properties(net, 1, &props), 0);
  assert_string_equal(props.name, "fake1");
  assert_string_equal(props.pci_path, "");
  assert_int_equal(props.guid, 0x1001);
  assert_int_equal(props.ptr_support, TPX_PTR_HOST);
  assert_int_equal(props.speed_mbps, 100000);
  assert_int_equal(props.max_recvs, 1);
  assert_int_equal(props.max_comms, 1024);
  assert_int_equal(props.dev_type, TPX_NET_DEV_HOST);
  assert_int_equal(props.reg_is_global, version >= 8);
  assert_true(props.latency_us > 1.4f && props.latency_us < 1.6f);
  assert_int_equal(props.max_p2p_bytes, version >= 9 ? (size_t)1 << 36 : SIZE_MAX);
  assert_int_equal(props.max_coll_bytes, version >= 9 ? (size_t)1 << 29 : SIZE_MAX);
  /* railId / planeId: v12 only; the fake leaves them undefined on dev 1. */
  assert_int_equal(props.rail_id, -1);
  assert_int_equal(props.plane_id, -1);
  assert_int_equal(net->ops->get_properties(net, 0, &props), 0);
  assert_int_equal(props.rail_id, version >= 12 ? 3 : -1);
  assert_int_equal(props.plane_id, version >= 12 ? 1 : -1);

  /* Optional entries follow the table. */
  assert_null(net->ops->get_device_mr);
  assert_null(net->ops->irecv_consumed);
  assert_non_null(net->ops->iflush);

  struct tl_pair p;
  assert_int_equal(tl_connect(net, 1, &p, 1), 0);
  assert_true(st->connect_pending >= 1);
  assert_true(st->accept_pending >= 1);
  /* HOST plugin: the device storage is reported as "no offload". */
  assert_int_equal(p.rdev.type, TPX_NET_DEV_HOST);
  assert_null(p.rdev.handle);
  assert_int_equal(p.rdev.needs_proxy_progress, 1);
  assert_null(st->accept_dev);
  assert_null(st->connect_dev);
  if (version >= 11) assert_true(st->ctx_ok);
  if (version >= 10) assert_int_equal(st->traffic_class, -1);

  tl_transfer(net, &p, 65536, 65536, 11);
  tl_transfer(net, &p, 1000, 4096, 12); /* larger receive buffer */
  tl_transfer(net, &p, 0, 16, 13);      /* empty message */
  assert_int_equal(st->last_isend_size, 0);
  assert_int_equal(st->last_irecv_size, 16);

  /* A receive smaller than the send fails in test with the plugin's code. */
  {
    char s[64] = {0}, r[32];
    void *smh, *rmh, *sreq, *rreq;
    assert_int_equal(net->ops->reg_mr(net, p.sc, s, sizeof(s), TPX_PTR_HOST, &smh), 0);
    assert_int_equal(net->ops->reg_mr(net, p.rc, r, sizeof(r), TPX_PTR_HOST, &rmh), 0);
    assert_int_equal(tl_irecv(net, p.rc, r, sizeof(r), 1, rmh, &rreq), 0);
    assert_int_equal(tl_isend(net, p.sc, s, sizeof(s), 1, smh, &sreq), 0);
    assert_int_equal(tl_wait(net, rreq, NULL), TPX_EUSAGE);
    assert_int_equal(tl_wait(net, sreq, NULL), TPX_EUSAGE);
    assert_int_equal(net->ops->dereg_mr(net, p.sc, smh), 0);
    assert_int_equal(net->ops->dereg_mr(net, p.rc, rmh), 0);
  }

  /* iflush: completes at once in the fake (request NULL means done). */
  {
    char r[16];
    void *data[1] = {r}, *mhs[1] = {NULL}, *req = (void *)0x1;
    size_t sizes[1] = {sizeof(r)};
    assert_int_equal(net->ops->iflush(net, p.rc, 1, data, sizes, mhs, &req), 0);
    assert_null(req);
    assert_int_equal(st->iflush, 1);
  }

  tl_close(net, &p);
  assert_int_equal(st->live_comms, 0);
  assert_int_equal(st->live_reqs, 0);
  assert_int_equal(st->live_mrs, 0);
  int fin = st->finalize;
  tpx_net_close(net);
  assert_int_equal(st->finalize, fin + (version >= 11));
  dlclose(dl);
}

static void test_adapter_v7(void **state) {
  (void)state;
  exercise("fake-v7", 7);
}
static void test_adapter_v8(void **state) {
  (void)state;
  exercise("fake-v8", 8);
}
static void test_adapter_v9(void **state) {
  (void)state;
  exercise("fake-v9", 9);
}
static void test_adapter_v10(void **state) {
  (void)state;
  exercise("fake-v10", 10);
}
static void test_adapter_v11(void **state) {
  (void)state;
  exercise("fake-v11", 11);
}
static void test_adapter_v12(void **state) {
  (void)state;
  exercise("fake-v12", 12);
}

/* v12 properties keep all 8 vProps devices, and a v11 table read through the
 * v12-wide conversion keeps its 4 (the layouts differ from vProps on). */
static void test_props_v12_wide(void **state) {
  (void)state;
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(fake_path("fake-v12"), &net), 0);
  struct tpx_plugin *p = (struct tpx_plugin *)net->impl;
  ncclnet_props_v12_t w;
  assert_int_equal(tpx__adapt_props(p, 0, &w), 0);
  assert_int_equal(w.vProps.ndevs, 8);
  assert_int_equal(w.vProps.devs[7], 7);
  assert_int_equal(w.maxP2pBytes, (size_t)1 << 36);
  assert_int_equal(w.maxMultiRequestSize, 1);
  assert_int_equal(w.railId, 3);
  tpx_net_close(net);
  assert_int_equal(tpx_net_open(fake_path("fake-v11"), &net), 0);
  p = (struct tpx_plugin *)net->impl;
  assert_int_equal(tpx__adapt_props(p, 1, &w), 0);
  assert_int_equal(w.vProps.ndevs, 1);
  assert_int_equal(w.vProps.devs[0], 1);
  assert_int_equal(w.maxP2pBytes, (size_t)1 << 36);
  assert_int_equal(w.maxCollBytes, (size_t)1 << 29);
  assert_int_equal(w.railId, NCCLNET_ID_UNDEF);
  assert_int_equal(w.planeId, NCCLNET_ID_UNDEF);
  tpx_net_close(net);
}

/* A plugin named like GPUDirect-TCPX gets its unsafe NCCL_* defaults filled
 * in before init; values the user set stay (and are reported unsafe). */
static void test_tcpx_env_filled(void **state) {
  (void)state;
  unsetenv("NCCL_DYNAMIC_CHUNK_SIZE");
  unsetenv("NCCL_MIN_ZCOPY_SIZE");
  setenv("NCCL_GPUDIRECTTCPX_RECV_SYNC", "0", 1);
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(fake_path("fake-v7"), &net), 0);
  assert_false(tpx_net_is_tcpx(net));
  tpx_net_close(net);
  assert_null(getenv("NCCL_DYNAMIC_CHUNK_SIZE")); /* not TCPX: left alone */
  assert_int_equal(tpx_net_open(fake_path("fake-tcpxhost"), &net), 0);
  assert_true(tpx_net_is_tcpx(net));
  assert_string_equal(getenv("NCCL_DYNAMIC_CHUNK_SIZE"), "524288");
  assert_string_equal(getenv("NCCL_MIN_ZCOPY_SIZE"), "4096");
  assert_string_equal(getenv("NCCL_GPUDIRECTTCPX_RECV_SYNC"), "0");
  tpx_net_env_t row;
  int n = 0, unsafe = 0;
  for (; tpx_net_tcpx_env(n, &row) == 0; n++)
    if (row.danger) {
      unsafe++;
      assert_string_equal(row.name, "NCCL_GPUDIRECTTCPX_RECV_SYNC");
      assert_false(row.set_by_us);
    }
  assert_int_equal(n, 3);
  assert_int_equal(unsafe, 1);
  assert_int_equal(tpx_net_tcpx_env(n, &row), TPX_ENOENT);
  tpx_net_close(net);
  unsetenv("NCCL_GPUDIRECTTCPX_RECV_SYNC");
}

/* ---- accept from several threads ------------------------------------------------------------ */

/* Endpoints accept from their own progress threads; NCCL calls a plugin's
 * accept from one proxy thread per GPU, and the real GPUDirect-TCPX plugin
 * relies on it (its first accept on a GPU imports the receive buffer without
 * a lock). The loader lets one accept in at a time: the fake counts overlaps. */
struct acc_arg {
  tpx_net_t *net;
  struct tl_pair p;
  int rc;
};

static void *accept_thread(void *a) {
  struct acc_arg *x = a;
  x->rc = tl_connect(x->net, 0, &x->p, 0);
  return NULL;
}

static void test_accept_one_at_a_time(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold("fake-tcpxhost", &dl);
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(fake_path("fake-tcpxhost"), &net), 0);
  int before = __atomic_load_n(&st->accept_overlap, __ATOMIC_SEQ_CST);
  enum { N = 6 };
  struct acc_arg a[N];
  pthread_t t[N];
  for (int round = 0; round < 3; round++) {
    for (int i = 0; i < N; i++) {
      a[i].net = net;
      assert_int_equal(pthread_create(&t[i], NULL, accept_thread, &a[i]), 0);
    }
    for (int i = 0; i < N; i++) assert_int_equal(pthread_join(t[i], NULL), 0);
    for (int i = 0; i < N; i++) {
      assert_int_equal(a[i].rc, 0);
      tl_close(net, &a[i].p);
    }
  }
  assert_int_equal(__atomic_load_n(&st->accept_overlap, __ATOMIC_SEQ_CST), before);
  tpx_net_close(net);
  dlclose(dl);
}

/* ---- size limits ---------------------------------------------------------------------------- */

static void int_limits(const char *fake, int version) {
  void *dl;
  struct fake_stats *st = hold(fake, &dl);
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(fake_path(fake), &net), 0);
  struct tl_pair p;
  assert_int_equal(tl_connect(net, 0, &p, 0), 0);
  static char buf[64];
  void *mh = NULL, *req = NULL;
  size_t big = (size_t)INT_MAX + 1;
  int narrow = version <= 8;

  /* regMr: v7 takes int; v8+ size_t. */
  int rc = net->ops->reg_mr(net, p.sc, buf, big, TPX_PTR_HOST, &mh);
  if (version == 7) {
    assert_int_equal(rc, TPX_EINVAL);
    assert_error_mentions("INT_MAX");
    assert_int_equal(st->regmr, 0);
  } else {
    assert_int_equal(rc, 0);
    assert_int_equal(st->last_regmr_size, big);
    assert_int_equal(net->ops->dereg_mr(net, p.sc, mh), 0);
  }
  assert_int_equal(net->ops->reg_mr(net, p.sc, buf, INT_MAX, TPX_PTR_HOST, &mh), 0);
  assert_int_equal(st->last_regmr_size, (size_t)INT_MAX);
  assert_int_equal(net->ops->dereg_mr(net, p.sc, mh), 0);

  /* isend / irecv: int in v7 and v8, size_t from v9. Nothing reaches the
   * plugin when the size does not fit. The receive goes to a second
   * connection so the fake never matches (copies) these sizes. */
  struct tl_pair q;
  assert_int_equal(tl_connect(net, 0, &q, 0), 0);
  int sends = st->isend, recvs = st->irecv;
  rc = net->ops->isend(net, p.sc, buf, big, 0, NULL, &req);
  void *data[1] = {buf}, *mhs[1] = {NULL};
  size_t sizes[1] = {big};
  int tags[1] = {0};
  int rrc = net->ops->irecv(net, q.rc, 1, data, sizes, tags, mhs, &req);
  if (narrow) {
    assert_int_equal(rc, TPX_EINVAL);
    assert_int_equal(rrc, TPX_EINVAL);
    assert_error_mentions("INT_MAX");
    assert_int_equal(st->isend, sends);
    assert_int_equal(st->irecv, recvs);
  } else {
    /* Passed through unchanged (queued, never copied). */
    assert_int_equal(rc, 0);
    assert_int_equal(rrc, 0);
    assert_int_equal(st->last_isend_size, big);
    assert_int_equal(st->last_irecv_size, big);
  }
  tl_close(net, &q);
  /* "Negative" sizes are refused for every version. */
  assert_int_equal(net->ops->isend(net, p.sc, buf, (size_t)-1, 0, NULL, &req), TPX_EINVAL);
  assert_int_equal(net->ops->reg_mr(net, p.sc, buf, (size_t)-5, TPX_PTR_HOST, &mh), TPX_EINVAL);
  tl_close(net, &p);
  tpx_net_close(net);
  dlclose(dl);
}

static void test_int_limits_v7(void **state) {
  (void)state;
  int_limits("fake-v7", 7);
}
static void test_int_limits_v8(void **state) {
  (void)state;
  int_limits("fake-v8", 8);
}
static void test_int_limits_v11(void **state) {
  (void)state;
  int_limits("fake-v11", 11);
}

/* ---- argument validation ----------------------------------------------------------------------
 */

static void test_argument_checks(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold("fake-v11", &dl);
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(fake_path("fake-v11"), &net), 0);
  const tpx_net_ops_t *o = net->ops;
  tpx_net_props_t props;
  char handle[TPX_NET_HANDLE_BYTES];
  void *c = NULL;
  int ndev;
  assert_int_equal(o->devices(net, NULL), TPX_EINVAL);
  assert_int_equal(o->devices(NULL, &ndev), TPX_EINVAL);
  assert_int_equal(o->get_properties(net, -1, &props), TPX_EINVAL);
  assert_int_equal(o->get_properties(net, 2, &props), TPX_EINVAL);
  assert_error_mentions("out of range");
  assert_int_equal(o->get_properties(net, 0, NULL), TPX_EINVAL);
  assert_int_equal(o->listen(net, 0, NULL, &c), TPX_EINVAL);
  assert_int_equal(o->listen(net, 0, handle, NULL), TPX_EINVAL);
  assert_int_equal(o->listen(net, 5, handle, &c), TPX_EINVAL);
  assert_int_equal(o->connect(net, 0, NULL, &c, NULL), TPX_EINVAL);
  assert_int_equal(o->connect(net, -3, handle, &c, NULL), TPX_EINVAL);
  assert_int_equal(o->accept(net, NULL, &c, NULL), TPX_EINVAL);
  assert_int_equal(st->listen + st->connect + st->accept, 0); /* nothing reached the plugin */

  struct tl_pair p;
  assert_int_equal(tl_connect(net, 0, &p, 0), 0);
  char buf[32];
  void *req = NULL, *mh = NULL;
  void *data[2] = {buf, buf}, *mhs[2] = {NULL, NULL};
  size_t sizes[2] = {8, 8};
  int tags[2] = {0, 0}, done;
  assert_int_equal(o->accept(net, p.lc, NULL, NULL), TPX_EINVAL);
  assert_int_equal(o->reg_mr(net, NULL, buf, 8, TPX_PTR_HOST, &mh), TPX_EINVAL);
  assert_int_equal(o->reg_mr(net, p.sc, buf, 8, TPX_PTR_HOST, NULL), TPX_EINVAL);
  assert_int_equal(o->reg_mr(net, p.sc, buf, 8, 0x40, &mh), TPX_EINVAL);
  assert_int_equal(o->reg_mr(net, p.sc, NULL, 8, TPX_PTR_HOST, &mh), TPX_EINVAL);
  assert_int_equal(o->dereg_mr(net, NULL, mh), TPX_EINVAL);
  assert_int_equal(o->isend(net, NULL, buf, 8, 0, NULL, &req), TPX_EINVAL);
  assert_int_equal(o->isend(net, p.sc, buf, 8, 0, NULL, NULL), TPX_EINVAL);
  assert_int_equal(o->isend(net, p.sc, NULL, 8, 0, NULL, &req), TPX_EINVAL);
  assert_int_equal(o->irecv(net, p.rc, 0, data, sizes, tags, mhs, &req), TPX_EINVAL);
  assert_int_equal(o->irecv(net, p.rc, -1, data, sizes, tags, mhs, &req), TPX_EINVAL);
  assert_int_equal(o->irecv(net, p.rc, 2, data, sizes, tags, mhs, &req),
                   TPX_EINVAL); /* maxRecvs 1 */
  assert_error_mentions("maxRecvs");
  assert_int_equal(o->irecv(net, p.rc, 1, NULL, sizes, tags, mhs, &req), TPX_EINVAL);
  assert_int_equal(o->irecv(net, p.rc, 1, data, NULL, tags, mhs, &req), TPX_EINVAL);
  assert_int_equal(o->irecv(net, p.rc, 1, data, sizes, NULL, mhs, &req), TPX_EINVAL);
  assert_int_equal(o->irecv(net, p.rc, 1, data, sizes, tags, NULL, &req), TPX_EINVAL);
  assert_int_equal(o->irecv(net, NULL, 1, data, sizes, tags, mhs, &req), TPX_EINVAL);
  assert_int_equal(o->iflush(net, p.rc, 3, data, sizes, mhs, &req), TPX_EINVAL);
  assert_int_equal(o->test(net, NULL, &done, NULL), TPX_EINVAL);
  assert_int_equal(o->test(net, buf, NULL, NULL), TPX_EINVAL);
  assert_int_equal(o->close_send(net, NULL), TPX_EINVAL);
  assert_int_equal(o->close_recv(net, NULL), TPX_EINVAL);
  assert_int_equal(o->close_listen(net, NULL), TPX_EINVAL);
  assert_int_equal(st->regmr + st->isend + st->irecv + st->test + st->iflush, 0);
  tl_close(net, &p);
  tpx_net_close(net);
  dlclose(dl);
}

/* ---- back-pressure ------------------------------------------------------------------------------
 */

static void test_backpressure(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold("fake-v9", &dl);
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(fake_path("fake-v9"), &net), 0);
  struct tl_pair p;
  assert_int_equal(tl_connect(net, 0, &p, 0), 0);
  enum { N = 32 };
  static char s[N + 1][16], r[N][16];
  void *sreq[N + 1], *rreq[N];
  for (int i = 0; i < N; i++) {
    snprintf(s[i], sizeof(s[i]), "m%d", i & 0xff);
    assert_int_equal(net->ops->isend(net, p.sc, s[i], 16, 0, NULL, &sreq[i]), 0);
    assert_non_null(sreq[i]);
  }
  /* The 33rd: success with no request, "try again later". */
  sreq[N] = (void *)0x1;
  assert_int_equal(net->ops->isend(net, p.sc, s[N], 16, 0, NULL, &sreq[N]), 0);
  assert_null(sreq[N]);
  for (int i = 0; i < N; i++) {
    assert_int_equal(tl_irecv(net, p.rc, r[i], 16, 0, NULL, &rreq[i]), 0);
    size_t got = 0;
    assert_int_equal(tl_wait(net, rreq[i], &got), 0);
    assert_int_equal(got, 16);
    assert_string_equal(r[i], s[i]); /* FIFO */
    assert_int_equal(tl_wait(net, sreq[i], NULL), 0);
  }
  assert_int_equal(st->live_reqs, 0);
  tl_close(net, &p);
  tpx_net_close(net);
  dlclose(dl);
}

/* ---- device offload (UNPACK)
 * ---------------------------------------------------------------------- */

static void test_unpack_device_handle(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold("fake-unpack", &dl);
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(fake_path("fake-unpack"), &net), 0);
  assert_non_null(net->ops->get_device_mr);
  assert_non_null(net->ops->irecv_consumed);
  tpx_net_props_t props;
  assert_int_equal(net->ops->get_properties(net, 0, &props), 0);
  assert_int_equal(props.dev_type, TPX_NET_DEV_UNPACK);
  assert_int_equal(props.dev_version, TPX_NET_UNPACK_VERSION);

  /* Without storage for the device handle, accept refuses before the plugin sees it. */
  struct tl_pair p;
  assert_int_equal(tl_connect(net, 0, &p, 0), TPX_EINVAL);
  assert_error_mentions("device-handle storage");
  tl_close(net, &p);

  assert_int_equal(tl_connect(net, 0, &p, 1), 0);
  assert_true(st->accept >= 2); /* retried ... */
  /* ... always with a pointer to a pointer to the caller's storage: the same
   * slot every time, holding the storage's address. */
  assert_ptr_equal(st->accept_dev, &p.rdev);
  assert_true((char *)st->accept_slot >= (char *)&p.rdev &&
              (char *)st->accept_slot < (char *)&p.rdev + sizeof(p.rdev));
  assert_int_equal(p.rdev.type, TPX_NET_DEV_UNPACK);
  assert_int_equal(p.rdev.version, TPX_NET_UNPACK_VERSION);
  assert_ptr_equal(p.rdev.handle, (void *)(uintptr_t)0xd0d0d0d0);
  assert_int_equal(p.rdev.size, 24);
  assert_int_equal(p.rdev.needs_proxy_progress, 1);
  assert_null(st->connect_dev); /* no send-side offload, as NCCL */
  assert_int_equal(p.sdev.type, TPX_NET_DEV_HOST);

  /* UNPACK receives report no size; irecvConsumed and getDeviceMr pass through. */
  char s[16] = "unpack", r[16];
  void *mh = NULL, *dmh = NULL, *sreq, *rreq;
  assert_int_equal(net->ops->reg_mr(net, p.rc, r, sizeof(r), TPX_PTR_HOST, &mh), 0);
  assert_int_equal(net->ops->get_device_mr(net, p.rc, mh, &dmh), 0);
  assert_ptr_equal(dmh, mh);
  assert_int_equal(tl_irecv(net, p.rc, r, sizeof(r), 0, mh, &rreq), 0);
  assert_int_equal(tl_isend(net, p.sc, s, sizeof(s), 0, NULL, &sreq), 0);
  size_t got = 12345;
  assert_int_equal(tl_wait(net, rreq, &got), 0);
  assert_int_equal(got, 12345); /* untouched */
  assert_int_equal(net->ops->irecv_consumed(net, p.rc, 1, rreq), 0);
  assert_int_equal(st->irecv_consumed, 1);
  assert_int_equal(net->ops->irecv_consumed(net, p.rc, 0, rreq), TPX_EINVAL);
  assert_int_equal(tl_wait(net, sreq, NULL), 0);
  assert_int_equal(net->ops->dereg_mr(net, p.rc, mh), 0);
  tl_close(net, &p);
  tpx_net_close(net);
  dlclose(dl);
}

/* ---- one instance per process ------------------------------------------------------------- */

/* Opening a loaded plugin again shares the instance: one init (this fake
 * fails any second one), one reference per open, unloaded at the last close. */
static void test_shared_open(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold("fake-initonce", &dl);
  tpx_net_t *a = NULL, *b = NULL;
  assert_int_equal(tpx_net_open(fake_path("fake-initonce"), &a), 0);
  assert_int_equal(tpx_net_open("fake-initonce", &b), 0); /* the bare name finds the same library */
  assert_ptr_equal(a, b);
  assert_int_equal(st->init, 1);
  tpx_net_close(a);
  int ndev = 0;
  assert_int_equal(b->ops->devices(b, &ndev), 0); /* still loaded for the other user */
  assert_int_equal(ndev, 2);
  tpx_net_close(b);
  dlclose(dl);
}

static void test_shared_v11_finalize(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold("fake-v11", &dl);
  tpx_net_t *a = NULL, *b = NULL;
  assert_int_equal(tpx_net_open(fake_path("fake-v11"), &a), 0);
  assert_int_equal(tpx__net_open_abi(fake_path("fake-v11"), 11, &b), 0);
  assert_ptr_equal(a, b);
  tpx_net_close(b);
  assert_int_equal(st->finalize, 0);
  tpx_net_close(a);
  assert_int_equal(st->finalize, 1);
  assert_int_equal(st->init, 1);
  /* Another version than the loaded instance's would need a second init. */
  assert_int_equal(tpx_net_open(fake_path("fake-all"), &a), 0);
  assert_int_equal(tpx__net_open_version(fake_path("fake-all"), 8, &b), TPX_EUSAGE);
  assert_error_mentions("already loaded in this process at ncclNet v12");
  assert_int_equal(tpx__net_open_abi(fake_path("fake-all"), 7, &b), TPX_EUSAGE);
  assert_int_equal(tpx__net_open_abi(fake_path("fake-all"), 13, &b), TPX_EINVAL);
  tpx_net_close(a);
  /* Unloaded: now any version loads. */
  assert_int_equal(tpx__net_open_abi(fake_path("fake-all"), 7, &b), 0);
  assert_int_equal(b->abi_version, 7);
  assert_string_equal(b->name, "fake_v7");
  tpx_net_close(b);
  dlclose(dl);
}

/* The bare-name search goes through the dynamic loader's own path list,
 * which it reads at start-up: put the fakes on LD_LIBRARY_PATH and start
 * again (once). */
static void ensure_library_path(char **argv) {
  const char *cur = getenv("LD_LIBRARY_PATH");
  if (cur && strstr(cur, TPX_FAKES_DIR)) return;
  if (getenv("TPX_TEST_LOADER_REEXEC")) return; /* already tried: run, and let the test report it */
  char val[8192];
  snprintf(val, sizeof(val), "%s%s%s", TPX_FAKES_DIR, cur && cur[0] ? ":" : "", cur ? cur : "");
  if (setenv("LD_LIBRARY_PATH", val, 1) != 0 || setenv("TPX_TEST_LOADER_REEXEC", "1", 1) != 0)
    return;
  execv("/proc/self/exe", argv);
  perror("test_loader: re-exec with LD_LIBRARY_PATH failed");
}

int main(int argc, char **argv) {
  (void)argc;
  ensure_library_path(argv);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_missing_path),
      cmocka_unit_test(test_missing_bare_name),
      cmocka_unit_test(test_not_a_library),
      cmocka_unit_test(test_no_symbol),
      cmocka_unit_test(test_v6_only),
      cmocka_unit_test(test_init_fails),
      cmocka_unit_test(test_bad_arguments_to_open),
      cmocka_unit_test(test_probe_highest),
      cmocka_unit_test(test_bare_name_search),
      cmocka_unit_test(test_adapter_v7),
      cmocka_unit_test(test_adapter_v8),
      cmocka_unit_test(test_adapter_v9),
      cmocka_unit_test(test_adapter_v10),
      cmocka_unit_test(test_adapter_v11),
      cmocka_unit_test(test_adapter_v12),
      cmocka_unit_test(test_props_v12_wide),
      cmocka_unit_test(test_tcpx_env_filled),
      cmocka_unit_test(test_accept_one_at_a_time),
      cmocka_unit_test(test_int_limits_v7),
      cmocka_unit_test(test_int_limits_v8),
      cmocka_unit_test(test_int_limits_v11),
      cmocka_unit_test(test_argument_checks),
      cmocka_unit_test(test_backpressure),
      cmocka_unit_test(test_unpack_device_handle),
      cmocka_unit_test(test_shared_open),
      cmocka_unit_test(test_shared_v11_finalize),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
