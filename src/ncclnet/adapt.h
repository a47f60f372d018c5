/* Adapting a loaded ncclNet table (v7..v12) to the internal tpx_net_ops_t.
 *
 * The loader (loader.c) finds the file and the symbol; adapt.c turns the
 * version-specific table into one set of "normalised" entry points (exactly
 * one variant of each versioned call is non-NULL), then every internal op is
 * one shared wrapper that validates its arguments, converts sizes and results,
 * and calls whichever variant is present. */
#ifndef TPX_NCCLNET_ADAPT_H
#define TPX_NCCLNET_ADAPT_H

#include <limits.h>

#include "ncclnet/abi.h"
#include "tpx/net.h"

/* Most buffers one grouped irecv/test may carry through the adapters (NCCL
 * groups at most 8). */
#define TPX_NET_MAX_RECVS 64

struct tpx_plugin_fns {
  /* init: one of */
  ncclnet_result_t (*init_v7)(ncclnet_logger_t);
  ncclnet_result_t (*init_v10)(ncclnet_logger_t, ncclnet_profiler_cb_t);
  ncclnet_result_t (*init_v11)(void **, uint64_t, ncclnet_comm_config_t *, ncclnet_logger_t,
                               ncclnet_profiler_cb_t);
  ncclnet_devices_fn *devices;
  /* getProperties: one of */
  ncclnet_result_t (*props_v7)(int, ncclnet_props_v7_t *);
  ncclnet_result_t (*props_v8)(int, ncclnet_props_v8_t *);
  ncclnet_result_t (*props_v9)(int, ncclnet_props_v9_t *); /* v9 and v10 */
  ncclnet_result_t (*props_v11)(int, ncclnet_props_v11_t *);
  ncclnet_result_t (*props_v12)(int, ncclnet_props_v12_t *);
  /* listen: one of */
  ncclnet_listen_fn *listen;
  ncclnet_listen_ctx_fn *listen_ctx;
  /* connect: one of */
  ncclnet_result_t (*connect_v7)(int, void *, void **, ncclnet_dev_handle_t **);
  ncclnet_result_t (*connect_v10)(int, ncclnet_comm_config_t *, void *, void **,
                                  ncclnet_dev_handle_t **);
  ncclnet_result_t (*connect_v11)(void *, int, void *, void **, ncclnet_dev_handle_t **);
  ncclnet_accept_fn *accept;
  /* regMr: one of */
  ncclnet_regmr_int_fn *regmr_int;
  ncclnet_regmr_fn *regmr;
  ncclnet_deregmr_fn *deregmr;
  /* isend / irecv: one of each */
  ncclnet_isend_int_fn *isend_int;
  ncclnet_isend_fn *isend;
  ncclnet_isend_ph_fn *isend_ph;
  ncclnet_irecv_int_fn *irecv_int;
  ncclnet_irecv_fn *irecv;
  ncclnet_irecv_ph_fn *irecv_ph;
  ncclnet_iflush_fn *iflush; /* optional */
  ncclnet_test_fn *test;
  ncclnet_close_fn *close_send;
  ncclnet_close_fn *close_recv;
  ncclnet_close_fn *close_listen;
  ncclnet_get_device_mr_fn *get_device_mr;   /* optional */
  ncclnet_irecv_consumed_fn *irecv_consumed; /* optional */
  ncclnet_result_t (*finalize)(void *);      /* v11, v12 */
};

struct tpx_plugin {
  tpx_net_t net;     /* net.impl points back here */
  tpx_net_ops_t ops; /* per plugin: optional entries NULL when the plugin lacks them */
  struct tpx_plugin_fns fn;
  void *dl;
  int version;
  char file[PATH_MAX];
  void *ctx;                    /* v11+ per-"communicator" context (may be NULL) */
  int inited;                   /* init succeeded: finalize is owed (v11+) */
  ncclnet_comm_config_t config; /* v10 connect / v11+ init */
  int ndev;
  int max_recvs;                /* max over devices, capped at TPX_NET_MAX_RECVS */
  int unpack;                   /* device 0 is UNPACK: accept needs a device handle */
  ncclnet_dev_handle_t *no_dev; /* a stable slot that stays NULL ("no offload") */
  /* One instance per loaded library and process (loader.c): every opener
   * shares it; the last tpx_net_close finalises and unloads it. */
  int refs;
  struct tpx_plugin *next;
};

/* Fill p->fn from the table of version p->version; checks required entries.
 * Returns 0 or TPX_EVERSION naming the missing entry. */
int tpx__adapt_bind(struct tpx_plugin *p, const void *table);

/* Initialise the plugin (logger routed to our logs), count devices, read
 * properties, and build p->ops. On error the plugin is finalised (v11) but
 * not unloaded. */
int tpx__adapt_init(struct tpx_plugin *p, ncclnet_logger_t logger);

/* Read device properties into the widest (v12) layout, filling what older
 * versions lack the way NCCL does (vProps = {1, {dev}}, sizes unlimited,
 * railId/planeId NCCLNET_ID_UNDEF). */
int tpx__adapt_props(struct tpx_plugin *p, int dev, ncclnet_props_v12_t *w);

/* Finalise (v11) without unloading. */
void tpx__adapt_fini(struct tpx_plugin *p);

#endif
