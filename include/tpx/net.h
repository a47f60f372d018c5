/* The net layer: one internal table that every transport is adapted to.
 *
 * A tpx_net_t is either the built-in TCP transport or an ncclNet plugin
 * (v7..v11) loaded by path or name and adapted by the loader: sizes are size_t,
 * getDeviceMr / irecvConsumed may be NULL, device-handle storage is owned by
 * the caller, and errors are negative tpx codes (tpx/error.h).
 *
 * Semantics are NCCL's (see docs/NCCLNET.md): listen never blocks; connect and
 * accept return 0 with *comm == NULL until the connection is up and are called
 * again with the SAME handle buffer / listen comm; isend/irecv may return 0
 * with *request == NULL (back-pressure: retry later); test reports completion.
 *
 * Public API (exported, like the rest of include/tpx/), though not in the
 * tpx.h umbrella: a tpx_net_t opened here can be shared by several endpoints
 * (tpx_endpoint_params.net), and tpx-netbench, tpx-info and the conformance
 * suite drive transports through it directly.
 */
#ifndef TPX_NET_H
#define TPX_NET_H

#include <stddef.h>
#include <stdint.h>
#include <sys/socket.h>
#include <sys/uio.h>

#include "tpx/error.h"
#include "tpx/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TPX_NET_HANDLE_BYTES 128 /* NCCL_NET_HANDLE_MAXSIZE */
#define TPX_NET_NAME_MAX 64
#define TPX_NET_KEY_BYTES 32 /* a session key for listen_keyed / connect_keyed */

enum tpx_ptr_type { TPX_PTR_HOST = 0x1, TPX_PTR_CUDA = 0x2, TPX_PTR_DMABUF = 0x4 };
enum tpx_net_dev_type { TPX_NET_DEV_HOST = 0, TPX_NET_DEV_UNPACK = 1 };
#define TPX_NET_UNPACK_VERSION 7

typedef struct tpx_net_props {
  char name[TPX_NET_NAME_MAX];
  char pci_path[256];
  uint64_t guid;
  int ptr_support;   /* TPX_PTR_* bits */
  int reg_is_global; /* v8+; 0 when the plugin predates it */
  int force_flush;   /* v9+ */
  int speed_mbps;
  int port;
  float latency_us;
  int max_comms;
  int max_recvs;
  int dev_type;    /* TPX_NET_DEV_HOST or TPX_NET_DEV_UNPACK */
  int dev_version; /* TPX_NET_UNPACK_VERSION for UNPACK */
  size_t max_p2p_bytes;  /* v9+; SIZE_MAX when the plugin does not say */
  size_t max_coll_bytes; /* v9+ */
  int rail_id;           /* v12+; -1 when the plugin does not say */
  int plane_id;          /* v12+; -1 when the plugin does not say */
} tpx_net_props_t;

/* Device handle filled by UNPACK plugins in accept (ncclNetDeviceHandle_v7
 * layout) followed by spare room: the TCPX plugin crashed when given less than
 * 512 bytes, so callers always own 512 bytes, 16-byte aligned. Pass the same
 * storage on every accept/connect retry. */
typedef struct tpx_net_dev_handle {
  int type;    /* TPX_NET_DEV_* */
  int version;
  void *handle; /* UNPACK: device pointer to {meta, bounce_buf, head} */
  size_t size;
  int needs_proxy_progress;
  _Alignas(16) unsigned char spare[480];
} tpx_net_dev_handle_t;

/* Requests in flight per comm: what NCCL expects every plugin to sustain
 * (32 since NCCL 2.19.1), and the GPUDirect-TCPX plugin's lower limit (16),
 * which the built-in transport also enforces in strict and unpack mode. */
#define TPX_NET_NCCL_MAX_REQUESTS 32
#define TPX_NET_TCPX_MAX_REQUESTS 16 /* the TCPX contract's limit (docs/UNPACK.md) */

/* What a transport can do, worked out once when it is opened (tpx_net_open,
 * tpx_net_open_builtin) from its own properties over all its devices, so
 * that no caller guesses from names or ABI versions. */
typedef struct tpx_net_caps {
  /* Requests in flight per comm the transport tolerates:
   * TPX_NET_TCPX_MAX_REQUESTS for TCPX-like transports (some device is
   * UNPACK; the built-in in strict or unpack mode; a HOST-type build of the
   * TCPX plugin, known only by its name: see tpx__net_caps_init),
   * else TPX_NET_NCCL_MAX_REQUESTS. */
  int max_requests;
  /* Some device is TPX_NET_DEV_UNPACK: receives land in the transport's
   * bounce pages (not the posted buffer), accept fills a device handle, and
   * every receive must be released with irecv_consumed (docs/UNPACK.md). */
  int unpack;
  int cuda_ptr; /* every device takes TPX_PTR_CUDA buffers */
  int host_ptr; /* every device takes TPX_PTR_HOST buffers */
  /* Our built-in TCP transport opened in this process (tpx_net_open_builtin,
   * also through tpx_net_open("" / "tpx" / "builtin")): CUDA sends are
   * staged by the caller, the sock layer's extras apply. 0 for every loaded
   * plugin, our own libnccl-net-tpx.so included. */
  int builtin;
  /* The transport has iflush (ops->iflush != NULL). GPUDirect RDMA plugins
   * need it before GPU memory written by a receive is read; the built-in's
   * is a no-op. */
  int flush;
  /* The transport has isendv / irecvv and takes them for host memory (the
   * built-in transport in plain mode; not in strict or unpack mode, which
   * keep the TCPX plugin's one buffer per request). 0 for every loaded
   * plugin: the ncclNet ABI takes one buffer per request. */
  int iov;
} tpx_net_caps_t;

/* Pieces per isendv / irecvv request at most (Linux's IOV_MAX). */
#define TPX_NET_IOV_MAX 1024

typedef struct tpx_net tpx_net_t;

typedef struct tpx_net_ops {
  int (*devices)(tpx_net_t *net, int *ndev);
  int (*get_properties)(tpx_net_t *net, int dev, tpx_net_props_t *props);
  /* handle: TPX_NET_HANDLE_BYTES bytes, filled here, carried to the peer. */
  int (*listen)(tpx_net_t *net, int dev, void *handle, void **listen_comm);
  /* send_dev may be NULL. Retry with the same handle until *send_comm != NULL. */
  int (*connect)(tpx_net_t *net, int dev, void *handle, void **send_comm,
                 tpx_net_dev_handle_t *send_dev);
  /* recv_dev: caller storage, required for UNPACK plugins, else may be NULL. */
  int (*accept)(tpx_net_t *net, void *listen_comm, void **recv_comm,
                tpx_net_dev_handle_t *recv_dev);
  int (*reg_mr)(tpx_net_t *net, void *comm, void *data, size_t size, int type, void **mhandle);
  int (*dereg_mr)(tpx_net_t *net, void *comm, void *mhandle);
  int (*isend)(tpx_net_t *net, void *send_comm, void *data, size_t size, int tag, void *mhandle,
               void **request);
  int (*irecv)(tpx_net_t *net, void *recv_comm, int n, void **data, size_t *sizes, int *tags,
               void **mhandles, void **request);
  int (*iflush)(tpx_net_t *net, void *recv_comm, int n, void **data, size_t *sizes,
                void **mhandles, void **request); /* may be NULL */
  /* sizes may be NULL. UNPACK plugins leave sizes untouched. */
  int (*test)(tpx_net_t *net, void *request, int *done, size_t *sizes);
  int (*close_send)(tpx_net_t *net, void *send_comm);
  int (*close_recv)(tpx_net_t *net, void *recv_comm);
  int (*close_listen)(tpx_net_t *net, void *listen_comm);
  int (*get_device_mr)(tpx_net_t *net, void *comm, void *mhandle, void **dptr_mhandle); /* may be NULL */
  int (*irecv_consumed)(tpx_net_t *net, void *recv_comm, int n, void *request);       /* may be NULL */
  void (*destroy)(tpx_net_t *net); /* frees net; called by tpx_net_close */
  /* Where connect would dial for a peer's listen handle: the address (port
   * included) and how many TCP connections it would open. Lets the engine
   * refuse a handle before dialling (docs/SECURITY.md). NULL: the handle is
   * opaque (ncclNet plugins). Errors: a malformed handle. */
  int (*handle_dials)(tpx_net_t *net, const void *handle, struct sockaddr_storage *addr, int *conns);
  /* Data connections bound to a session key (TPX_NET_KEY_BYTES, e.g. derived
   * from an authenticated handshake: docs/SECURITY.md). listen_keyed: as
   * listen, but the handle says that a connector must prove the key, and the
   * listen comm accepts only connections whose hello carries an HMAC under it
   * over the handle's nonce and fresh per-connection nonces, and only one
   * comm. connect_keyed: as connect (same key on every retry); proves the
   * key when the handle asks for it. A plain connect to a keyed handle fails
   * (TPX_EAUTH). NULL: the transport cannot (ncclNet plugins: their sockets
   * are their own). */
  int (*listen_keyed)(tpx_net_t *net, int dev, const uint8_t *key, void *handle, void **listen_comm);
  int (*connect_keyed)(tpx_net_t *net, int dev, const uint8_t *key, void *handle, void **send_comm,
                       tpx_net_dev_handle_t *send_dev);
  /* Vectored send / receive (caps.iov; NULL otherwise): one request whose
   * bytes are the concatenation of iovcnt pieces of host memory (0 ..
   * TPX_NET_IOV_MAX pieces, empty ones allowed), on the wire exactly as
   * one isend / irecv of the same bytes, so either end may use the
   * one-buffer call instead. mhandles: NULL, or one memory handle (or NULL)
   * per piece. The list is copied: the caller's array may go once the call
   * returns, the memory may not until test says done. As irecv: test
   * reports the size the sender sent, and a message longer than the pieces
   * together is TPX_ETRUNC. Back-pressure, tags and errors as isend /
   * irecv. */
  int (*isendv)(tpx_net_t *net, void *send_comm, const struct iovec *iov, int iovcnt, int tag,
                void **mhandles, void **request);
  int (*irecvv)(tpx_net_t *net, void *recv_comm, const struct iovec *iov, int iovcnt, int tag,
                void **mhandles, void **request);
  /* Give up a connect in progress (connect returned 0 with *send_comm NULL
   * for this handle buffer): what it holds goes now (its sockets closed) and
   * the handle's connector state is cleared. A handle with no connect in
   * progress is left alone (0). NULL: the transport cannot (ncclNet plugins:
   * the ABI has no such call); the engine then keeps calling connect with the
   * same buffer until it returns a comm, which it closes, or an error
   * (docs/SECURITY.md, "Abandoned connects"). A connect that had retried
   * (docs/RELIABILITY.md, "Connection setup") leaves its attempts' causes
   * in tpx_last_error(). */
  int (*connect_abort)(tpx_net_t *net, void *handle);
} tpx_net_ops_t;

struct tpx_net {
  const tpx_net_ops_t *ops;
  char name[TPX_NET_NAME_MAX]; /* the transport's own name ("tpx", "GPUDirectTCPX_v7") */
  int abi_version;             /* ncclNet version loaded (7..12); 0 for the built-in transport */
  void *impl;                  /* transport private state */
  tpx_net_caps_t caps;         /* filled by the open call; read-only afterwards */
};

/* 1 when spec names the built-in transport rather than a plugin: NULL, "",
 * "tpx" or "builtin" (TPX_NET_PLUGIN's values; tpx_net_open reads the
 * environment for a NULL spec before asking). The one place this is decided. */
TPX_API int tpx_net_spec_is_builtin(const char *spec);

/* Open a transport.
 * spec: NULL -> TPX_NET_PLUGIN from the environment, else the built-in one;
 *       "" / "tpx" / "builtin" -> the built-in transport;
 *       a path (contains '/') -> dlopen that file;
 *       a bare name N -> dlopen(N), then libnccl-net-N.so searched like NCCL
 *       (LD_LIBRARY_PATH, system paths), then /usr/local/tcpx/lib64/.
 * The highest exported ncclNetPlugin_vN (11 down to 7) is used, or exactly
 * v<TPX_NET_ABI> when that is set.
 * A plugin is loaded and initialised once per process, as NCCL does: opening
 * the same library again returns the same tpx_net_t (one more reference);
 * each open needs its tpx_net_close, and the last one finalises (v11) and
 * unloads it. Asking for another ABI version than the loaded instance's is
 * TPX_EUSAGE (it would take a second init).
 * Errors: TPX_ENOENT (file missing; detail carries dlerror), TPX_ENOSYM
 * (no known symbol), TPX_EVERSION (only unsupported versions, e.g. v6),
 * or the plugin's init failure. */
TPX_API int tpx_net_open(const char *spec, tpx_net_t **out);

/* The built-in TCP transport, configured from cfg (NULL: the environment). */
struct tpx_config;
TPX_API int tpx_net_open_builtin(const struct tpx_config *cfg, tpx_net_t **out);

/* Release the transport; for a loaded plugin, one reference (the last:
 * finalize + dlclose). NULL ok. */
TPX_API void tpx_net_close(tpx_net_t *net);

/* The file a loaded plugin came from, as the dynamic loader resolved it (for
 * a bare name too); NULL for the built-in transport. Valid until
 * tpx_net_close. */
TPX_API const char *tpx_net_plugin_file(const tpx_net_t *net);

#ifdef __cplusplus
}
#endif
#endif
