/* Our own declarations of the NCCL net-plugin ABI, versions 7 to 12.
 *
 * A plugin exports a data symbol ncclNetPlugin_vN holding a name and a table
 * of C function pointers; every function returns an ncclResult_t (an int).
 * Written from the facts in docs/NCCLNET.md; layouts checked against NCCL
 * 2.28's plugin headers (v12: NCCL 2.30's) (the static_asserts below pin them for x86_64 and
 * aarch64 LP64). Names are ours (ncclnet_*), so this header can never clash
 * with NCCL's own if both end up in one translation unit.
 *
 * Table evolution (what the adapters in loader/adapt and plugin/export rely on):
 *   v7  base table: init(logger); int sizes everywhere.
 *   v8  regMr takes size_t; properties gain regIsGlobal after ptrSupport.
 *   v9  isend size_t, irecv size_t*; iflush/test keep int; makeVDevice
 *       appended; properties gain forceFlush, vProps, maxP2pBytes, maxCollBytes.
 *   v10 init(logger, profiler); connect(dev, commConfig*, ...); isend/irecv
 *       gain profiler handles before the request.
 *   v11 init(&ctx, commId, commConfig*, logger, profiler); listen/connect take
 *       ctx first; finalize(ctx) and setNetAttr(ctx, attr*) appended;
 *       properties append maxMultiRequestSize.
 *   v12 table as v11 (v12 types); vProps.devs grows to 8; properties append
 *       int16_t railId, planeId (128 bytes in all).
 */
#ifndef TPX_NCCLNET_ABI_H
#define TPX_NCCLNET_ABI_H

#include <stddef.h>
#include <stdint.h>

/* ---- results -------------------------------------------------------------- */
typedef int ncclnet_result_t;
enum {
  NCCLNET_SUCCESS = 0,
  NCCLNET_UNHANDLED_CUDA_ERROR = 1,
  NCCLNET_SYSTEM_ERROR = 2,
  NCCLNET_INTERNAL_ERROR = 3,
  NCCLNET_INVALID_ARGUMENT = 4,
  NCCLNET_INVALID_USAGE = 5,
  NCCLNET_REMOTE_ERROR = 6,
  NCCLNET_IN_PROGRESS = 7,
};

/* ---- constants ------------------------------------------------------------ */
#define NCCLNET_HANDLE_MAXSIZE 128
#define NCCLNET_PTR_HOST 0x1
#define NCCLNET_PTR_CUDA 0x2
#define NCCLNET_PTR_DMABUF 0x4
#define NCCLNET_MAX_REQUESTS 32    /* per comm, NCCL >= 2.19.1 */
#define NCCLNET_MAX_DEVS_PER_NIC 4 /* vProps.devs[] length, v9..v11 */
#define NCCLNET_MAX_DEVS_PER_NIC_V12 8
/* v12 railId / planeId when the plugin does not know. */
#define NCCLNET_ID_UNDEF (-1)
/* NCCL rejects maxP2pBytes outside (0, 2^40] at connection setup. */
#define NCCLNET_MAX_NET_SIZE_BYTES (1ull << 40)
/* NCCL may store this in *request before irecv (LL/LL128 receives whose
 * completion it will not test); a plugin must overwrite it. */
#define NCCLNET_OPTIONAL_RECV_COMPLETION ((void *)0x1)
#define NCCLNET_TRAFFIC_CLASS_UNDEF (-1)
#define NCCLNET_ATTR_UNDEF (-1)

/* netDeviceType; NCCL accepts UNPACK only at device version 7. */
enum { NCCLNET_DEVICE_HOST = 0, NCCLNET_DEVICE_UNPACK = 1 };
#define NCCLNET_DEVICE_INVALID_VERSION 0
#define NCCLNET_DEVICE_UNPACK_VERSION 7

/* Debug levels and subsystem flags of the logger callback. */
enum {
  NCCLNET_LOG_NONE = 0,
  NCCLNET_LOG_VERSION = 1,
  NCCLNET_LOG_WARN = 2,
  NCCLNET_LOG_INFO = 3,
  NCCLNET_LOG_ABORT = 4,
  NCCLNET_LOG_TRACE = 5,
};
#define NCCLNET_SUBSYS_INIT 0x1ul
#define NCCLNET_SUBSYS_NET 0x10ul

typedef void (*ncclnet_logger_t)(int level, unsigned long flags, const char *file, int line,
                                 const char *fmt, ...);
/* v10+: NCCL's profiler hook (the plugin may ignore it). */
typedef ncclnet_result_t (*ncclnet_profiler_cb_t)(void **event_handle, int type, void *phandle,
                                                  int64_t plugin_id, void *ext_data);

/* ---- shared structs --------------------------------------------------------- */
/* Device-offload handle (identical v7..v12). The caller allocates it and
 * passes a pointer to a pointer to it to connect/accept. */
typedef struct ncclnet_dev_handle {
  int netDeviceType;
  int netDeviceVersion;
  void *handle;
  size_t size;
  int needsProxyProgress;
} ncclnet_dev_handle_t;

typedef struct ncclnet_vprops {
  int ndevs;
  int devs[NCCLNET_MAX_DEVS_PER_NIC];
} ncclnet_vprops_t; /* v9, v10, v11 */

typedef struct ncclnet_vprops_v12 {
  int ndevs;
  int devs[NCCLNET_MAX_DEVS_PER_NIC_V12];
} ncclnet_vprops_v12_t;

typedef struct ncclnet_comm_config {
  int trafficClass;      /* NCCLNET_TRAFFIC_CLASS_UNDEF when unset */
} ncclnet_comm_config_t; /* v10 (connect), v11 (init) */

typedef struct ncclnet_comm_attr {
  int32_t maxConcurrentPeers;
  int32_t minConcurrentPeers;
  int32_t maxFlowsPerPeer;
  int32_t minFlowsPerPeer;
} ncclnet_comm_attr_t;

typedef struct ncclnet_attr {
  ncclnet_comm_attr_t sendCommAttr;
  ncclnet_comm_attr_t recvCommAttr;
  uint32_t op;    /* bit mask of collective kinds */
  uint32_t algo;  /* bit mask of algorithms */
  uint32_t proto; /* bit mask of protocols */
} ncclnet_attr_t; /* v11 setNetAttr */

/* ---- properties per version ------------------------------------------------- */
typedef struct ncclnet_props_v7 {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport; /* NCCLNET_PTR_* bits */
  int speed;      /* Mbps */
  int port;
  float latency; /* microseconds */
  int maxComms;
  int maxRecvs; /* grouped receives per irecv */
  int netDeviceType;
  int netDeviceVersion;
} ncclnet_props_v7_t;

typedef struct ncclnet_props_v8 {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal; /* new: a registration is valid on every comm */
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
} ncclnet_props_v8_t;

/* v9 and v10 share one layout. */
typedef struct ncclnet_props_v9 {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush; /* new: flush every receive */
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  ncclnet_vprops_t vProps; /* new: physical devices behind this (virtual) one */
  size_t maxP2pBytes;      /* new */
  size_t maxCollBytes;     /* new */
} ncclnet_props_v9_t;
typedef ncclnet_props_v9_t ncclnet_props_v10_t;

typedef struct ncclnet_props_v11 {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  ncclnet_vprops_t vProps;
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize; /* new: requests per multi-request; 1 = none */
} ncclnet_props_v11_t;

typedef struct ncclnet_props_v12 {
  char *name;
  char *pciPath;
  uint64_t guid;
  int ptrSupport;
  int regIsGlobal;
  int forceFlush;
  int speed;
  int port;
  float latency;
  int maxComms;
  int maxRecvs;
  int netDeviceType;
  int netDeviceVersion;
  ncclnet_vprops_v12_t vProps; /* devs[8] */
  size_t maxP2pBytes;
  size_t maxCollBytes;
  int maxMultiRequestSize;
  int16_t railId;  /* new: NCCLNET_ID_UNDEF when unknown */
  int16_t planeId; /* new */
} ncclnet_props_v12_t;

/* ---- function signatures shared between versions ----------------------------- */
typedef ncclnet_result_t ncclnet_devices_fn(int *ndev);
typedef ncclnet_result_t ncclnet_listen_fn(int dev, void *handle, void **listen_comm);
typedef ncclnet_result_t ncclnet_listen_ctx_fn(void *ctx, int dev, void *handle,
                                               void **listen_comm);
typedef ncclnet_result_t ncclnet_accept_fn(void *listen_comm, void **recv_comm,
                                           ncclnet_dev_handle_t **recv_dev);
typedef ncclnet_result_t ncclnet_regmr_int_fn(void *comm, void *data, int size, int type,
                                              void **mh);
typedef ncclnet_result_t ncclnet_regmr_fn(void *comm, void *data, size_t size, int type, void **mh);
typedef ncclnet_result_t ncclnet_regmr_dmabuf_fn(void *comm, void *data, size_t size, int type,
                                                 uint64_t offset, int fd, void **mh);
typedef ncclnet_result_t ncclnet_deregmr_fn(void *comm, void *mh);
typedef ncclnet_result_t ncclnet_isend_int_fn(void *send_comm, void *data, int size, int tag,
                                              void *mh, void **request);
typedef ncclnet_result_t ncclnet_isend_fn(void *send_comm, void *data, size_t size, int tag,
                                          void *mh, void **request);
typedef ncclnet_result_t ncclnet_isend_ph_fn(void *send_comm, void *data, size_t size, int tag,
                                             void *mh, void *phandle, void **request);
typedef ncclnet_result_t ncclnet_irecv_int_fn(void *recv_comm, int n, void **data, int *sizes,
                                              int *tags, void **mhs, void **request);
typedef ncclnet_result_t ncclnet_irecv_fn(void *recv_comm, int n, void **data, size_t *sizes,
                                          int *tags, void **mhs, void **request);
typedef ncclnet_result_t ncclnet_irecv_ph_fn(void *recv_comm, int n, void **data, size_t *sizes,
                                             int *tags, void **mhs, void **phandles,
                                             void **request);
typedef ncclnet_result_t ncclnet_iflush_fn(void *recv_comm, int n, void **data, int *sizes,
                                           void **mhs,
                                           void **request); /* int sizes, all versions */
typedef ncclnet_result_t ncclnet_test_fn(void *request, int *done, int *sizes); /* all versions */
typedef ncclnet_result_t ncclnet_close_fn(void *comm);
typedef ncclnet_result_t ncclnet_get_device_mr_fn(void *comm, void *mh, void **dptr_mh);
typedef ncclnet_result_t ncclnet_irecv_consumed_fn(void *recv_comm, int n, void *request);
typedef ncclnet_result_t ncclnet_make_vdevice_fn(int *d, ncclnet_vprops_t *props);
typedef ncclnet_result_t ncclnet_make_vdevice_v12_fn(int *d, ncclnet_vprops_v12_t *props);

/* ---- tables --------------------------------------------------------------------- */
typedef struct ncclnet_v7 {
  const char *name;
  ncclnet_result_t (*init)(ncclnet_logger_t logger);
  ncclnet_devices_fn *devices;
  ncclnet_result_t (*getProperties)(int dev, ncclnet_props_v7_t *props);
  ncclnet_listen_fn *listen;
  ncclnet_result_t (*connect)(int dev, void *handle, void **send_comm,
                              ncclnet_dev_handle_t **send_dev);
  ncclnet_accept_fn *accept;
  ncclnet_regmr_int_fn *regMr;
  ncclnet_regmr_dmabuf_fn *regMrDmaBuf; /* may be NULL */
  ncclnet_deregmr_fn *deregMr;
  ncclnet_isend_int_fn *isend;
  ncclnet_irecv_int_fn *irecv;
  ncclnet_iflush_fn *iflush;
  ncclnet_test_fn *test;
  ncclnet_close_fn *closeSend;
  ncclnet_close_fn *closeRecv;
  ncclnet_close_fn *closeListen;
  ncclnet_get_device_mr_fn *getDeviceMr;    /* may be NULL */
  ncclnet_irecv_consumed_fn *irecvConsumed; /* may be NULL */
} ncclnet_v7_t;

typedef struct ncclnet_v8 {
  const char *name;
  ncclnet_result_t (*init)(ncclnet_logger_t logger);
  ncclnet_devices_fn *devices;
  ncclnet_result_t (*getProperties)(int dev, ncclnet_props_v8_t *props);
  ncclnet_listen_fn *listen;
  ncclnet_result_t (*connect)(int dev, void *handle, void **send_comm,
                              ncclnet_dev_handle_t **send_dev);
  ncclnet_accept_fn *accept;
  ncclnet_regmr_fn *regMr; /* size_t from v8 on */
  ncclnet_regmr_dmabuf_fn *regMrDmaBuf;
  ncclnet_deregmr_fn *deregMr;
  ncclnet_isend_int_fn *isend;
  ncclnet_irecv_int_fn *irecv;
  ncclnet_iflush_fn *iflush;
  ncclnet_test_fn *test;
  ncclnet_close_fn *closeSend;
  ncclnet_close_fn *closeRecv;
  ncclnet_close_fn *closeListen;
  ncclnet_get_device_mr_fn *getDeviceMr;
  ncclnet_irecv_consumed_fn *irecvConsumed;
} ncclnet_v8_t;

typedef struct ncclnet_v9 {
  const char *name;
  ncclnet_result_t (*init)(ncclnet_logger_t logger);
  ncclnet_devices_fn *devices;
  ncclnet_result_t (*getProperties)(int dev, ncclnet_props_v9_t *props);
  ncclnet_listen_fn *listen;
  ncclnet_result_t (*connect)(int dev, void *handle, void **send_comm,
                              ncclnet_dev_handle_t **send_dev);
  ncclnet_accept_fn *accept;
  ncclnet_regmr_fn *regMr;
  ncclnet_regmr_dmabuf_fn *regMrDmaBuf;
  ncclnet_deregmr_fn *deregMr;
  ncclnet_isend_fn *isend; /* size_t from v9 on */
  ncclnet_irecv_fn *irecv; /* size_t * from v9 on */
  ncclnet_iflush_fn *iflush;
  ncclnet_test_fn *test;
  ncclnet_close_fn *closeSend;
  ncclnet_close_fn *closeRecv;
  ncclnet_close_fn *closeListen;
  ncclnet_get_device_mr_fn *getDeviceMr;
  ncclnet_irecv_consumed_fn *irecvConsumed;
  ncclnet_make_vdevice_fn *makeVDevice; /* may be NULL: NCCL then uses physical devices */
} ncclnet_v9_t;

typedef struct ncclnet_v10 {
  const char *name;
  ncclnet_result_t (*init)(ncclnet_logger_t logger, ncclnet_profiler_cb_t prof);
  ncclnet_devices_fn *devices;
  ncclnet_result_t (*getProperties)(int dev, ncclnet_props_v10_t *props);
  ncclnet_listen_fn *listen;
  ncclnet_result_t (*connect)(int dev, ncclnet_comm_config_t *config, void *handle,
                              void **send_comm, ncclnet_dev_handle_t **send_dev);
  ncclnet_accept_fn *accept;
  ncclnet_regmr_fn *regMr;
  ncclnet_regmr_dmabuf_fn *regMrDmaBuf;
  ncclnet_deregmr_fn *deregMr;
  ncclnet_isend_ph_fn *isend;
  ncclnet_irecv_ph_fn *irecv;
  ncclnet_iflush_fn *iflush;
  ncclnet_test_fn *test;
  ncclnet_close_fn *closeSend;
  ncclnet_close_fn *closeRecv;
  ncclnet_close_fn *closeListen;
  ncclnet_get_device_mr_fn *getDeviceMr;
  ncclnet_irecv_consumed_fn *irecvConsumed;
  ncclnet_make_vdevice_fn *makeVDevice;
} ncclnet_v10_t;

typedef struct ncclnet_v11 {
  const char *name;
  /* Called once per NCCL communicator; *ctx is per-communicator state that
   * comes back in listen/connect/finalize/setNetAttr. */
  ncclnet_result_t (*init)(void **ctx, uint64_t comm_id, ncclnet_comm_config_t *config,
                           ncclnet_logger_t logger, ncclnet_profiler_cb_t prof);
  ncclnet_devices_fn *devices;
  ncclnet_result_t (*getProperties)(int dev, ncclnet_props_v11_t *props);
  ncclnet_listen_ctx_fn *listen;
  ncclnet_result_t (*connect)(void *ctx, int dev, void *handle, void **send_comm,
                              ncclnet_dev_handle_t **send_dev);
  ncclnet_accept_fn *accept;
  ncclnet_regmr_fn *regMr;
  ncclnet_regmr_dmabuf_fn *regMrDmaBuf;
  ncclnet_deregmr_fn *deregMr;
  ncclnet_isend_ph_fn *isend;
  ncclnet_irecv_ph_fn *irecv;
  ncclnet_iflush_fn *iflush;
  ncclnet_test_fn *test;
  ncclnet_close_fn *closeSend;
  ncclnet_close_fn *closeRecv;
  ncclnet_close_fn *closeListen;
  ncclnet_get_device_mr_fn *getDeviceMr;
  ncclnet_irecv_consumed_fn *irecvConsumed;
  ncclnet_make_vdevice_fn *makeVDevice;
  ncclnet_result_t (*finalize)(void *ctx); /* NCCL calls it unconditionally: never NULL */
  ncclnet_result_t (*setNetAttr)(void *ctx, ncclnet_attr_t *attr); /* may be NULL */
} ncclnet_v11_t;

typedef struct ncclnet_v12 {
  const char *name;
  ncclnet_result_t (*init)(void **ctx, uint64_t comm_id, ncclnet_comm_config_t *config,
                           ncclnet_logger_t logger, ncclnet_profiler_cb_t prof);
  ncclnet_devices_fn *devices;
  ncclnet_result_t (*getProperties)(int dev, ncclnet_props_v12_t *props);
  ncclnet_listen_ctx_fn *listen;
  ncclnet_result_t (*connect)(void *ctx, int dev, void *handle, void **send_comm,
                              ncclnet_dev_handle_t **send_dev);
  ncclnet_accept_fn *accept;
  ncclnet_regmr_fn *regMr;
  ncclnet_regmr_dmabuf_fn *regMrDmaBuf;
  ncclnet_deregmr_fn *deregMr;
  ncclnet_isend_ph_fn *isend;
  ncclnet_irecv_ph_fn *irecv;
  ncclnet_iflush_fn *iflush;
  ncclnet_test_fn *test;
  ncclnet_close_fn *closeSend;
  ncclnet_close_fn *closeRecv;
  ncclnet_close_fn *closeListen;
  ncclnet_get_device_mr_fn *getDeviceMr;
  ncclnet_irecv_consumed_fn *irecvConsumed;
  ncclnet_make_vdevice_v12_fn *makeVDevice; /* vProps with devs[8] */
  ncclnet_result_t (*finalize)(void *ctx);
  ncclnet_result_t (*setNetAttr)(void *ctx, ncclnet_attr_t *attr);
} ncclnet_v12_t;

/* Exported symbol names, highest first (the probing order). */
#define NCCLNET_SYMBOL_PREFIX "ncclNetPlugin_v"
#define NCCLNET_MIN_VERSION 7
#define NCCLNET_MAX_VERSION 12

/* ---- layout pins (LP64) ------------------------------------------------------------ */
#if defined(__LP64__)
#define NCCLNET_PIN_SIZE(t, n) _Static_assert(sizeof(t) == (n), #t " size")
#define NCCLNET_PIN_OFF(t, f, n) _Static_assert(offsetof(t, f) == (n), #t "." #f " offset")
NCCLNET_PIN_SIZE(ncclnet_dev_handle_t, 32);
NCCLNET_PIN_OFF(ncclnet_dev_handle_t, handle, 8);
NCCLNET_PIN_OFF(ncclnet_dev_handle_t, size, 16);
NCCLNET_PIN_OFF(ncclnet_dev_handle_t, needsProxyProgress, 24);
NCCLNET_PIN_SIZE(ncclnet_vprops_t, 20);
NCCLNET_PIN_SIZE(ncclnet_vprops_v12_t, 36);
NCCLNET_PIN_SIZE(ncclnet_comm_config_t, 4);
NCCLNET_PIN_SIZE(ncclnet_attr_t, 44);
NCCLNET_PIN_OFF(ncclnet_attr_t, op, 32);

NCCLNET_PIN_SIZE(ncclnet_props_v7_t, 56);
NCCLNET_PIN_OFF(ncclnet_props_v7_t, ptrSupport, 24);
NCCLNET_PIN_OFF(ncclnet_props_v7_t, speed, 28);
NCCLNET_PIN_OFF(ncclnet_props_v7_t, latency, 36);
NCCLNET_PIN_OFF(ncclnet_props_v7_t, netDeviceType, 48);
NCCLNET_PIN_OFF(ncclnet_props_v7_t, netDeviceVersion, 52);

NCCLNET_PIN_SIZE(ncclnet_props_v8_t, 64);
NCCLNET_PIN_OFF(ncclnet_props_v8_t, regIsGlobal, 28);
NCCLNET_PIN_OFF(ncclnet_props_v8_t, speed, 32);
NCCLNET_PIN_OFF(ncclnet_props_v8_t, netDeviceVersion, 56);

NCCLNET_PIN_SIZE(ncclnet_props_v9_t, 104);
NCCLNET_PIN_OFF(ncclnet_props_v9_t, forceFlush, 32);
NCCLNET_PIN_OFF(ncclnet_props_v9_t, speed, 36);
NCCLNET_PIN_OFF(ncclnet_props_v9_t, maxRecvs, 52);
NCCLNET_PIN_OFF(ncclnet_props_v9_t, netDeviceVersion, 60);
NCCLNET_PIN_OFF(ncclnet_props_v9_t, vProps, 64);
NCCLNET_PIN_OFF(ncclnet_props_v9_t, maxP2pBytes, 88);
NCCLNET_PIN_OFF(ncclnet_props_v9_t, maxCollBytes, 96);

NCCLNET_PIN_SIZE(ncclnet_props_v11_t, 112);
NCCLNET_PIN_OFF(ncclnet_props_v11_t, vProps, 64);
NCCLNET_PIN_OFF(ncclnet_props_v11_t, maxP2pBytes, 88);
NCCLNET_PIN_OFF(ncclnet_props_v11_t, maxMultiRequestSize, 104);

NCCLNET_PIN_SIZE(ncclnet_props_v12_t, 128);
NCCLNET_PIN_OFF(ncclnet_props_v12_t, netDeviceVersion, 60);
NCCLNET_PIN_OFF(ncclnet_props_v12_t, vProps, 64);
NCCLNET_PIN_OFF(ncclnet_props_v12_t, maxP2pBytes, 104);
NCCLNET_PIN_OFF(ncclnet_props_v12_t, maxCollBytes, 112);
NCCLNET_PIN_OFF(ncclnet_props_v12_t, maxMultiRequestSize, 120);
NCCLNET_PIN_OFF(ncclnet_props_v12_t, railId, 124);
NCCLNET_PIN_OFF(ncclnet_props_v12_t, planeId, 126);

/* Tables: name + N function pointers, no padding. */
NCCLNET_PIN_SIZE(ncclnet_v7_t, 19 * 8);
NCCLNET_PIN_SIZE(ncclnet_v8_t, 19 * 8);
NCCLNET_PIN_SIZE(ncclnet_v9_t, 20 * 8);
NCCLNET_PIN_SIZE(ncclnet_v10_t, 20 * 8);
NCCLNET_PIN_SIZE(ncclnet_v11_t, 22 * 8);
NCCLNET_PIN_SIZE(ncclnet_v12_t, 22 * 8);
NCCLNET_PIN_OFF(ncclnet_v7_t, regMr, 7 * 8);
NCCLNET_PIN_OFF(ncclnet_v7_t, isend, 10 * 8);
NCCLNET_PIN_OFF(ncclnet_v7_t, test, 13 * 8);
NCCLNET_PIN_OFF(ncclnet_v7_t, getDeviceMr, 17 * 8);
NCCLNET_PIN_OFF(ncclnet_v9_t, makeVDevice, 19 * 8);
NCCLNET_PIN_OFF(ncclnet_v11_t, listen, 4 * 8);
NCCLNET_PIN_OFF(ncclnet_v11_t, finalize, 20 * 8);
NCCLNET_PIN_OFF(ncclnet_v11_t, setNetAttr, 21 * 8);
NCCLNET_PIN_OFF(ncclnet_v12_t, makeVDevice, 19 * 8);
NCCLNET_PIN_OFF(ncclnet_v12_t, finalize, 20 * 8);
#undef NCCLNET_PIN_SIZE
#undef NCCLNET_PIN_OFF
#endif

#endif
