/* Rendezvous (tpx/rendezvous.h): the job's names and keys, the lease with
 * its keepalive thread, and lookups that wait for a peer to publish. Above
 * the engine: it uses the public calls only (conn info, descriptors), and
 * etcd.h for the store. */
#include "tpx/rendezvous.h"

#include <errno.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "rendezvous/etcd.h"

#define KEY_MAX 256
#define ITEM_MAX (TPX_NAME_MAX + 4) /* "md." + a name */
#define NAP_MIN_MS 20
#define NAP_MAX_MS 500
#define REQ_MIN_MS 100

struct kv {
  char key[KEY_MAX];
  void *val;
  size_t len;
};

struct tpx_rdv {
  tpx__etcd_t *etcd;
  char job[TPX_NAME_MAX];
  int timeout_ms, ttl_s;
  /* mu serialises publishing and the keepalive (both bounded requests) and
   * guards everything below. */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop, thread_on, failing;
  pthread_t th;
  int64_t lease; /* 0: nothing published yet */
  struct kv *kvs; /* what we published: put again under a new lease */
  size_t nkv;
};

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

int tpx_rdv_supported(void) { return tpx__etcd_supported(); }

int tpx_rdv_open(const tpx_config_t *cfg, tpx_rdv_t **out) {
  if (!out) return tpx_err(TPX_EINVAL, "tpx_rdv_open: NULL out");
  *out = NULL;
  if (!cfg) cfg = tpx_config_global();
  if (!tpx__etcd_supported()) {
    tpx__etcd_t *none;
    return tpx_err_surface(tpx__etcd_open("", &none));
  }
  if (!cfg->etcd_endpoints[0])
    return tpx_err(TPX_EINVAL, "rendezvous: no etcd (set TPX_ETCD_ENDPOINTS, e.g. http://10.0.0.1:2379)");
  const char *job = cfg->etcd_job[0] ? cfg->etcd_job : "default";
  if (!tpx__config_name_ok(job, TPX_NAME_MAX))
    return tpx_err(TPX_EINVAL, "rendezvous: job '%s' is not 1..63 characters of [A-Za-z0-9._-]", job);
  if (cfg->etcd_timeout_ms < 1 || cfg->etcd_ttl_s < 2 || cfg->etcd_ttl_s > 3600)
    return tpx_err(TPX_EINVAL, "rendezvous: TPX_ETCD_TIMEOUT_MS %d or TPX_ETCD_TTL_S %d out of range (docs/CONFIG.md)",
                   cfg->etcd_timeout_ms, cfg->etcd_ttl_s);
  tpx_rdv_t *r = calloc(1, sizeof(*r));
  if (!r) return tpx_err(TPX_ENOMEM, "rendezvous: out of memory");
  int rc = tpx__etcd_open(cfg->etcd_endpoints, &r->etcd);
  if (rc) {
    free(r);
    return tpx_err_surface(rc);
  }
  snprintf(r->job, sizeof(r->job), "%s", job);
  r->timeout_ms = cfg->etcd_timeout_ms;
  r->ttl_s = cfg->etcd_ttl_s;
  pthread_mutex_init(&r->mu, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_condattr_setclock(&ca, CLOCK_MONOTONIC);
  pthread_cond_init(&r->cv, &ca);
  pthread_condattr_destroy(&ca);
  *out = r;
  return 0;
}

const char *tpx_rdv_job(const tpx_rdv_t *r) { return r ? r->job : ""; }

/* Milliseconds left until `deadline` (at least 1: a request still gets asked). */
static int left_ms(int64_t deadline) {
  int64_t left = deadline - now_ms();
  return left < 1 ? 1 : left > INT32_MAX ? INT32_MAX : (int)left;
}

/* Put every key we published under the current lease (after a new grant),
 * all of it by the deadline. */
static int republish(tpx_rdv_t *r, int64_t deadline) {
  for (size_t i = 0; i < r->nkv; i++) {
    int rc = tpx__etcd_put(r->etcd, r->kvs[i].key, r->kvs[i].val, r->kvs[i].len, r->lease, left_ms(deadline));
    if (rc) return rc;
  }
  return 0;
}

/* etcd no longer knows our lease (it expired while etcd was away, it was
 * revoked, or etcd lost its data): a new one, and everything put again. */
static int replace_lease(tpx_rdv_t *r, int64_t deadline) {
  TPX_WARN("rendezvous: etcd lost lease %" PRIx64 " of job '%s'; publishing %zu key(s) again under a new one",
           (uint64_t)r->lease, r->job, r->nkv);
  int64_t lease;
  int rc = tpx__etcd_grant(r->etcd, r->ttl_s, left_ms(deadline), &lease);
  if (rc == 0) {
    r->lease = lease;
    rc = republish(r, deadline);
  }
  return rc;
}

/* One keepalive round; a failure is logged once per round (the detail names
 * etcd's URL and why). A lease etcd no longer knows (it expired while etcd
 * was away, or etcd lost its data) is replaced and everything put again. */
static void keepalive_round(tpx_rdv_t *r, int req_ms) {
  int64_t ttl = 0, deadline = now_ms() + req_ms;
  int rc = tpx__etcd_keepalive(r->etcd, r->lease, req_ms, &ttl);
  if (rc == 0 && ttl <= 0) rc = replace_lease(r, deadline);
  if (rc) {
    TPX_WARN("rendezvous: keepalive of job '%s' failed: %s; this process's keys expire within %d s unless etcd "
             "answers again (connected peers are not affected)",
             r->job, tpx_last_error(), r->ttl_s);
    r->failing = 1;
  } else if (r->failing) {
    TPX_WARN("rendezvous: etcd answers the keepalive of job '%s' again", r->job);
    r->failing = 0;
  }
}

/* Refreshes the lease every TTL/3 until tpx_rdv_close; each request is
 * bounded by that interval, so close waits at most one. */
static void *keepalive_main(void *arg) {
  tpx_rdv_t *r = arg;
  int interval = r->ttl_s * 1000 / 3;
  int req_ms = interval < r->timeout_ms ? interval : r->timeout_ms;
  pthread_mutex_lock(&r->mu);
  while (!r->stop) {
    int64_t due = now_ms() + interval;
    while (!r->stop && now_ms() < due) {
      struct timespec ts;
      clock_gettime(CLOCK_MONOTONIC, &ts);
      int64_t ns = (int64_t)ts.tv_nsec + (due - now_ms()) * 1000000;
      ts.tv_sec += ns / 1000000000;
      ts.tv_nsec = ns % 1000000000;
      pthread_cond_timedwait(&r->cv, &r->mu, &ts);
    }
    if (!r->stop) keepalive_round(r, req_ms);
  }
  pthread_mutex_unlock(&r->mu);
  return NULL;
}

static int make_key(const tpx_rdv_t *r, const char *name, const char *item, char *key) {
  if (!name || !tpx__config_name_ok(name, TPX_NAME_MAX))
    return tpx_err(TPX_EINVAL, "rendezvous: name '%s' is not 1..63 characters of [A-Za-z0-9._-]", name ? name : "(null)");
  snprintf(key, KEY_MAX, "tpx/%s/%s/%s", r->job, name, item);
  return 0;
}

static int remember(tpx_rdv_t *r, const char *key, const void *val, size_t len) {
  size_t i = 0;
  while (i < r->nkv && strcmp(r->kvs[i].key, key) != 0) i++;
  if (i == r->nkv) {
    struct kv *n = realloc(r->kvs, (r->nkv + 1) * sizeof(*n));
    if (!n) return TPX_ENOMEM;
    r->kvs = n;
    memset(&n[i], 0, sizeof(n[i]));
    snprintf(n[i].key, KEY_MAX, "%s", key);
    r->nkv++;
  }
  void *copy = malloc(len ? len : 1);
  if (!copy) return TPX_ENOMEM;
  memcpy(copy, val, len);
  free(r->kvs[i].val);
  r->kvs[i].val = copy;
  r->kvs[i].len = len;
  return 0;
}

/* The first put grants the lease and starts the keepalive. All of it within
 * the timeout (after waiting for a keepalive round in progress). */
static int put_key(tpx_rdv_t *r, const char *key, const void *val, size_t len) {
  pthread_mutex_lock(&r->mu);
  int64_t deadline = now_ms() + r->timeout_ms;
  int rc = 0;
  if (r->lease == 0) rc = tpx__etcd_grant(r->etcd, r->ttl_s, left_ms(deadline), &r->lease);
  if (rc == 0 && !r->thread_on) {
    if (pthread_create(&r->th, NULL, keepalive_main, r) != 0)
      rc = tpx_err_quiet(TPX_ESYSTEM, "rendezvous: cannot start the keepalive thread");
    else r->thread_on = 1;
  }
  if (rc == 0) rc = tpx__etcd_put(r->etcd, key, val, len, r->lease, left_ms(deadline));
  if (rc == TPX_EREMOTE && strstr(tpx_last_error(), "lease not found")) { /* lost between keepalives */
    rc = replace_lease(r, deadline);
    if (rc == 0) rc = tpx__etcd_put(r->etcd, key, val, len, r->lease, left_ms(deadline));
  }
  if (rc == 0 && remember(r, key, val, len) != 0) rc = tpx_err_quiet(TPX_ENOMEM, "rendezvous: out of memory");
  pthread_mutex_unlock(&r->mu);
  if (rc) {
    char detail[400];
    snprintf(detail, sizeof(detail), "%s", tpx_last_error());
    return tpx_err(rc, "rendezvous: publishing %s: %s", key, detail);
  }
  TPX_INFO("rendezvous: published %s (%zu bytes)", key, len);
  return 0;
}

int tpx_rdv_put(tpx_rdv_t *r, const char *name, const char *item, const void *val, size_t len) {
  char key[KEY_MAX];
  if (!r || (!val && len) || len > TPX_RDV_VALUE_MAX)
    return tpx_err(TPX_EINVAL, "tpx_rdv_put: NULL handle or value, or more than %d bytes", TPX_RDV_VALUE_MAX);
  if (!item || !tpx__config_name_ok(item, TPX_NAME_MAX))
    return tpx_err(TPX_EINVAL, "rendezvous: item '%s' is not 1..63 characters of [A-Za-z0-9._-]", item ? item : "(null)");
  int rc = make_key(r, name, item, key);
  return rc ? rc : put_key(r, key, val ? val : "", len);
}

int tpx_rdv_publish(tpx_rdv_t *r, tpx_endpoint_t *ep, const char *name) {
  uint8_t blob[TPX_CONN_INFO_MAX];
  size_t len = 0;
  char key[KEY_MAX];
  if (!r || !ep) return tpx_err(TPX_EINVAL, "tpx_rdv_publish: NULL argument");
  int rc = make_key(r, name, "conn", key);
  if (rc == 0) rc = tpx_get_conn_info(ep, blob, sizeof(blob), &len);
  return rc ? rc : put_key(r, key, blob, len);
}

int tpx_rdv_publish_mem(tpx_rdv_t *r, const char *name, const char *mem, const tpx_mem_t *m) {
  uint8_t blob[TPX_MD_MAX];
  size_t len = 0;
  char key[KEY_MAX], item[ITEM_MAX];
  if (!r || !m) return tpx_err(TPX_EINVAL, "tpx_rdv_publish_mem: NULL argument");
  if (!mem || !tpx__config_name_ok(mem, TPX_NAME_MAX))
    return tpx_err(TPX_EINVAL, "rendezvous: memory name '%s' is not 1..63 characters of [A-Za-z0-9._-]",
                   mem ? mem : "(null)");
  snprintf(item, sizeof(item), "md.%s", mem);
  int rc = make_key(r, name, item, key);
  if (rc == 0) rc = tpx_mem_get_public_data(m, blob, sizeof(blob), &len);
  return rc ? rc : put_key(r, key, blob, len);
}

/* Waits for `key` until the deadline: absent keys and an unreachable etcd
 * are both retried (a peer may publish late; etcd may be restarting), with
 * naps growing to NAP_MAX_MS; what ended the wait decides the code. */
static int lookup(tpx_rdv_t *r, const char *key, void *buf, size_t cap, size_t *len, int timeout_ms) {
  if (timeout_ms < 0) timeout_ms = r->timeout_ms;
  int64_t t0 = now_ms(), deadline = t0 + timeout_ms;
  int nap = NAP_MIN_MS, rc;
  for (;;) {
    /* each request gets what is left, at least REQ_MIN_MS: a last look at
     * the deadline must not fail for want of time and read as "etcd away" */
    int64_t left = deadline - now_ms();
    rc = tpx__etcd_get(r->etcd, key, buf, cap, len, timeout_ms == 0 ? r->timeout_ms : left > REQ_MIN_MS ? (int)left : REQ_MIN_MS);
    if ((rc != TPX_ENOENT && rc != TPX_EREMOTE) || timeout_ms == 0) break;
    left = deadline - now_ms();
    if (left <= 0) break;
    nap_ms(nap < left ? nap : (int)left);
    nap = nap * 2 > NAP_MAX_MS ? NAP_MAX_MS : nap * 2;
  }
  if (rc == 0) return 0;
  char detail[400];
  snprintf(detail, sizeof(detail), "%s", tpx_last_error());
  int waited = (int)(now_ms() - t0);
  if (rc == TPX_ENOENT && timeout_ms == 0) return tpx_err(TPX_ENOENT, "rendezvous: %s is not published", key);
  if (rc == TPX_ENOENT)
    return tpx_err(TPX_ETIMEDOUT, "rendezvous: %s was not published within %d ms (job '%s')", key, waited, r->job);
  if (rc == TPX_EREMOTE)
    return tpx_err(TPX_EREMOTE, "rendezvous: etcd did not answer the lookup of %s for %d ms: %s", key, waited, detail);
  return tpx_err(rc, "rendezvous: lookup of %s: %s", key, detail);
}

int tpx_rdv_get(tpx_rdv_t *r, const char *name, const char *item, void *buf, size_t cap, size_t *len, int timeout_ms) {
  char key[KEY_MAX];
  if (!r || !len || (!buf && cap)) return tpx_err(TPX_EINVAL, "tpx_rdv_get: NULL argument");
  if (!item || !tpx__config_name_ok(item, ITEM_MAX))
    return tpx_err(TPX_EINVAL, "rendezvous: item '%s' is not a name of [A-Za-z0-9._-]", item ? item : "(null)");
  int rc = make_key(r, name, item, key);
  return rc ? rc : lookup(r, key, buf, cap, len, timeout_ms);
}

int tpx_rdv_connect(tpx_rdv_t *r, tpx_endpoint_t *ep, const char *name, int timeout_ms, tpx_peer_t **peer) {
  uint8_t blob[TPX_CONN_INFO_MAX];
  size_t len = 0;
  if (!ep || !peer) return tpx_err(TPX_EINVAL, "tpx_rdv_connect: NULL argument");
  int rc = tpx_rdv_get(r, name, "conn", blob, sizeof(blob), &len, timeout_ms);
  return rc ? rc : tpx_load_remote_conn_info(ep, blob, len, peer);
}

int tpx_rdv_load_mem(tpx_rdv_t *r, const char *name, const char *mem, int timeout_ms, tpx_rmem_t **out) {
  uint8_t blob[TPX_MD_MAX];
  char item[ITEM_MAX];
  size_t len = 0;
  if (!out || !mem || !tpx__config_name_ok(mem, TPX_NAME_MAX))
    return tpx_err(TPX_EINVAL, "tpx_rdv_load_mem: NULL out, or memory name '%s' not 1..63 characters of [A-Za-z0-9._-]",
                   mem ? mem : "(null)");
  snprintf(item, sizeof(item), "md.%s", mem);
  int rc = tpx_rdv_get(r, name, item, blob, sizeof(blob), &len, timeout_ms);
  return rc ? rc : tpx_load_remote_md(blob, len, out);
}

void tpx_rdv_close(tpx_rdv_t *r) {
  if (!r) return;
  pthread_mutex_lock(&r->mu);
  r->stop = 1;
  pthread_cond_broadcast(&r->cv);
  pthread_mutex_unlock(&r->mu);
  if (r->thread_on) pthread_join(r->th, NULL);
  if (r->lease != 0 && tpx__etcd_revoke(r->etcd, r->lease, r->timeout_ms) != 0)
    TPX_WARN("rendezvous: revoking the lease of job '%s' failed (%s); its keys expire within %d s", r->job,
             tpx_last_error(), r->ttl_s);
  for (size_t i = 0; i < r->nkv; i++) free(r->kvs[i].val);
  free(r->kvs);
  tpx__etcd_close(r->etcd);
  pthread_cond_destroy(&r->cv);
  pthread_mutex_destroy(&r->mu);
  free(r);
}
