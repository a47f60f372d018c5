/* Stands in for etcd.c when libcurl or jansson was missing at build time
 * (CMake option TPX_ETCD): every entry says why, with TPX_ENOTSUP. */
#include "common/error.h"
#include "rendezvous/etcd.h"

#define WHY                                                                                                     \
  "rendezvous: this libtpx was built without etcd support (CMake TPX_ETCD=OFF, or libcurl/jansson missing; "              \
  "scripts/deps.sh installs libcurl4-openssl-dev and libjansson-dev, then rebuild)"

int tpx__etcd_supported(void) { return 0; }

int tpx__etcd_open(const char *endpoints, tpx__etcd_t **out) {
  (void)endpoints;
  *out = NULL;
  return tpx_err_quiet(TPX_ENOTSUP, WHY);
}

void tpx__etcd_close(tpx__etcd_t *e) { (void)e; }

int tpx__etcd_grant(tpx__etcd_t *e, int ttl_s, int timeout_ms, int64_t *lease) {
  (void)e, (void)ttl_s, (void)timeout_ms, (void)lease;
  return tpx_err_quiet(TPX_ENOTSUP, WHY);
}

int tpx__etcd_keepalive(tpx__etcd_t *e, int64_t lease, int timeout_ms, int64_t *ttl) {
  (void)e, (void)lease, (void)timeout_ms, (void)ttl;
  return tpx_err_quiet(TPX_ENOTSUP, WHY);
}

int tpx__etcd_revoke(tpx__etcd_t *e, int64_t lease, int timeout_ms) {
  (void)e, (void)lease, (void)timeout_ms;
  return tpx_err_quiet(TPX_ENOTSUP, WHY);
}

int tpx__etcd_put(tpx__etcd_t *e, const char *key, const void *val, size_t len, int64_t lease, int timeout_ms) {
  (void)e, (void)key, (void)val, (void)len, (void)lease, (void)timeout_ms;
  return tpx_err_quiet(TPX_ENOTSUP, WHY);
}

int tpx__etcd_get(tpx__etcd_t *e, const char *key, void *buf, size_t cap, size_t *len, int timeout_ms) {
  (void)e, (void)key, (void)buf, (void)cap, (void)len, (void)timeout_ms;
  return tpx_err_quiet(TPX_ENOTSUP, WHY);
}
