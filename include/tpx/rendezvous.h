/* Rendezvous through etcd: endpoints of one job find each other by name.
 *
 * A process opens a rendezvous (tpx_rdv_open: TPX_ETCD_ENDPOINTS, the job
 * TPX_ETCD_JOB), publishes its endpoint's connection info and its memory
 * descriptors under names, and looks its peers' up by name, waiting up to a
 * timeout for them to appear. Keys (docs/RENDEZVOUS.md):
 *
 *   tpx/<job>/<name>/conn         tpx_get_conn_info blob
 *   tpx/<job>/<name>/md.<mem>     tpx_mem_get_public_data blob
 *   tpx/<job>/<name>/<item>       tpx_rdv_put (the application's own)
 *
 * Everything a process publishes hangs on one etcd lease (TPX_ETCD_TTL_S),
 * kept alive by a background thread while the rendezvous is open: the keys
 * go at tpx_rdv_close, or at most the TTL after the process died.
 *
 * etcd is reached through its v3 JSON gateway (libcurl, jansson). A libtpx
 * built without them returns TPX_ENOTSUP from tpx_rdv_open, saying why.
 * Names (job, endpoint, memory, item): 1..63 characters of [A-Za-z0-9._-].
 * Every call returns 0 or a negative code (tpx/error.h); tpx_last_error()
 * has the detail. All calls are thread-safe. */
#ifndef TPX_RENDEZVOUS_H
#define TPX_RENDEZVOUS_H

#include <stddef.h>

#include "tpx/config.h"
#include "tpx/endpoint.h"
#include "tpx/export.h"
#include "tpx/mem.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpx_rdv tpx_rdv_t;

#define TPX_RDV_VALUE_MAX 65536 /* largest value tpx_rdv_put stores */

/* 1 when this libtpx was built with etcd support (libcurl and jansson). */
TPX_API int tpx_rdv_supported(void);

/* Open a rendezvous with cfg's etcd settings (NULL: tpx_config_global()).
 * Talks to nobody yet: the lease is granted at the first publish.
 * TPX_ENOTSUP without etcd support; TPX_EINVAL when cfg->etcd_endpoints is
 * empty or malformed, or the job is not a name. */
TPX_API int tpx_rdv_open(const tpx_config_t *cfg, tpx_rdv_t **out);
/* Stop the keepalive and revoke the lease: this process's keys go at once
 * (bounded by the timeout; if etcd is away they go when the lease expires).
 * Peers already connected are not affected. NULL ok. */
TPX_API void tpx_rdv_close(tpx_rdv_t *r);
/* The job this rendezvous names its keys under. */
TPX_API const char *tpx_rdv_job(const tpx_rdv_t *r);

/* Publish ep's connection info as `name` (tpx/<job>/<name>/conn). */
TPX_API int tpx_rdv_publish(tpx_rdv_t *r, tpx_endpoint_t *ep, const char *name);
/* Publish a registration's descriptor as `mem` of `name`
 * (tpx/<job>/<name>/md.<mem>). */
TPX_API int tpx_rdv_publish_mem(tpx_rdv_t *r, const char *name, const char *mem, const tpx_mem_t *m);
/* Any other value (at most TPX_RDV_VALUE_MAX bytes) as `item` of `name`,
 * on the same lease. Publishing a key again replaces its value. */
TPX_API int tpx_rdv_put(tpx_rdv_t *r, const char *name, const char *item, const void *val, size_t len);

/* Look up `item` of `name`, waiting until it is published or timeout_ms
 * passed (< 0: cfg->etcd_timeout_ms; 0: one look). *len gets its size;
 * TPX_ETRUNC when it is larger than cap. After the timeout: TPX_ETIMEDOUT
 * when etcd answered but the key never appeared, TPX_EREMOTE when etcd
 * could not be reached or refused (the detail names the URL and why). */
TPX_API int tpx_rdv_get(tpx_rdv_t *r, const char *name, const char *item, void *buf, size_t cap, size_t *len,
                        int timeout_ms);
/* Look up `name`'s connection info (as tpx_rdv_get) and connect to it
 * (tpx_load_remote_conn_info: cfg.connect_timeout_ms on top). */
TPX_API int tpx_rdv_connect(tpx_rdv_t *r, tpx_endpoint_t *ep, const char *name, int timeout_ms, tpx_peer_t **peer);
/* Look up `mem` of `name` (as tpx_rdv_get) and load it (tpx_load_remote_md). */
TPX_API int tpx_rdv_load_mem(tpx_rdv_t *r, const char *name, const char *mem, int timeout_ms, tpx_rmem_t **out);

#ifdef __cplusplus
}
#endif
#endif
