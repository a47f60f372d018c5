/* The etcd v3 JSON gateway, as the rendezvous needs it: lease grant,
 * keepalive and revoke, put and get of one key. etcd.c speaks it through
 * libcurl and jansson; etcd_none.c stands in when the build has neither.
 * Every request is bounded by its timeout_ms (whole request, every endpoint
 * tried in turn), failures are recorded quietly (the caller decides), and
 * everything etcd answers is checked before use. Thread-safe: each request
 * has its own connection. */
#ifndef TPX_RENDEZVOUS_ETCD_H
#define TPX_RENDEZVOUS_ETCD_H

#include <stddef.h>
#include <stdint.h>

typedef struct tpx__etcd tpx__etcd_t;

#define TPX__ETCD_MAX_URLS 16

/* 1 when built with libcurl and jansson. */
int tpx__etcd_supported(void);
/* `endpoints`: comma-separated URLs (http://host:port; a bare host:port gets
 * http://). TPX_EINVAL for a malformed list, TPX_ENOTSUP without support. */
int tpx__etcd_open(const char *endpoints, tpx__etcd_t **out);
void tpx__etcd_close(tpx__etcd_t *e);

/* Requests. TPX_EREMOTE: no endpoint answered (or one answered with an
 * error) within timeout_ms; TPX_EPROTO: an answer we could not use. */
int tpx__etcd_grant(tpx__etcd_t *e, int ttl_s, int timeout_ms, int64_t *lease);
/* *ttl: the lease's remaining seconds; 0 when etcd no longer knows it. */
int tpx__etcd_keepalive(tpx__etcd_t *e, int64_t lease, int timeout_ms, int64_t *ttl);
int tpx__etcd_revoke(tpx__etcd_t *e, int64_t lease, int timeout_ms);
int tpx__etcd_put(tpx__etcd_t *e, const char *key, const void *val, size_t len, int64_t lease, int timeout_ms);
/* TPX_ENOENT when the key is absent; TPX_ETRUNC (with *len) when the value
 * is larger than cap. */
int tpx__etcd_get(tpx__etcd_t *e, const char *key, void *buf, size_t cap, size_t *len, int timeout_ms);

#endif
