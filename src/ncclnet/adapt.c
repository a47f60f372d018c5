/* ncclNet v7..v12 -> tpx_net_ops_t. See adapt.h for the shape; the rules
 * follow docs/NCCLNET.md and what NCCL 2.28's own compatibility layer does
 * (src/plugin/net/net_v*.cc there), so a plugin sees the calls it would see
 * under NCCL. */
#include "ncclnet/adapt.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "tcpx/contract.h"
#include "tcpx/plugin_env.h"

/* The caller's device-handle storage starts with the ncclNetDeviceHandle
 * layout, so the plugin can fill it in place. */
/* The TCPX receive contract's device-handle version is the ABI's UNPACK one. */
_Static_assert(TPX_TCPX_DEV_VERSION == NCCLNET_DEVICE_UNPACK_VERSION, "ncclNet UNPACK version");
_Static_assert(sizeof(tpx_net_dev_handle_t) == 512, "device handle storage is 512 bytes");
_Static_assert(_Alignof(tpx_net_dev_handle_t) >= 16, "device handle storage is 16-aligned");
_Static_assert(offsetof(tpx_net_dev_handle_t, type) ==
                   offsetof(ncclnet_dev_handle_t, netDeviceType),
               "");
_Static_assert(offsetof(tpx_net_dev_handle_t, version) ==
                   offsetof(ncclnet_dev_handle_t, netDeviceVersion),
               "");
_Static_assert(offsetof(tpx_net_dev_handle_t, handle) == offsetof(ncclnet_dev_handle_t, handle),
               "");
_Static_assert(offsetof(tpx_net_dev_handle_t, size) == offsetof(ncclnet_dev_handle_t, size), "");
_Static_assert(offsetof(tpx_net_dev_handle_t, needs_proxy_progress) ==
                   offsetof(ncclnet_dev_handle_t, needsProxyProgress),
               "");

static struct tpx_plugin *plug(tpx_net_t *net) {
  return net ? (struct tpx_plugin *)net->impl : NULL;
}

#define GET_PLUGIN(p, net, what)                                                                   \
  struct tpx_plugin *p = plug(net);                                                                \
  if (p == NULL) return tpx_err_quiet(TPX_EINVAL, "%s: NULL transport", what)

/* A plugin result -> tpx code, with the detail recorded. */
static int res(struct tpx_plugin *p, const char *what, ncclnet_result_t r) {
  if (r == NCCLNET_SUCCESS) return 0;
  return tpx_err_quiet(tpx_from_nccl(r), "net plugin %s (v%d): %s failed with ncclResult %d", p->net.name,
                 p->version, what, r);
}

/* The plugin gets `ncclNetDeviceHandle **`: a pointer to a pointer slot. The
 * slot must stay put across connect/accept retries (a plugin may keep its
 * address), so it lives in the last bytes of the caller's 512-byte storage;
 * NCCL hands plugins only 32 bytes, so nothing a plugin writes reaches it. */
static ncclnet_dev_handle_t **dev_slot(tpx_net_dev_handle_t *d) {
  return (ncclnet_dev_handle_t **)(void *)(d->spare + sizeof(d->spare) - sizeof(void *));
}

/* After a connection came up without device offload: what NCCL assumes when
 * a plugin leaves the handle NULL. */
static void dev_host(tpx_net_dev_handle_t *d) {
  d->type = TPX_NET_DEV_HOST;
  d->version = 0;
  d->handle = NULL;
  d->size = 0;
  d->needs_proxy_progress = 1;
}

/* int_abi: the plugin takes this size as an int (regMr in v7; isend/irecv in
 * v7 and v8). */
static int check_size(struct tpx_plugin *p, const char *what, size_t size, int int_abi) {
  if (size > (size_t)SSIZE_MAX)
    return tpx_err_quiet(TPX_EINVAL, "%s: size %zu is out of range (a negative value?)", what, size);
  if (int_abi && size > (size_t)INT_MAX)
    return tpx_err_quiet(
        TPX_EINVAL,
        "%s: size %zu exceeds INT_MAX: net plugin %s speaks ncclNet v%d, whose sizes are "
        "int; split the buffer",
        what, size, p->net.name, p->version);
  return 0;
}

/* ---- properties -------------------------------------------------------------- */

#define COPY_V7_PROPS(d, s)                                                                        \
  do {                                                                                             \
    (d)->name = (s).name;                                                                          \
    (d)->pciPath = (s).pciPath;                                                                    \
    (d)->guid = (s).guid;                                                                          \
    (d)->ptrSupport = (s).ptrSupport;                                                              \
    (d)->speed = (s).speed;                                                                        \
    (d)->port = (s).port;                                                                          \
    (d)->latency = (s).latency;                                                                    \
    (d)->maxComms = (s).maxComms;                                                                  \
    (d)->maxRecvs = (s).maxRecvs;                                                                  \
    (d)->netDeviceType = (s).netDeviceType;                                                        \
    (d)->netDeviceVersion = (s).netDeviceVersion;                                                  \
  } while (0)

/* v9..v11 share every field up to maxCollBytes with v12, except that vProps
 * holds 4 devices there instead of 8. */
#define COPY_V9_EXTRA(d, s)                                                                        \
  do {                                                                                             \
    (d)->regIsGlobal = (s).regIsGlobal;                                                            \
    (d)->forceFlush = (s).forceFlush;                                                              \
    (d)->vProps.ndevs = TPX_MIN((s).vProps.ndevs, NCCLNET_MAX_DEVS_PER_NIC);                       \
    for (int i_ = 0; i_ < NCCLNET_MAX_DEVS_PER_NIC; i_++)                                          \
      (d)->vProps.devs[i_] = (s).vProps.devs[i_];                                                  \
    (d)->maxP2pBytes = (s).maxP2pBytes;                                                            \
    (d)->maxCollBytes = (s).maxCollBytes;                                                          \
  } while (0)

int tpx__adapt_props(struct tpx_plugin *p, int dev, ncclnet_props_v12_t *w) {
  ncclnet_result_t r;
  memset(w, 0, sizeof(*w));
  /* What NCCL assumes for versions that predate a field. */
  w->vProps.ndevs = 1;
  w->vProps.devs[0] = dev;
  w->maxP2pBytes = SIZE_MAX;
  w->maxCollBytes = SIZE_MAX;
  w->maxMultiRequestSize = 1;
  w->railId = NCCLNET_ID_UNDEF;
  w->planeId = NCCLNET_ID_UNDEF;
  if (p->fn.props_v7) {
    ncclnet_props_v7_t s;
    memset(&s, 0, sizeof(s));
    r = p->fn.props_v7(dev, &s);
    COPY_V7_PROPS(w, s);
  } else if (p->fn.props_v8) {
    ncclnet_props_v8_t s;
    memset(&s, 0, sizeof(s));
    r = p->fn.props_v8(dev, &s);
    COPY_V7_PROPS(w, s);
    w->regIsGlobal = s.regIsGlobal;
  } else if (p->fn.props_v9) {
    ncclnet_props_v9_t s;
    memset(&s, 0, sizeof(s));
    r = p->fn.props_v9(dev, &s);
    COPY_V7_PROPS(w, s);
    COPY_V9_EXTRA(w, s);
  } else if (p->fn.props_v11) {
    ncclnet_props_v11_t s;
    memset(&s, 0, sizeof(s));
    r = p->fn.props_v11(dev, &s);
    COPY_V7_PROPS(w, s);
    COPY_V9_EXTRA(w, s);
    w->maxMultiRequestSize = s.maxMultiRequestSize;
  } else {
    r = p->fn.props_v12(dev, w);
    if (w->vProps.ndevs > NCCLNET_MAX_DEVS_PER_NIC_V12)
      w->vProps.ndevs = NCCLNET_MAX_DEVS_PER_NIC_V12;
  }
  return res(p, "getProperties", r);
}

static void copy_str(char *dst, size_t cap, const char *src) {
  snprintf(dst, cap, "%s", src ? src : "");
}

/* ---- ops ------------------------------------------------------------------------ */

static int op_devices(tpx_net_t *net, int *ndev) {
  GET_PLUGIN(p, net, "devices");
  if (ndev == NULL) return tpx_err_quiet(TPX_EINVAL, "devices: ndev is NULL");
  return res(p, "devices", p->fn.devices(ndev));
}

static int check_dev(struct tpx_plugin *p, const char *what, int dev) {
  if (dev < 0 || dev >= p->ndev)
    return tpx_err_quiet(TPX_EINVAL, "%s: device %d out of range (net plugin %s has %d)", what, dev,
                   p->net.name, p->ndev);
  return 0;
}

static int op_get_properties(tpx_net_t *net, int dev, tpx_net_props_t *props) {
  GET_PLUGIN(p, net, "get_properties");
  if (props == NULL) return tpx_err_quiet(TPX_EINVAL, "get_properties: props is NULL");
  int rc = check_dev(p, "get_properties", dev);
  if (rc) return rc;
  ncclnet_props_v12_t w;
  rc = tpx__adapt_props(p, dev, &w);
  if (rc) return rc;
  memset(props, 0, sizeof(*props));
  copy_str(props->name, sizeof(props->name), w.name);
  copy_str(props->pci_path, sizeof(props->pci_path), w.pciPath);
  props->guid = w.guid;
  props->ptr_support = w.ptrSupport;
  props->reg_is_global = w.regIsGlobal;
  props->force_flush = w.forceFlush;
  props->speed_mbps = w.speed;
  props->port = w.port;
  props->latency_us = w.latency;
  props->max_comms = w.maxComms;
  props->max_recvs = w.maxRecvs;
  props->dev_type = w.netDeviceType;
  props->dev_version = w.netDeviceVersion;
  props->max_p2p_bytes = w.maxP2pBytes;
  props->max_coll_bytes = w.maxCollBytes;
  props->rail_id = w.railId;
  props->plane_id = w.planeId;
  return 0;
}

static int op_listen(tpx_net_t *net, int dev, void *handle, void **listen_comm) {
  GET_PLUGIN(p, net, "listen");
  if (handle == NULL || listen_comm == NULL)
    return tpx_err_quiet(TPX_EINVAL, "listen: %s is NULL", handle == NULL ? "handle" : "listen_comm");
  int rc = check_dev(p, "listen", dev);
  if (rc) return rc;
  *listen_comm = NULL;
  ncclnet_result_t r = p->fn.listen_ctx ? p->fn.listen_ctx(p->ctx, dev, handle, listen_comm)
                                        : p->fn.listen(dev, handle, listen_comm);
  return res(p, "listen", r);
}

static int op_connect(tpx_net_t *net, int dev, void *handle, void **send_comm,
                      tpx_net_dev_handle_t *send_dev) {
  GET_PLUGIN(p, net, "connect");
  if (handle == NULL || send_comm == NULL)
    return tpx_err_quiet(TPX_EINVAL, "connect: %s is NULL", handle == NULL ? "handle" : "send_comm");
  int rc = check_dev(p, "connect", dev);
  if (rc) return rc;
  /* NCCL never asks for send-side offload: the slot the plugin sees is NULL. */
  ncclnet_dev_handle_t **slot = send_dev ? dev_slot(send_dev) : &p->no_dev;
  *slot = NULL;
  *send_comm = NULL;
  ncclnet_result_t r;
  if (p->fn.connect_v11)
    r = p->fn.connect_v11(p->ctx, dev, handle, send_comm, slot);
  else if (p->fn.connect_v10)
    r = p->fn.connect_v10(dev, &p->config, handle, send_comm, slot);
  else
    r = p->fn.connect_v7(dev, handle, send_comm, slot);
  rc = res(p, "connect", r);
  if (rc == 0 && *send_comm != NULL && send_dev != NULL) {
    if (*slot == NULL)
      dev_host(send_dev);
    else if (*slot != (ncclnet_dev_handle_t *)send_dev)
      memcpy(send_dev, *slot, sizeof(ncclnet_dev_handle_t));
  }
  return rc;
}

/* One accept at a time per process, as NCCL calls it (one proxy thread per
 * GPU). The GPUDirect-TCPX plugin imports its GPU's receive buffer in the
 * accept that completes a comm, lazily and without a lock (net_tcpx.cc,
 * tcpxGetDeviceHandle -> cuda_wrapper.cu, gpu_get_rxmem): two at once on one
 * GPU import it twice and unmap the first mapping under the comm holding it
 * (docs/A3HIGH.md, "Verified against the plugin's code"). accept never
 * blocks, so holding the lock across it costs little. */
static pthread_mutex_t accept_mu = PTHREAD_MUTEX_INITIALIZER;

static int op_accept(tpx_net_t *net, void *listen_comm, void **recv_comm,
                     tpx_net_dev_handle_t *recv_dev) {
  GET_PLUGIN(p, net, "accept");
  if (listen_comm == NULL || recv_comm == NULL)
    return tpx_err_quiet(TPX_EINVAL, "accept: %s is NULL",
                   listen_comm == NULL ? "listen_comm" : "recv_comm");
  ncclnet_dev_handle_t **slot;
  if (p->unpack) {
    if (recv_dev == NULL)
      return tpx_err_quiet(TPX_EINVAL,
                     "accept: net plugin %s offloads receives (UNPACK) and needs device-handle "
                     "storage (recv_dev is NULL)",
                     p->net.name);
    /* As NCCL: the storage arrives typed, and stays the same across retries. */
    slot = dev_slot(recv_dev);
    *slot = (ncclnet_dev_handle_t *)(void *)recv_dev;
    if (recv_dev->type == 0 && recv_dev->version == 0) {
      recv_dev->type = TPX_NET_DEV_UNPACK;
      recv_dev->version = TPX_NET_UNPACK_VERSION;
    }
  } else {
    slot = recv_dev ? dev_slot(recv_dev) : &p->no_dev;
    *slot = NULL;
  }
  *recv_comm = NULL;
  pthread_mutex_lock(&accept_mu);
  int rc = res(p, "accept", p->fn.accept(listen_comm, recv_comm, slot));
  pthread_mutex_unlock(&accept_mu);
  if (rc == 0 && *recv_comm != NULL && recv_dev != NULL) {
    if (*slot == NULL)
      dev_host(recv_dev);
    else if (*slot != (ncclnet_dev_handle_t *)(void *)recv_dev)
      memcpy(recv_dev, *slot, sizeof(ncclnet_dev_handle_t)); /* plugin swapped in its own */
  }
  return rc;
}

static int op_reg_mr(tpx_net_t *net, void *comm, void *data, size_t size, int type,
                     void **mhandle) {
  GET_PLUGIN(p, net, "reg_mr");
  if (comm == NULL || mhandle == NULL)
    return tpx_err_quiet(TPX_EINVAL, "reg_mr: %s is NULL", comm == NULL ? "comm" : "mhandle");
  if (type != TPX_PTR_HOST && type != TPX_PTR_CUDA)
    return tpx_err_quiet(TPX_EINVAL, "reg_mr: type %d is neither HOST (1) nor CUDA (2)", type);
  if (data == NULL && size > 0)
    return tpx_err_quiet(TPX_EINVAL, "reg_mr: data is NULL with size %zu", size);
  int rc = check_size(p, "reg_mr", size, p->fn.regmr_int != NULL);
  if (rc) return rc;
  *mhandle = NULL;
  ncclnet_result_t r = p->fn.regmr_int ? p->fn.regmr_int(comm, data, (int)size, type, mhandle)
                                       : p->fn.regmr(comm, data, size, type, mhandle);
  return res(p, "regMr", r);
}

static int op_dereg_mr(tpx_net_t *net, void *comm, void *mhandle) {
  GET_PLUGIN(p, net, "dereg_mr");
  if (comm == NULL) return tpx_err_quiet(TPX_EINVAL, "dereg_mr: comm is NULL");
  return res(p, "deregMr", p->fn.deregmr(comm, mhandle));
}

static int op_isend(tpx_net_t *net, void *send_comm, void *data, size_t size, int tag,
                    void *mhandle, void **request) {
  GET_PLUGIN(p, net, "isend");
  if (send_comm == NULL || request == NULL)
    return tpx_err_quiet(TPX_EINVAL, "isend: %s is NULL", send_comm == NULL ? "send_comm" : "request");
  if (data == NULL && size > 0)
    return tpx_err_quiet(TPX_EINVAL, "isend: data is NULL with size %zu", size);
  int rc = check_size(p, "isend", size, p->fn.isend_int != NULL);
  if (rc) return rc;
  *request = NULL;
  ncclnet_result_t r;
  if (p->fn.isend_int)
    r = p->fn.isend_int(send_comm, data, (int)size, tag, mhandle, request);
  else if (p->fn.isend)
    r = p->fn.isend(send_comm, data, size, tag, mhandle, request);
  else
    r = p->fn.isend_ph(send_comm, data, size, tag, mhandle, NULL, request);
  return res(p, "isend", r);
}

static int check_group(struct tpx_plugin *p, const char *what, int n, void **data, size_t *sizes,
                       int *int_sizes) {
  if (n < 1 || n > p->max_recvs)
    return tpx_err_quiet(TPX_EINVAL, "%s: n=%d outside 1..%d (maxRecvs of net plugin %s)", what, n,
                   p->max_recvs, p->net.name);
  if (data == NULL || sizes == NULL)
    return tpx_err_quiet(TPX_EINVAL, "%s: %s is NULL", what, data == NULL ? "data" : "sizes");
  for (int i = 0; i < n; i++) {
    if (sizes[i] > (size_t)SSIZE_MAX)
      return tpx_err_quiet(TPX_EINVAL, "%s: sizes[%d]=%zu is out of range (a negative value?)", what, i,
                     sizes[i]);
    if (data[i] == NULL && sizes[i] > 0)
      return tpx_err_quiet(TPX_EINVAL, "%s: data[%d] is NULL with size %zu", what, i, sizes[i]);
    if (int_sizes != NULL) {
      if (sizes[i] > (size_t)INT_MAX)
        return tpx_err_quiet(TPX_EINVAL,
                       "%s: sizes[%d]=%zu exceeds INT_MAX, which net plugin %s (v%d) takes as int",
                       what, i, sizes[i], p->net.name, p->version);
      int_sizes[i] = (int)sizes[i];
    }
  }
  return 0;
}

static int op_irecv(tpx_net_t *net, void *recv_comm, int n, void **data, size_t *sizes, int *tags,
                    void **mhandles, void **request) {
  GET_PLUGIN(p, net, "irecv");
  if (recv_comm == NULL || request == NULL || tags == NULL || mhandles == NULL)
    return tpx_err_quiet(TPX_EINVAL, "irecv: %s is NULL",
                   recv_comm == NULL ? "recv_comm"
                   : request == NULL ? "request"
                   : tags == NULL    ? "tags"
                                     : "mhandles");
  int isz[TPX_NET_MAX_RECVS];
  int rc = check_group(p, "irecv", n, data, sizes, p->fn.irecv_int ? isz : NULL);
  if (rc) return rc;
  /* Written first: NCCL itself may leave a hint value in *request. */
  *request = NULL;
  ncclnet_result_t r;
  if (p->fn.irecv_int) {
    r = p->fn.irecv_int(recv_comm, n, data, isz, tags, mhandles, request);
  } else if (p->fn.irecv) {
    r = p->fn.irecv(recv_comm, n, data, sizes, tags, mhandles, request);
  } else {
    void *phandles[TPX_NET_MAX_RECVS] = {0};
    r = p->fn.irecv_ph(recv_comm, n, data, sizes, tags, mhandles, phandles, request);
  }
  return res(p, "irecv", r);
}

static int op_iflush(tpx_net_t *net, void *recv_comm, int n, void **data, size_t *sizes,
                     void **mhandles, void **request) {
  GET_PLUGIN(p, net, "iflush");
  if (recv_comm == NULL || request == NULL || mhandles == NULL)
    return tpx_err_quiet(TPX_EINVAL, "iflush: %s is NULL",
                   recv_comm == NULL ? "recv_comm"
                   : request == NULL ? "request"
                                     : "mhandles");
  int isz[TPX_NET_MAX_RECVS];
  int rc = check_group(p, "iflush", n, data, sizes, isz);
  if (rc) return rc;
  *request = NULL;
  return res(p, "iflush", p->fn.iflush(recv_comm, n, data, isz, mhandles, request));
}

#define SIZE_UNSET INT_MIN

static int op_test(tpx_net_t *net, void *request, int *done, size_t *sizes) {
  GET_PLUGIN(p, net, "test");
  if (request == NULL || done == NULL)
    return tpx_err_quiet(TPX_EINVAL, "test: %s is NULL", request == NULL ? "request" : "done");
  /* The plugin writes one int per buffer of the request; which count it is
   * only the plugin knows, so unwritten entries are recognised and left
   * alone (UNPACK plugins write none). */
  int isz[TPX_NET_MAX_RECVS];
  if (sizes)
    for (int i = 0; i < TPX_NET_MAX_RECVS; i++)
      isz[i] = SIZE_UNSET;
  *done = 0;
  ncclnet_result_t r = p->fn.test(request, done, sizes ? isz : NULL);
  if (r != NCCLNET_SUCCESS)
    return tpx_err_quiet(tpx_from_nccl(r),
                         "net plugin %s (v%d): test failed with ncclResult %d (done=%d)",
                         p->net.name, p->version, r, *done);
  if (sizes && *done)
    for (int i = 0; i < p->max_recvs; i++)
      if (isz[i] != SIZE_UNSET && isz[i] >= 0) sizes[i] = (size_t)isz[i];
  return 0;
}

static int op_close(struct tpx_plugin *p, const char *what, ncclnet_close_fn *fn, void *comm) {
  if (comm == NULL) return tpx_err_quiet(TPX_EINVAL, "%s: comm is NULL", what);
  return res(p, what, fn(comm));
}

static int op_close_send(tpx_net_t *net, void *comm) {
  GET_PLUGIN(p, net, "close_send");
  return op_close(p, "closeSend", p->fn.close_send, comm);
}

static int op_close_recv(tpx_net_t *net, void *comm) {
  GET_PLUGIN(p, net, "close_recv");
  return op_close(p, "closeRecv", p->fn.close_recv, comm);
}

static int op_close_listen(tpx_net_t *net, void *comm) {
  GET_PLUGIN(p, net, "close_listen");
  return op_close(p, "closeListen", p->fn.close_listen, comm);
}

static int op_get_device_mr(tpx_net_t *net, void *comm, void *mhandle, void **dptr_mhandle) {
  GET_PLUGIN(p, net, "get_device_mr");
  if (comm == NULL || dptr_mhandle == NULL)
    return tpx_err_quiet(TPX_EINVAL, "get_device_mr: %s is NULL", comm == NULL ? "comm" : "dptr_mhandle");
  *dptr_mhandle = NULL;
  return res(p, "getDeviceMr", p->fn.get_device_mr(comm, mhandle, dptr_mhandle));
}

static int op_irecv_consumed(tpx_net_t *net, void *recv_comm, int n, void *request) {
  GET_PLUGIN(p, net, "irecv_consumed");
  if (recv_comm == NULL || request == NULL)
    return tpx_err_quiet(TPX_EINVAL, "irecv_consumed: %s is NULL",
                   recv_comm == NULL ? "recv_comm" : "request");
  if (n < 1 || n > p->max_recvs)
    return tpx_err_quiet(TPX_EINVAL, "irecv_consumed: n=%d outside 1..%d", n, p->max_recvs);
  return res(p, "irecvConsumed", p->fn.irecv_consumed(recv_comm, n, request));
}

static const tpx_net_ops_t adapted_ops = {
    .devices = op_devices,
    .get_properties = op_get_properties,
    .listen = op_listen,
    .connect = op_connect,
    .accept = op_accept,
    .reg_mr = op_reg_mr,
    .dereg_mr = op_dereg_mr,
    .isend = op_isend,
    .irecv = op_irecv,
    .iflush = op_iflush,
    .test = op_test,
    .close_send = op_close_send,
    .close_recv = op_close_recv,
    .close_listen = op_close_listen,
    .get_device_mr = op_get_device_mr,
    .irecv_consumed = op_irecv_consumed,
    .destroy = NULL, /* set by the loader */
};

/* ---- binding a table ---------------------------------------------------------- */

/* Entries identical in every version. */
#define BIND_COMMON(f, t)                                                                          \
  do {                                                                                             \
    (f)->devices = (t)->devices;                                                                   \
    (f)->accept = (t)->accept;                                                                     \
    (f)->deregmr = (t)->deregMr;                                                                   \
    (f)->iflush = (t)->iflush;                                                                     \
    (f)->test = (t)->test;                                                                         \
    (f)->close_send = (t)->closeSend;                                                              \
    (f)->close_recv = (t)->closeRecv;                                                              \
    (f)->close_listen = (t)->closeListen;                                                          \
    (f)->get_device_mr = (t)->getDeviceMr;                                                         \
    (f)->irecv_consumed = (t)->irecvConsumed;                                                      \
  } while (0)

/* Entries NCCL calls without checking: a table lacking one is broken.
 * Returns the first missing entry's name, or NULL. */
static const char *first_missing(const struct tpx_plugin_fns *f, int version) {
  const char *missing = NULL;
  if (!f->init_v7 && !f->init_v10 && !f->init_v11)
    missing = "init";
  else if (!f->devices)
    missing = "devices";
  else if (!f->props_v7 && !f->props_v8 && !f->props_v9 && !f->props_v11 && !f->props_v12)
    missing = "getProperties";
  else if (!f->listen && !f->listen_ctx)
    missing = "listen";
  else if (!f->connect_v7 && !f->connect_v10 && !f->connect_v11)
    missing = "connect";
  else if (!f->accept)
    missing = "accept";
  else if (!f->regmr_int && !f->regmr)
    missing = "regMr";
  else if (!f->deregmr)
    missing = "deregMr";
  else if (!f->isend_int && !f->isend && !f->isend_ph)
    missing = "isend";
  else if (!f->irecv_int && !f->irecv && !f->irecv_ph)
    missing = "irecv";
  else if (!f->test)
    missing = "test";
  else if (!f->close_send)
    missing = "closeSend";
  else if (!f->close_recv)
    missing = "closeRecv";
  else if (!f->close_listen)
    missing = "closeListen";
  else if (version >= 11 && !f->finalize)
    missing = "finalize";
  return missing;
}

int tpx__adapt_bind(struct tpx_plugin *p, const void *table) {
  struct tpx_plugin_fns *f = &p->fn;
  memset(f, 0, sizeof(*f));
  switch (p->version) {
  case 7: {
    const ncclnet_v7_t *t = table;
    BIND_COMMON(f, t);
    f->init_v7 = t->init, f->props_v7 = t->getProperties, f->listen = t->listen;
    f->connect_v7 = t->connect, f->regmr_int = t->regMr;
    f->isend_int = t->isend, f->irecv_int = t->irecv;
    break;
  }
  case 8: {
    const ncclnet_v8_t *t = table;
    BIND_COMMON(f, t);
    f->init_v7 = t->init, f->props_v8 = t->getProperties, f->listen = t->listen;
    f->connect_v7 = t->connect, f->regmr = t->regMr;
    f->isend_int = t->isend, f->irecv_int = t->irecv;
    break;
  }
  case 9: {
    const ncclnet_v9_t *t = table;
    BIND_COMMON(f, t);
    f->init_v7 = t->init, f->props_v9 = t->getProperties, f->listen = t->listen;
    f->connect_v7 = t->connect, f->regmr = t->regMr;
    f->isend = t->isend, f->irecv = t->irecv;
    break;
  }
  case 10: {
    const ncclnet_v10_t *t = table;
    BIND_COMMON(f, t);
    f->init_v10 = t->init, f->props_v9 = t->getProperties, f->listen = t->listen;
    f->connect_v10 = t->connect, f->regmr = t->regMr;
    f->isend_ph = t->isend, f->irecv_ph = t->irecv;
    break;
  }
  case 11: {
    const ncclnet_v11_t *t = table;
    BIND_COMMON(f, t);
    f->init_v11 = t->init, f->props_v11 = t->getProperties, f->listen_ctx = t->listen;
    f->connect_v11 = t->connect, f->regmr = t->regMr;
    f->isend_ph = t->isend, f->irecv_ph = t->irecv;
    f->finalize = t->finalize;
    break;
  }
  case 12: {
    const ncclnet_v12_t *t = table;
    BIND_COMMON(f, t);
    f->init_v11 = t->init, f->props_v12 = t->getProperties, f->listen_ctx = t->listen;
    f->connect_v11 = t->connect, f->regmr = t->regMr;
    f->isend_ph = t->isend, f->irecv_ph = t->irecv;
    f->finalize = t->finalize;
    break;
  }
  default: return tpx_err_quiet(TPX_EVERSION, "net plugin ABI v%d is not supported (7..12)", p->version);
  }
  const char *missing = first_missing(f, p->version);
  if (missing)
    return tpx_err_quiet(TPX_EVERSION, "net plugin %s: ncclNetPlugin_v%d.%s is NULL", p->file, p->version,
                   missing);

  p->ops = adapted_ops;
  if (!f->iflush) p->ops.iflush = NULL;
  if (!f->get_device_mr) p->ops.get_device_mr = NULL;
  if (!f->irecv_consumed) p->ops.irecv_consumed = NULL;
  return 0;
}

/* ---- init / fini ---------------------------------------------------------------- */

static uint64_t new_comm_id(void) {
  /* Only needs to differ between the contexts of one process. */
  static uint64_t seq;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t x = ((uint64_t)getpid() << 32) ^ (uint64_t)ts.tv_nsec ^ ((uint64_t)ts.tv_sec << 20);
  return x + __atomic_add_fetch(&seq, 1, __ATOMIC_RELAXED) * 0x9E3779B97F4A7C15ull;
}

int tpx__adapt_init(struct tpx_plugin *p, ncclnet_logger_t logger) {
  ncclnet_result_t r;
  p->config.trafficClass = NCCLNET_TRAFFIC_CLASS_UNDEF;
  /* The plugin reads its variables once, in init: fill in safe ones first. */
  int tcpx = tpx__tcpx_env_is_plugin(p->net.name, p->file);
  if (tcpx) tpx__tcpx_env_apply(p->net.name);
  if (p->fn.init_v11)
    r = p->fn.init_v11(&p->ctx, new_comm_id(), &p->config, logger, NULL);
  else if (p->fn.init_v10)
    r = p->fn.init_v10(logger, NULL);
  else
    r = p->fn.init_v7(logger);
  if (r != NCCLNET_SUCCESS)
    return tpx_err_quiet(tpx_from_nccl(r), "net plugin %s (%s, v%d): init failed with ncclResult %d",
                   p->net.name, p->file, p->version, r);
  p->inited = 1;
  int ndev = 0;
  r = p->fn.devices(&ndev);
  int rc = 0;
  if (r != NCCLNET_SUCCESS)
    rc = tpx_err_quiet(tpx_from_nccl(r), "net plugin %s: devices failed with ncclResult %d", p->net.name,
                 r);
  else if (ndev <= 0)
    rc = tpx_err_quiet(TPX_ENOENT, "net plugin %s (%s) reports %d devices: no usable NIC", p->net.name,
                 p->file, ndev);
  if (rc) {
    tpx__adapt_fini(p);
    return rc;
  }
  p->ndev = ndev;
  p->max_recvs = 1;
  for (int d = 0; d < ndev; d++) {
    ncclnet_props_v12_t w;
    rc = tpx__adapt_props(p, d, &w);
    if (rc) {
      tpx__adapt_fini(p);
      return rc;
    }
    if (w.maxRecvs > p->max_recvs) p->max_recvs = TPX_MIN(w.maxRecvs, TPX_NET_MAX_RECVS);
    /* NCCL decides device offload on device 0 and rejects other UNPACK versions. */
    if (d == 0 && w.netDeviceType == NCCLNET_DEVICE_UNPACK) {
      if (w.netDeviceVersion != NCCLNET_DEVICE_UNPACK_VERSION) {
        rc = tpx_err_quiet(TPX_EVERSION, "net plugin %s: UNPACK device version %d, only %d is supported",
                     p->net.name, w.netDeviceVersion, NCCLNET_DEVICE_UNPACK_VERSION);
        tpx__adapt_fini(p);
        return rc;
      }
      p->unpack = 1;
      if (!tcpx)
        TPX_WARN("net plugin %s (%s) offers UNPACK receive offload like GPUDirect-TCPX but is not "
                 "named like it: its NCCL_* environment was not filled in (docs/CONFIG.md)",
                 p->net.name, p->file);
    } else if (d == 0 && w.netDeviceType != NCCLNET_DEVICE_HOST) {
      rc = tpx_err_quiet(TPX_ENOTSUP, "net plugin %s: device type %d is not supported (HOST or UNPACK)",
                   p->net.name, w.netDeviceType);
      tpx__adapt_fini(p);
      return rc;
    }
  }
  TPX_INFO("net plugin %s loaded from %s: ncclNet v%d, %d device(s)%s", p->net.name, p->file,
           p->version, ndev, p->unpack ? ", UNPACK receive offload" : "");
  return 0;
}

/* As NCCL: every successful init is paired with finalize(ctx), whatever ctx is. */
void tpx__adapt_fini(struct tpx_plugin *p) {
  if (p->fn.finalize && p->inited) {
    ncclnet_result_t r = p->fn.finalize(p->ctx);
    if (r != NCCLNET_SUCCESS)
      TPX_WARN("net plugin %s: finalize failed with ncclResult %d", p->net.name, r);
  }
  p->ctx = NULL;
  p->inited = 0;
}
