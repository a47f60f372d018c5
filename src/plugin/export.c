/* libnccl-net-tpx.so: the built-in TCP transport as an NCCL net plugin named
 * "tpx" (NCCL_NET_PLUGIN=<this file> NCCL_NET=tpx).
 *
 * Exports ncclNetPlugin_v7 .. ncclNetPlugin_v11 (exports.map hides every
 * other symbol). NCCL 2.28 takes v11; older NCCLs the newest they know. Each
 * table is a set of thin shims over one transport opened lazily by init with
 * the configuration from the environment (TPX_* / NCCL_SOCKET_IFNAME).
 *
 * Facts from NCCL 2.28 this file relies on:
 *  - v11 init runs once per communicator and finalize once per init
 *    (src/plugin/net.cc), also after a failed init: contexts are counted and
 *    the transport closes with the last one.
 *  - makeVDevice == NULL makes NCCL use the physical devices as they are
 *    (graph/topo.cc: usePhysicalDevices), which is right for a transport that
 *    does not fuse NICs.
 *  - maxP2pBytes must be in (0, 2^40] or NCCL refuses the connection.
 *  - For UNPACK devices NCCL callocs a device handle per receive connection
 *    and passes its address's address to accept (transport/net.cc,
 *    ncclNetGetDeviceHandle); for HOST devices it passes a pointer to NULL.
 *  - irecv may find NCCL's hint 0x1 in *request (optional completion); the
 *    plugin must overwrite it, with NULL when nothing was posted.
 *  - iflush leaving *request NULL counts as a completed flush.
 *  - irecvConsumed, when present, is called after every receive, whatever the
 *    device type (transport/net.cc, recvProxyProgress).
 */
#include <pthread.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "ncclnet/abi.h"
#include "tpx/net.h"

#define EXPORT __attribute__((visibility("default")))
#define PLUGIN_NAME "tpx"
#define MAX_DEVS 32
#define MAX_GROUP 64 /* buffers per grouped irecv/test we convert; NCCL uses <= 8 */

struct dev_cache {
  char name[TPX_NET_NAME_MAX];
  char pci[256];
  tpx_net_props_t props;
};

/* A listen comm as NCCL sees it: ours plus the device-handle storage the
 * transport fills during accept (the same storage on every retry). */
struct xlisten {
  tpx_net_dev_handle_t dev; /* first: keeps its 16-byte alignment */
  void *inner;
};

/* Device handles this plugin had to allocate itself (an NCCL that passes a
 * pointer to NULL for an UNPACK device); freed when the library unloads. */
struct owned_dev {
  ncclnet_dev_handle_t h;
  struct owned_dev *next;
};

struct v11_ctx {
  uint64_t comm_id;
  int traffic_class;
};

static pthread_mutex_t g_mu = PTHREAD_MUTEX_INITIALIZER;
static tpx_net_t *g_net; /* the transport; read lock-free once set */
static int g_ndev;
static int g_unpack; /* device 0 offloads receives */
static struct dev_cache g_dev[MAX_DEVS];
static int g_contexts; /* live v11 contexts */
static int g_legacy;   /* initialised through v7..v10 (no finalize there) */
static int g_live;     /* comms open now (listen + send + recv) */
static ncclnet_logger_t g_logger;
static struct owned_dev *g_owned;

/* ---- logging through NCCL's logger ------------------------------------------- */

__attribute__((format(printf, 4, 5))) static void nlog(int level, const char *file, int line,
                                                       const char *fmt, ...) {
  ncclnet_logger_t lg = __atomic_load_n(&g_logger, __ATOMIC_ACQUIRE);
  char msg[768];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  if (lg)
    lg(level, NCCLNET_SUBSYS_INIT | NCCLNET_SUBSYS_NET, file, line, "NET/" PLUGIN_NAME " : %s",
       msg);
  else if (level == NCCLNET_LOG_WARN)
    TPX_WARN("%s", msg);
}
#define NWARN(...) nlog(NCCLNET_LOG_WARN, __FILE__, __LINE__, __VA_ARGS__)
#define NINFO(...) nlog(NCCLNET_LOG_INFO, __FILE__, __LINE__, __VA_ARGS__)

/* A tpx code -> ncclResult_t; failures are reported to NCCL with our detail. */
static ncclnet_result_t nres(const char *what, int rc) {
  if (rc == 0) return NCCLNET_SUCCESS;
  NWARN("%s failed: %s", what, tpx_last_error()[0] ? tpx_last_error() : tpx_strerror(rc));
  return tpx_to_nccl(rc);
}

/* A call refused before it reaches the transport: NCCL shows only the
 * result code, so the reason is logged here. */
static ncclnet_result_t refuse(const char *fn, ncclnet_result_t r) {
  NWARN("%s: %s", fn, r == NCCLNET_INVALID_ARGUMENT ? "invalid argument (NULL or out of range)" : "out of memory");
  return r;
}

static tpx_net_t *net_or_null(void) {
  return __atomic_load_n(&g_net, __ATOMIC_ACQUIRE);
}

#define NET(n, what)                                                                               \
  tpx_net_t *n = net_or_null();                                                                    \
  if (n == NULL) {                                                                                 \
    NWARN("%s called before init", what);                                                          \
    return NCCLNET_INTERNAL_ERROR;                                                                 \
  }

/* ---- init / fini -------------------------------------------------------------------- */

/* Opens the transport if needed and caches device properties (NCCL keeps
 * the name/pciPath pointers, so they live in static storage). */
static ncclnet_result_t open_transport(ncclnet_logger_t logger) {
  if (logger) __atomic_store_n(&g_logger, logger, __ATOMIC_RELEASE);
  pthread_mutex_lock(&g_mu);
  ncclnet_result_t r = NCCLNET_SUCCESS;
  if (g_net == NULL) {
    tpx_net_t *net = NULL;
    int rc = tpx_net_open_builtin(NULL, &net);
    int ndev = 0;
    if (rc == 0) rc = net->ops->devices(net, &ndev);
    if (rc == 0 && ndev <= 0)
      rc = tpx_err(TPX_ENOENT, "no network interface matches TPX_SOCKET_IFNAME");
    if (ndev > MAX_DEVS) ndev = MAX_DEVS;
    for (int d = 0; rc == 0 && d < ndev; d++) {
      tpx_net_props_t props;
      rc = net->ops->get_properties(net, d, &props);
      if (rc == 0) {
        struct dev_cache *c = &g_dev[d];
        c->props = props;
        snprintf(c->name, sizeof(c->name), "%s", props.name);
        snprintf(c->pci, sizeof(c->pci), "%s", props.pci_path);
      }
    }
    if (rc != 0) {
      r = nres("init (opening the built-in TCP transport)", rc);
      tpx_net_close(net);
    } else {
      g_ndev = ndev;
      g_unpack = g_dev[0].props.dev_type == TPX_NET_DEV_UNPACK;
      __atomic_store_n(&g_net, net, __ATOMIC_RELEASE);
      char names[256] = "";
      size_t len = 0;
      for (int d = 0; d < ndev && len + 32 < sizeof(names); d++) {
        int w = snprintf(names + len, sizeof(names) - len, " [%d]%.24s", d, g_dev[d].name);
        if (w < 0) break;
        len += (size_t)w;
      }
      NINFO("built-in TCP transport, %d device(s):%s%s", ndev, names,
            g_unpack ? " (UNPACK receive offload)" : "");
    }
  }
  pthread_mutex_unlock(&g_mu);
  return r;
}

/* Closes the transport when nothing can use it any more. Called with g_mu held. */
static void maybe_close_locked(void) {
  if (g_net && g_contexts == 0 && !g_legacy && __atomic_load_n(&g_live, __ATOMIC_ACQUIRE) == 0) {
    tpx_net_t *net = g_net;
    __atomic_store_n(&g_net, NULL, __ATOMIC_RELEASE);
    tpx_net_close(net);
  }
}

/* On dlclose (NCCL unloads a plugin after its last communicator) or exit.
 * At exit NCCL's proxy thread may still be using comms: then leave the
 * transport alone rather than pull it from under that thread. */
__attribute__((destructor)) static void plugin_unload(void) {
  pthread_mutex_lock(&g_mu);
  if (g_net && __atomic_load_n(&g_live, __ATOMIC_ACQUIRE) == 0) {
    tpx_net_close(g_net);
    g_net = NULL;
  }
  while (g_owned) {
    struct owned_dev *o = g_owned;
    g_owned = o->next;
    free(o);
  }
  pthread_mutex_unlock(&g_mu);
}

static ncclnet_result_t init_legacy(ncclnet_logger_t logger) {
  ncclnet_result_t r = open_transport(logger);
  if (r == NCCLNET_SUCCESS) {
    pthread_mutex_lock(&g_mu);
    g_legacy = 1;
    pthread_mutex_unlock(&g_mu);
  }
  return r;
}

static ncclnet_result_t x_init_v7(ncclnet_logger_t logger) {
  return init_legacy(logger);
}

static ncclnet_result_t x_init_v10(ncclnet_logger_t logger, ncclnet_profiler_cb_t prof) {
  (void)prof; /* no profiler events */
  return init_legacy(logger);
}

static ncclnet_result_t x_init_v11(void **ctx, uint64_t comm_id, ncclnet_comm_config_t *config,
                                   ncclnet_logger_t logger, ncclnet_profiler_cb_t prof) {
  (void)prof;
  if (ctx == NULL) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  *ctx = NULL; /* finalize(NULL) after a failed init is then a no-op */
  ncclnet_result_t r = open_transport(logger);
  if (r != NCCLNET_SUCCESS) return r;
  struct v11_ctx *c = calloc(1, sizeof(*c));
  if (c == NULL) return refuse(__func__, NCCLNET_SYSTEM_ERROR);
  c->comm_id = comm_id;
  c->traffic_class = config ? config->trafficClass : NCCLNET_TRAFFIC_CLASS_UNDEF;
  pthread_mutex_lock(&g_mu);
  g_contexts++;
  pthread_mutex_unlock(&g_mu);
  *ctx = c;
  return NCCLNET_SUCCESS;
}

static ncclnet_result_t x_finalize(void *ctx) {
  if (ctx == NULL) return NCCLNET_SUCCESS;
  free(ctx);
  pthread_mutex_lock(&g_mu);
  if (g_contexts > 0) g_contexts--;
  maybe_close_locked();
  pthread_mutex_unlock(&g_mu);
  return NCCLNET_SUCCESS;
}

static ncclnet_result_t x_set_net_attr(void *ctx, ncclnet_attr_t *attr) {
  /* Hints about concurrency; one TCP transport has nothing to tune by them. */
  if (ctx == NULL || attr == NULL) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  return NCCLNET_SUCCESS;
}

/* ---- devices and properties -------------------------------------------------------------- */

static ncclnet_result_t x_devices(int *ndev) {
  NET(n, "devices");
  (void)n;
  if (ndev == NULL) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  *ndev = g_ndev;
  return NCCLNET_SUCCESS;
}

static size_t clamp_bytes(size_t v) {
  if (v == 0 || v > NCCLNET_MAX_NET_SIZE_BYTES) return NCCLNET_MAX_NET_SIZE_BYTES;
  return v;
}

/* Everything in the v11 layout; older versions copy what they have. */
static ncclnet_result_t props_wide(int dev, ncclnet_props_v11_t *w) {
  NET(n, "getProperties");
  (void)n;
  if (w == NULL || dev < 0 || dev >= g_ndev) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  const struct dev_cache *c = &g_dev[dev];
  const tpx_net_props_t *s = &c->props;
  memset(w, 0, sizeof(*w));
  w->name = (char *)c->name;
  w->pciPath =
      c->pci[0] ? (char *)c->pci : NULL; /* NULL: a virtual NIC (lo), as NCCL's socket transport */
  w->guid = s->guid;
  w->ptrSupport = s->ptr_support & (NCCLNET_PTR_HOST | NCCLNET_PTR_CUDA); /* no regMrDmaBuf */
  w->regIsGlobal = s->reg_is_global;
  w->forceFlush = s->force_flush;
  w->speed = s->speed_mbps > 0 ? s->speed_mbps : 10000;
  w->port = s->port;
  w->latency = s->latency_us;
  w->maxComms = s->max_comms > 0 ? s->max_comms : 65536;
  w->maxRecvs = s->max_recvs >= 1 ? (s->max_recvs <= MAX_GROUP ? s->max_recvs : MAX_GROUP) : 1;
  w->netDeviceType = s->dev_type;
  w->netDeviceVersion =
      s->dev_type == TPX_NET_DEV_UNPACK ? s->dev_version : NCCLNET_DEVICE_INVALID_VERSION;
  w->vProps.ndevs = 1;
  w->vProps.devs[0] = dev;
  w->maxP2pBytes = clamp_bytes(s->max_p2p_bytes);
  w->maxCollBytes = clamp_bytes(s->max_coll_bytes);
  w->maxMultiRequestSize = 1;
  return NCCLNET_SUCCESS;
}

#define NARROW_V7(d, w)                                                                            \
  do {                                                                                             \
    (d)->name = (w).name;                                                                          \
    (d)->pciPath = (w).pciPath;                                                                    \
    (d)->guid = (w).guid;                                                                          \
    (d)->ptrSupport = (w).ptrSupport;                                                              \
    (d)->speed = (w).speed;                                                                        \
    (d)->port = (w).port;                                                                          \
    (d)->latency = (w).latency;                                                                    \
    (d)->maxComms = (w).maxComms;                                                                  \
    (d)->maxRecvs = (w).maxRecvs;                                                                  \
    (d)->netDeviceType = (w).netDeviceType;                                                        \
    (d)->netDeviceVersion = (w).netDeviceVersion;                                                  \
  } while (0)

static ncclnet_result_t x_props_v7(int dev, ncclnet_props_v7_t *p) {
  ncclnet_props_v11_t w;
  ncclnet_result_t r = p ? props_wide(dev, &w) : NCCLNET_INVALID_ARGUMENT;
  if (r == NCCLNET_SUCCESS) NARROW_V7(p, w);
  return r;
}

static ncclnet_result_t x_props_v8(int dev, ncclnet_props_v8_t *p) {
  ncclnet_props_v11_t w;
  ncclnet_result_t r = p ? props_wide(dev, &w) : NCCLNET_INVALID_ARGUMENT;
  if (r == NCCLNET_SUCCESS) {
    NARROW_V7(p, w);
    p->regIsGlobal = w.regIsGlobal;
  }
  return r;
}

static ncclnet_result_t x_props_v9(int dev, ncclnet_props_v9_t *p) {
  ncclnet_props_v11_t w;
  ncclnet_result_t r = p ? props_wide(dev, &w) : NCCLNET_INVALID_ARGUMENT;
  if (r == NCCLNET_SUCCESS) {
    NARROW_V7(p, w);
    p->regIsGlobal = w.regIsGlobal;
    p->forceFlush = w.forceFlush;
    p->vProps = w.vProps;
    p->maxP2pBytes = w.maxP2pBytes;
    p->maxCollBytes = w.maxCollBytes;
  }
  return r;
}

static ncclnet_result_t x_props_v11(int dev, ncclnet_props_v11_t *p) {
  return props_wide(dev, p);
}

/* ---- connection setup ------------------------------------------------------------------------ */

static ncclnet_result_t x_listen(int dev, void *handle, void **listen_comm) {
  NET(n, "listen");
  if (listen_comm == NULL) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  *listen_comm = NULL;
  struct xlisten *xl = aligned_alloc(_Alignof(struct xlisten), sizeof(struct xlisten));
  if (xl == NULL) return refuse(__func__, NCCLNET_SYSTEM_ERROR);
  memset(xl, 0, sizeof(*xl));
  int rc = n->ops->listen(n, dev, handle, &xl->inner);
  if (rc != 0) {
    free(xl);
    return nres("listen", rc);
  }
  __atomic_add_fetch(&g_live, 1, __ATOMIC_ACQ_REL);
  *listen_comm = xl;
  return NCCLNET_SUCCESS;
}

static ncclnet_result_t x_listen_v11(void *ctx, int dev, void *handle, void **listen_comm) {
  (void)ctx; /* one transport serves every context */
  return x_listen(dev, handle, listen_comm);
}

/* NCCL never asks for send-side offload (its device handle is NULL there),
 * so the send device handle is left as NCCL set it. */
static ncclnet_result_t x_connect(int dev, void *handle, void **send_comm,
                                  ncclnet_dev_handle_t **dh) {
  (void)dh;
  NET(n, "connect");
  if (send_comm == NULL) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  *send_comm = NULL;
  ncclnet_result_t r = nres("connect", n->ops->connect(n, dev, handle, send_comm, NULL));
  if (r == NCCLNET_SUCCESS && *send_comm) __atomic_add_fetch(&g_live, 1, __ATOMIC_ACQ_REL);
  return r;
}

static ncclnet_result_t x_connect_v10(int dev, ncclnet_comm_config_t *config, void *handle,
                                      void **send_comm, ncclnet_dev_handle_t **dh) {
  (void)config; /* traffic class: nothing to map it to on plain TCP */
  return x_connect(dev, handle, send_comm, dh);
}

static ncclnet_result_t x_connect_v11(void *ctx, int dev, void *handle, void **send_comm,
                                      ncclnet_dev_handle_t **dh) {
  (void)ctx;
  return x_connect(dev, handle, send_comm, dh);
}

static ncclnet_dev_handle_t *own_dev_handle(void) {
  struct owned_dev *o = calloc(1, sizeof(*o));
  if (o == NULL) return NULL;
  pthread_mutex_lock(&g_mu);
  o->next = g_owned;
  g_owned = o;
  pthread_mutex_unlock(&g_mu);
  return &o->h;
}

static ncclnet_result_t x_accept(void *listen_comm, void **recv_comm, ncclnet_dev_handle_t **dh) {
  NET(n, "accept");
  struct xlisten *xl = listen_comm;
  if (xl == NULL || recv_comm == NULL) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  *recv_comm = NULL;
  tpx_net_dev_handle_t *dev = NULL;
  if (g_unpack) {
    if (dh == NULL) {
      NWARN("accept: UNPACK device but NCCL passed no device handle");
      return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
    }
    dev = &xl->dev; /* ours, 512 bytes, stable across retries; copied out below */
    if (dev->type == 0 && dev->version == 0) {
      dev->type = TPX_NET_DEV_UNPACK;
      dev->version = TPX_NET_UNPACK_VERSION;
    }
  }
  int rc = n->ops->accept(n, xl->inner, recv_comm, dev);
  if (rc != 0) return nres("accept", rc);
  if (*recv_comm == NULL) return NCCLNET_SUCCESS; /* not yet: NCCL calls again */
  __atomic_add_fetch(&g_live, 1, __ATOMIC_ACQ_REL);
  if (dev) {
    if (*dh == NULL && (*dh = own_dev_handle()) == NULL) return refuse(__func__, NCCLNET_SYSTEM_ERROR);
    (*dh)->netDeviceType = dev->type;
    (*dh)->netDeviceVersion = dev->version;
    (*dh)->handle = dev->handle;
    (*dh)->size = dev->size;
    (*dh)->needsProxyProgress = dev->needs_proxy_progress;
  }
  return NCCLNET_SUCCESS;
}

/* ---- memory ------------------------------------------------------------------------------ */

static ncclnet_result_t x_regmr(void *comm, void *data, size_t size, int type, void **mhandle) {
  NET(n, "regMr");
  return nres("regMr", n->ops->reg_mr(n, comm, data, size, type, mhandle));
}

static ncclnet_result_t x_regmr_v7(void *comm, void *data, int size, int type, void **mhandle) {
  if (size < 0) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  return x_regmr(comm, data, (size_t)size, type, mhandle);
}

static ncclnet_result_t x_deregmr(void *comm, void *mhandle) {
  NET(n, "deregMr");
  return nres("deregMr", n->ops->dereg_mr(n, comm, mhandle));
}

static ncclnet_result_t x_get_device_mr(void *comm, void *mhandle, void **dptr_mhandle) {
  NET(n, "getDeviceMr");
  if (n->ops->get_device_mr == NULL) {
    NWARN("getDeviceMr: not provided by the transport (HOST device)");
    return NCCLNET_INVALID_USAGE;
  }
  return nres("getDeviceMr", n->ops->get_device_mr(n, comm, mhandle, dptr_mhandle));
}

/* ---- data ------------------------------------------------------------------------------------ */

static ncclnet_result_t x_isend(void *send_comm, void *data, size_t size, int tag, void *mhandle,
                                void **request) {
  NET(n, "isend");
  if (request == NULL) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  *request = NULL;
  return nres("isend", n->ops->isend(n, send_comm, data, size, tag, mhandle, request));
}

static ncclnet_result_t x_isend_v7(void *send_comm, void *data, int size, int tag, void *mhandle,
                                   void **request) {
  if (size < 0) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  return x_isend(send_comm, data, (size_t)size, tag, mhandle, request);
}

static ncclnet_result_t x_isend_v10(void *send_comm, void *data, size_t size, int tag,
                                    void *mhandle, void *phandle, void **request) {
  (void)phandle; /* profiler handle: no events */
  return x_isend(send_comm, data, size, tag, mhandle, request);
}

static ncclnet_result_t x_irecv(void *recv_comm, int n_, void **data, size_t *sizes, int *tags,
                                void **mhandles, void **request) {
  NET(n, "irecv");
  if (request == NULL) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  *request = NULL; /* also clears NCCL's optional-completion hint */
  return nres("irecv", n->ops->irecv(n, recv_comm, n_, data, sizes, tags, mhandles, request));
}

static ncclnet_result_t x_irecv_v7(void *recv_comm, int n, void **data, int *sizes, int *tags,
                                   void **mhandles, void **request) {
  if (n < 1 || n > MAX_GROUP || sizes == NULL) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  size_t s[MAX_GROUP];
  for (int i = 0; i < n; i++) {
    if (sizes[i] < 0) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
    s[i] = (size_t)sizes[i];
  }
  return x_irecv(recv_comm, n, data, s, tags, mhandles, request);
}

static ncclnet_result_t x_irecv_v10(void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                                    void **mhandles, void **phandles, void **request) {
  (void)phandles;
  return x_irecv(recv_comm, n, data, sizes, tags, mhandles, request);
}

static ncclnet_result_t x_iflush(void *recv_comm, int n_, void **data, int *sizes, void **mhandles,
                                 void **request) {
  NET(n, "iflush");
  if (request == NULL) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  *request = NULL; /* NULL = flush complete: host memory needs none */
  if (n->ops->iflush == NULL) return NCCLNET_SUCCESS;
  if (n_ < 1 || n_ > MAX_GROUP || sizes == NULL) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  size_t s[MAX_GROUP];
  for (int i = 0; i < n_; i++) {
    if (sizes[i] < 0) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
    s[i] = (size_t)sizes[i];
  }
  return nres("iflush", n->ops->iflush(n, recv_comm, n_, data, s, mhandles, request));
}

static ncclnet_result_t x_test(void *request, int *done, int *sizes) {
  NET(n, "test");
  if (done == NULL) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  /* The transport writes one size per buffer of the request; unwritten
   * entries keep their marker and NCCL's array is left as it was there. */
  size_t s[MAX_GROUP];
  if (sizes)
    for (int i = 0; i < MAX_GROUP; i++)
      s[i] = SIZE_MAX;
  *done = 0;
  int rc = n->ops->test(n, request, done, sizes ? s : NULL);
  if (rc != 0) return nres("test", rc);
  if (sizes && *done)
    for (int i = 0; i < MAX_GROUP && s[i] != SIZE_MAX; i++) {
      if (s[i] > (size_t)INT32_MAX) {
        NWARN("test: received size %zu does not fit NCCL's int", s[i]);
        return NCCLNET_INTERNAL_ERROR;
      }
      sizes[i] = (int)s[i];
    }
  return NCCLNET_SUCCESS;
}

static ncclnet_result_t x_irecv_consumed(void *recv_comm, int n_, void *request) {
  NET(n, "irecvConsumed");
  /* NCCL calls this after every receive, HOST devices included, with a
   * request test already completed (and so freed): only UNPACK transports,
   * whose receive requests live until now, may see it. */
  if (!g_unpack || n->ops->irecv_consumed == NULL) return NCCLNET_SUCCESS;
  return nres("irecvConsumed", n->ops->irecv_consumed(n, recv_comm, n_, request));
}

/* ---- close -------------------------------------------------------------------------------------
 */

static void comm_closed(void) {
  if (__atomic_sub_fetch(&g_live, 1, __ATOMIC_ACQ_REL) == 0) {
    pthread_mutex_lock(&g_mu);
    maybe_close_locked();
    pthread_mutex_unlock(&g_mu);
  }
}

static ncclnet_result_t x_close_send(void *comm) {
  NET(n, "closeSend");
  ncclnet_result_t r = nres("closeSend", n->ops->close_send(n, comm));
  if (r == NCCLNET_SUCCESS) comm_closed();
  return r;
}

static ncclnet_result_t x_close_recv(void *comm) {
  NET(n, "closeRecv");
  ncclnet_result_t r = nres("closeRecv", n->ops->close_recv(n, comm));
  if (r == NCCLNET_SUCCESS) comm_closed();
  return r;
}

static ncclnet_result_t x_close_listen(void *comm) {
  NET(n, "closeListen");
  struct xlisten *xl = comm;
  if (xl == NULL) return refuse(__func__, NCCLNET_INVALID_ARGUMENT);
  ncclnet_result_t r = nres("closeListen", n->ops->close_listen(n, xl->inner));
  if (r == NCCLNET_SUCCESS) {
    free(xl);
    comm_closed();
  }
  return r;
}

/* ---- the tables -------------------------------------------------------------------------------
 */

EXPORT ncclnet_v7_t ncclNetPlugin_v7 = {.name = PLUGIN_NAME,
                                        .init = x_init_v7,
                                        .devices = x_devices,
                                        .getProperties = x_props_v7,
                                        .listen = x_listen,
                                        .connect = x_connect,
                                        .accept = x_accept,
                                        .regMr = x_regmr_v7,
                                        .regMrDmaBuf = NULL,
                                        .deregMr = x_deregmr,
                                        .isend = x_isend_v7,
                                        .irecv = x_irecv_v7,
                                        .iflush = x_iflush,
                                        .test = x_test,
                                        .closeSend = x_close_send,
                                        .closeRecv = x_close_recv,
                                        .closeListen = x_close_listen,
                                        .getDeviceMr = x_get_device_mr,
                                        .irecvConsumed = x_irecv_consumed};

EXPORT ncclnet_v8_t ncclNetPlugin_v8 = {.name = PLUGIN_NAME,
                                        .init = x_init_v7,
                                        .devices = x_devices,
                                        .getProperties = x_props_v8,
                                        .listen = x_listen,
                                        .connect = x_connect,
                                        .accept = x_accept,
                                        .regMr = x_regmr,
                                        .regMrDmaBuf = NULL,
                                        .deregMr = x_deregmr,
                                        .isend = x_isend_v7,
                                        .irecv = x_irecv_v7,
                                        .iflush = x_iflush,
                                        .test = x_test,
                                        .closeSend = x_close_send,
                                        .closeRecv = x_close_recv,
                                        .closeListen = x_close_listen,
                                        .getDeviceMr = x_get_device_mr,
                                        .irecvConsumed = x_irecv_consumed};

EXPORT ncclnet_v9_t ncclNetPlugin_v9 = {.name = PLUGIN_NAME,
                                        .init = x_init_v7,
                                        .devices = x_devices,
                                        .getProperties = x_props_v9,
                                        .listen = x_listen,
                                        .connect = x_connect,
                                        .accept = x_accept,
                                        .regMr = x_regmr,
                                        .regMrDmaBuf = NULL,
                                        .deregMr = x_deregmr,
                                        .isend = x_isend,
                                        .irecv = x_irecv,
                                        .iflush = x_iflush,
                                        .test = x_test,
                                        .closeSend = x_close_send,
                                        .closeRecv = x_close_recv,
                                        .closeListen = x_close_listen,
                                        .getDeviceMr = x_get_device_mr,
                                        .irecvConsumed = x_irecv_consumed,
                                        .makeVDevice = NULL};

EXPORT ncclnet_v10_t ncclNetPlugin_v10 = {.name = PLUGIN_NAME,
                                          .init = x_init_v10,
                                          .devices = x_devices,
                                          .getProperties = x_props_v9,
                                          .listen = x_listen,
                                          .connect = x_connect_v10,
                                          .accept = x_accept,
                                          .regMr = x_regmr,
                                          .regMrDmaBuf = NULL,
                                          .deregMr = x_deregmr,
                                          .isend = x_isend_v10,
                                          .irecv = x_irecv_v10,
                                          .iflush = x_iflush,
                                          .test = x_test,
                                          .closeSend = x_close_send,
                                          .closeRecv = x_close_recv,
                                          .closeListen = x_close_listen,
                                          .getDeviceMr = x_get_device_mr,
                                          .irecvConsumed = x_irecv_consumed,
                                          .makeVDevice = NULL};

EXPORT ncclnet_v11_t ncclNetPlugin_v11 = {.name = PLUGIN_NAME,
                                          .init = x_init_v11,
                                          .devices = x_devices,
                                          .getProperties = x_props_v11,
                                          .listen = x_listen_v11,
                                          .connect = x_connect_v11,
                                          .accept = x_accept,
                                          .regMr = x_regmr,
                                          .regMrDmaBuf = NULL,
                                          .deregMr = x_deregmr,
                                          .isend = x_isend_v10,
                                          .irecv = x_irecv_v10,
                                          .iflush = x_iflush,
                                          .test = x_test,
                                          .closeSend = x_close_send,
                                          .closeRecv = x_close_recv,
                                          .closeListen = x_close_listen,
                                          .getDeviceMr = x_get_device_mr,
                                          .irecvConsumed = x_irecv_consumed,
                                          .makeVDevice = NULL,
                                          .finalize = x_finalize,
                                          .setNetAttr = x_set_net_attr};
