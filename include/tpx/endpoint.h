/* Endpoints and peers.
 *
 * An endpoint is one process's presence on the network for one GPU (or for
 * host memory): a transport (the built-in TCP one or an ncclNet plugin), a
 * control listener on TCP, and the peers connected to it. A peer is one
 * remote endpoint: a control connection plus `num_channels` data channels,
 * each a send comm and a recv comm of the transport.
 *
 * Lifetimes: tpx_endpoint_create / tpx_endpoint_destroy; peers come from
 * tpx_connect, tpx_load_remote_conn_info or tpx_accept and are released with
 * tpx_peer_close (or all at once by tpx_endpoint_destroy). Every call returns 0
 * or a negative code from tpx/error.h; tpx_last_error() has the detail.
 *
 * Threads: all calls are thread-safe. Progress (moving bytes, answering the
 * peer's control messages, accepting peers) runs on a background thread when
 * cfg->progress_thread is 1, else inside tpx_progress() and the blocking calls
 * (tpx_xfer_wait, tpx_connect, tpx_accept).
 */
#ifndef TPX_ENDPOINT_H
#define TPX_ENDPOINT_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/config.h"
#include "tpx/error.h"
#include "tpx/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpx_endpoint tpx_endpoint_t;
typedef struct tpx_peer tpx_peer_t;
struct tpx_net;

#define TPX_NAME_MAX 64         /* endpoint names, including the NUL */
#define TPX_CONN_INFO_MAX 1024  /* upper bound of a connection-info blob */
#define TPX_PORT_EPHEMERAL (-1) /* tpx_endpoint_params.port: let the kernel pick */

typedef struct tpx_endpoint_params {
  const tpx_config_t *cfg;  /* NULL: tpx_config_global(). Copied at create. */
  const char *plugin;       /* NULL: cfg->net_plugin; "" / "tpx" / "builtin": the built-in
                               transport; else a path or name for tpx_net_open() */
  struct tpx_net *net;      /* optional transport shared by several endpoints (borrowed,
                               must outlive the endpoint); overrides `plugin` */
  const char *name;         /* identity shown to peers (notifications); NULL: "host:pid:gpu" */
  int gpu;                  /* GPU index (0 for host-only use); selects the port */
  const char *listen_host;  /* control listener address; NULL: all interfaces */
  int port;                 /* 0: cfg->port_base + gpu, trying up to cfg->port_span ports
                               on EADDRINUSE; > 0: exactly this port; TPX_PORT_EPHEMERAL */
  int no_listen;            /* 1: connect-only endpoint (no listener, no incoming peers) */
} tpx_endpoint_params_t;

/* Defaults: cfg NULL, plugin NULL, name NULL, gpu 0, port 0, listening. */
TPX_API void tpx_endpoint_params_init(tpx_endpoint_params_t *p);

TPX_API int tpx_endpoint_create(const tpx_endpoint_params_t *p, tpx_endpoint_t **out);
/* Closes every peer (their unfinished transfers fail with TPX_ECANCELED),
 * stops the progress thread, releases the transport. NULL ok. Registrations
 * and transfer handles still alive are released too: do not use them after. */
TPX_API void tpx_endpoint_destroy(tpx_endpoint_t *ep);

/* The control port actually bound (after EADDRINUSE retries); 0 if not listening. */
TPX_API int tpx_endpoint_port(const tpx_endpoint_t *ep);
TPX_API const char *tpx_endpoint_name(const tpx_endpoint_t *ep);
/* Name of the transport in use ("tpx", "GPUDirectTCPX_v7", ...). */
TPX_API const char *tpx_endpoint_transport(const tpx_endpoint_t *ep);

/* One progress pass (non-blocking). Needed only without a progress thread;
 * harmless with one. Returns 0 or a negative code for an endpoint-level failure. */
TPX_API int tpx_progress(tpx_endpoint_t *ep);

/* Connection info: an opaque, serialisable blob (name, identity, addresses,
 * port) that a remote process passes to tpx_load_remote_conn_info. */
TPX_API int tpx_get_conn_info(tpx_endpoint_t *ep, void *buf, size_t cap, size_t *len);
/* Connect to the endpoint the blob describes (tries its addresses in order;
 * only the last one's transient errors are retried).
 * Blocks until the peer is ready or cfg->connect_timeout_ms passed. Connects
 * failing with EHOSTUNREACH, ENETUNREACH, ECONNREFUSED or ETIMEDOUT are
 * retried within that time (cfg->socket_retry_cnt); a setup failure the
 * peer decided comes back with its code and "peer NAME (ADDR) reported:
 * REASON" in tpx_last_error() (docs/RELIABILITY.md, "Connection setup"). */
TPX_API int tpx_load_remote_conn_info(tpx_endpoint_t *ep, const void *blob, size_t len,
                                      tpx_peer_t **peer);
/* Connect to host:port (numeric address or name). Blocks like the above. */
TPX_API int tpx_connect(tpx_endpoint_t *ep, const char *host, int port, tpx_peer_t **peer);
/* Next peer that connected to us, in arrival order. timeout_ms < 0: wait
 * forever; 0: poll. TPX_ETIMEDOUT when none arrived in time. */
TPX_API int tpx_accept(tpx_endpoint_t *ep, int timeout_ms, tpx_peer_t **peer);

/* Close a peer: unfinished transfers fail with TPX_ECANCELED, the control
 * connection is shut down gracefully, the transport comms closed. The handle
 * is invalid afterwards. NULL ok. */
TPX_API void tpx_peer_close(tpx_peer_t *peer);
/* 0 while usable; the error that broke it otherwise (TPX_ECLOSED after the
 * remote side closed, TPX_ETIMEDOUT, TPX_EREMOTE, ...), its reason then in
 * tpx_last_error(). */
TPX_API int tpx_peer_status(const tpx_peer_t *peer);
TPX_API const char *tpx_peer_name(const tpx_peer_t *peer); /* the remote endpoint's name */
TPX_API int tpx_peer_gpu(const tpx_peer_t *peer);          /* the remote endpoint's GPU index; TPX_EINVAL for NULL */
TPX_API int tpx_peer_num_channels(const tpx_peer_t *peer); /* channels agreed with the peer */

/* One channel of a peer, as tpx_peer_channel_stats reports it (docs/RELIABILITY.md,
 * "Links that differ or go away"). Counters are since the peer connected. */
typedef struct tpx_channel_stats {
  int up;                   /* 1 carrying data; 0 lost (its chunks go on the others; rejoining) */
  int dev;                  /* the transport device it uses */
  int adaptive;             /* 1: chunks follow the channels' speeds (both sides agreed, TPX_STRIPE) */
  uint32_t losses, rejoins; /* times it was lost / came back */
  uint32_t share;           /* slots of the 64-slot pattern our chunks follow now (fixed striping: 1 of
                               the channel count) */
  uint32_t slots;           /* the pattern's slots in all */
  uint64_t rate_kbs;        /* its measured send speed, KB/s (0: not measured yet) */
  uint64_t chunks_sent, chunks_recv; /* chunks finished on it, each direction */
  uint64_t bytes_sent, bytes_recv;
} tpx_channel_stats_t;
/* Fill *out for channel ch (0 .. tpx_peer_num_channels - 1). 0, or TPX_EINVAL. */
TPX_API int tpx_peer_channel_stats(tpx_peer_t *peer, int ch, tpx_channel_stats_t *out);
/* Find a ready peer by the remote endpoint's name; NULL if none. */
TPX_API tpx_peer_t *tpx_peer_find(tpx_endpoint_t *ep, const char *name);

/* Notifications: small messages delivered to the remote endpoint in order,
 * after every write this endpoint posted to that peer before it has landed.
 * May be empty. */
#define TPX_NOTIF_MAX 4096
typedef struct tpx_notif {
  tpx_peer_t *peer;            /* sender; valid until you tpx_peer_close it (it may be
                                  closing: tpx_peer_status says); closing it also
                                  discards its notifications not yet popped */
  char peer_name[TPX_NAME_MAX];/* sender's endpoint name */
  uint32_t len;
  unsigned char msg[TPX_NOTIF_MAX];
} tpx_notif_t;

/* Send a notification (non-blocking). */
TPX_API int tpx_notify(tpx_peer_t *peer, const void *msg, size_t len);
/* Pop the oldest delivered notification: 1 when one was copied to *out, 0 when
 * none is pending, < 0 on error. */
TPX_API int tpx_get_notif(tpx_endpoint_t *ep, tpx_notif_t *out);
/* Like tpx_get_notif but waits up to timeout_ms (< 0: forever) for one. */
TPX_API int tpx_wait_notif(tpx_endpoint_t *ep, int timeout_ms, tpx_notif_t *out);

#ifdef __cplusplus
}
#endif
#endif
