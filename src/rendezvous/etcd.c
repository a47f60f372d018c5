/* etcd's v3 JSON gateway (POST /v3/..., keys and values base64, 64-bit
 * integers as JSON strings) through libcurl and jansson. One easy handle per
 * request: a rendezvous makes few requests, and no handle is shared between
 * the keepalive thread and the callers. Proxies are never used (etcd is on
 * the job's own network; a proxy variable must not divert it). */
#include "rendezvous/etcd.h"

#include <curl/curl.h>
#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "rendezvous/base64.h"

#define RESP_MAX (1u << 20) /* the largest answer we read (values are <= 64 KiB) */
#define URL_MAX 256

struct tpx__etcd {
  int nurls;
  char urls[TPX__ETCD_MAX_URLS][URL_MAX];
  atomic_int good; /* the URL that answered last: tried first */
};

int tpx__etcd_supported(void) { return 1; }

static pthread_once_t curl_once = PTHREAD_ONCE_INIT;
static CURLcode curl_init_rc;
static void curl_init(void) { curl_init_rc = curl_global_init(CURL_GLOBAL_DEFAULT); }

static int add_url(tpx__etcd_t *e, const char *s, size_t n) {
  while (n && (*s == ' ' || *s == '\t')) s++, n--;
  while (n && (s[n - 1] == ' ' || s[n - 1] == '\t' || s[n - 1] == '/')) n--;
  int scheme = (n > 7 && !strncmp(s, "http://", 7)) || (n > 8 && !strncmp(s, "https://", 8));
  if (n == 0) return TPX_EINVAL;
  for (size_t i = 0; !scheme && i + 3 <= n; i++)
    if (!strncmp(s + i, "://", 3)) return TPX_EINVAL; /* a scheme other than http(s) */
  if (e->nurls == TPX__ETCD_MAX_URLS || n + 8 >= URL_MAX) return TPX_EINVAL;
  for (size_t i = 0; i < n; i++)
    if ((unsigned char)s[i] <= ' ' || s[i] == '?' || s[i] == '#' || s[i] == '@') return TPX_EINVAL;
  snprintf(e->urls[e->nurls++], URL_MAX, "%s%.*s", scheme ? "" : "http://", (int)n, s);
  return 0;
}

int tpx__etcd_open(const char *endpoints, tpx__etcd_t **out) {
  pthread_once(&curl_once, curl_init);
  if (curl_init_rc != CURLE_OK)
    return tpx_err_quiet(TPX_ESYSTEM, "etcd: curl_global_init: %s", curl_easy_strerror(curl_init_rc));
  tpx__etcd_t *e = calloc(1, sizeof(*e));
  if (!e) return TPX_ENOMEM;
  for (const char *p = endpoints;;) {
    const char *c = strchr(p, ',');
    size_t n = c ? (size_t)(c - p) : strlen(p);
    if (add_url(e, p, n) != 0) {
      free(e);
      return tpx_err_quiet(TPX_EINVAL,
                           "etcd: TPX_ETCD_ENDPOINTS '%s': '%.*s' is not an http(s)://host:port URL (at most %d)",
                           endpoints, (int)n, p, TPX__ETCD_MAX_URLS);
    }
    if (!c) break;
    p = c + 1;
  }
  *out = e;
  return 0;
}

void tpx__etcd_close(tpx__etcd_t *e) { free(e); }

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

struct resp {
  char *buf;
  size_t len;
  int over;
};

static size_t on_data(char *p, size_t sz, size_t n, void *arg) {
  struct resp *r = arg;
  size_t k = sz * n;
  if (r->len + k > RESP_MAX) {
    r->over = 1;
    return 0; /* aborts the transfer */
  }
  char *nb = realloc(r->buf, r->len + k + 1);
  if (!nb) return 0;
  memcpy(nb + r->len, p, k);
  r->buf = nb;
  r->len += k;
  return k;
}

/* One POST to one URL. 0 and the parsed answer; else the code, and `why`. */
static int post_one(const char *url, const char *body, long timeout_ms, json_t **ans, char *why, size_t wn) {
  CURL *c = curl_easy_init();
  if (!c) return snprintf(why, wn, "%s: curl_easy_init failed", url), TPX_ENOMEM;
  struct resp r = {0};
  struct curl_slist *h = curl_slist_append(NULL, "Content-Type: application/json");
  char err[CURL_ERROR_SIZE] = "";
  curl_easy_setopt(c, CURLOPT_URL, url);
  curl_easy_setopt(c, CURLOPT_POSTFIELDS, body);
  curl_easy_setopt(c, CURLOPT_HTTPHEADER, h);
  curl_easy_setopt(c, CURLOPT_TIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_CONNECTTIMEOUT_MS, timeout_ms);
  curl_easy_setopt(c, CURLOPT_NOSIGNAL, 1L);
  curl_easy_setopt(c, CURLOPT_PROXY, "");
  curl_easy_setopt(c, CURLOPT_FOLLOWLOCATION, 0L);
  curl_easy_setopt(c, CURLOPT_PROTOCOLS_STR, "http,https");
  curl_easy_setopt(c, CURLOPT_WRITEFUNCTION, on_data);
  curl_easy_setopt(c, CURLOPT_WRITEDATA, &r);
  curl_easy_setopt(c, CURLOPT_ERRORBUFFER, err);
  CURLcode cc = curl_easy_perform(c);
  long status = 0;
  curl_easy_getinfo(c, CURLINFO_RESPONSE_CODE, &status);
  curl_slist_free_all(h);
  curl_easy_cleanup(c);
  int rc = 0;
  json_error_t je;
  if (cc != CURLE_OK) {
    snprintf(why, wn, "%s: %s", url, r.over ? "answer over 1 MiB" : err[0] ? err : curl_easy_strerror(cc));
    rc = TPX_EREMOTE;
  } else if (!(*ans = json_loadb(r.buf ? r.buf : "", r.len, JSON_REJECT_DUPLICATES, &je))) {
    snprintf(why, wn, "%s: HTTP %ld, not JSON (%s)", url, status, je.text);
    rc = status == 200 ? TPX_EPROTO : TPX_EREMOTE;
  } else if (status != 200 || json_object_get(*ans, "error")) {
    const char *m = json_string_value(json_object_get(*ans, "message"));
    snprintf(why, wn, "%s: HTTP %ld: %.200s", url, status, m ? m : "(no message)");
    json_decref(*ans);
    *ans = NULL;
    rc = TPX_EREMOTE;
  }
  free(r.buf);
  return rc;
}

/* POST `body` to `path` of the first URL that answers within the deadline,
 * starting with the one that answered last. Consumes body. */
static int post(tpx__etcd_t *e, const char *path, json_t *body, int timeout_ms, json_t **ans) {
  char *text = body ? json_dumps(body, JSON_COMPACT) : NULL;
  json_decref(body);
  if (!text) return tpx_err_quiet(TPX_ENOMEM, "etcd: cannot encode a request");
  int64_t deadline = now_ms() + (timeout_ms > 0 ? timeout_ms : 1);
  int rc = TPX_EREMOTE, first = atomic_load(&e->good);
  char why[640] = "no endpoint";
  for (int k = 0; k < e->nurls; k++) {
    int i = (first + k) % e->nurls;
    int64_t left = deadline - now_ms();
    if (left <= 0) break;
    char url[URL_MAX + 32];
    snprintf(url, sizeof(url), "%s%s", e->urls[i], path);
    rc = post_one(url, text, (long)left, ans, why, sizeof(why));
    if (rc != TPX_EREMOTE) {
      atomic_store(&e->good, i);
      break;
    }
  }
  free(text);
  if (rc) return tpx_err_quiet(rc, "etcd: %s", why);
  return 0;
}

/* An int64 as the gateway writes it: a decimal string (or, leniently, a number). */
static int get_i64(json_t *o, const char *k, int64_t *v) {
  json_t *x = json_object_get(o, k);
  if (json_is_integer(x)) return *v = json_integer_value(x), 0;
  const char *s = json_string_value(x);
  if (!s) return TPX_EPROTO;
  char *end;
  errno = 0;
  long long n = strtoll(s, &end, 10);
  if (errno || end == s || *end) return TPX_EPROTO;
  *v = n;
  return 0;
}

static json_t *b64_string(const void *p, size_t n) {
  char *s = malloc(tpx__b64_encoded_size(n));
  if (!s) return NULL;
  tpx__b64_encode(p, n, s);
  json_t *j = json_string(s);
  free(s);
  return j;
}

static json_t *i64_string(int64_t v) {
  char s[32];
  snprintf(s, sizeof(s), "%" PRId64, v);
  return json_string(s);
}

int tpx__etcd_grant(tpx__etcd_t *e, int ttl_s, int timeout_ms, int64_t *lease) {
  json_t *ans = NULL;
  int rc = post(e, "/v3/lease/grant", json_pack("{s:I}", "TTL", (json_int_t)ttl_s), timeout_ms, &ans);
  if (rc) return rc;
  int64_t id = 0;
  if (get_i64(ans, "ID", &id) != 0 || id == 0) rc = tpx_err_quiet(TPX_EPROTO, "etcd: lease grant: no lease ID in the answer");
  *lease = id;
  json_decref(ans);
  return rc;
}

int tpx__etcd_keepalive(tpx__etcd_t *e, int64_t lease, int timeout_ms, int64_t *ttl) {
  json_t *ans = NULL;
  int rc = post(e, "/v3/lease/keepalive", json_pack("{s:o}", "ID", i64_string(lease)), timeout_ms, &ans);
  if (rc) return rc;
  json_t *res = json_object_get(ans, "result");
  *ttl = 0;
  if (!json_is_object(res)) rc = tpx_err_quiet(TPX_EPROTO, "etcd: keepalive: no result in the answer");
  else if (json_object_get(res, "TTL") && get_i64(res, "TTL", ttl) != 0) /* absent: the lease is gone */
    rc = tpx_err_quiet(TPX_EPROTO, "etcd: keepalive: malformed TTL");
  json_decref(ans);
  return rc;
}

int tpx__etcd_revoke(tpx__etcd_t *e, int64_t lease, int timeout_ms) {
  json_t *ans = NULL;
  int rc = post(e, "/v3/lease/revoke", json_pack("{s:o}", "ID", i64_string(lease)), timeout_ms, &ans);
  json_decref(ans);
  return rc;
}

int tpx__etcd_put(tpx__etcd_t *e, const char *key, const void *val, size_t len, int64_t lease, int timeout_ms) {
  json_t *ans = NULL;
  json_t *body = json_pack("{s:o, s:o, s:o}", "key", b64_string(key, strlen(key)), "value", b64_string(val, len),
                           "lease", i64_string(lease));
  int rc = post(e, "/v3/kv/put", body, timeout_ms, &ans);
  json_decref(ans);
  return rc;
}

int tpx__etcd_get(tpx__etcd_t *e, const char *key, void *buf, size_t cap, size_t *len, int timeout_ms) {
  json_t *ans = NULL;
  int rc = post(e, "/v3/kv/range", json_pack("{s:o}", "key", b64_string(key, strlen(key))), timeout_ms, &ans);
  if (rc) return rc;
  json_t *kvs = json_object_get(ans, "kvs");
  json_t *kv = json_array_get(kvs, 0);
  const char *v = json_string_value(json_object_get(kv, "value"));
  if (!kvs || (json_is_array(kvs) && json_array_size(kvs) == 0)) {
    rc = tpx_err_quiet(TPX_ENOENT, "etcd: %s: absent", key);
  } else if (!json_is_array(kvs) || json_array_size(kvs) != 1 || !json_is_object(kv)) {
    rc = tpx_err_quiet(TPX_EPROTO, "etcd: %s: the answer is not one key", key);
  } else if (!v) { /* an empty value is left out */
    *len = 0;
  } else {
    size_t n = strlen(v), dec = n / 4 * 3;
    if (dec > cap) {
      /* the exact size, for the caller's bigger buffer */
      uint8_t *tmp = malloc(dec ? dec : 1);
      size_t got = 0;
      int ok = tmp && tpx__b64_decode(v, n, tmp, dec, &got) == 0;
      free(tmp);
      *len = got;
      rc = !ok ? tpx_err_quiet(TPX_EPROTO, "etcd: %s: value is not base64", key)
               : got > cap ? tpx_err_quiet(TPX_ETRUNC, "etcd: %s: value of %zu bytes, buffer %zu", key, got, cap) : 0;
      if (rc == 0 && tpx__b64_decode(v, n, buf, cap, len) != 0) rc = TPX_EPROTO;
    } else if (tpx__b64_decode(v, n, buf, cap, len) != 0) {
      rc = tpx_err_quiet(TPX_EPROTO, "etcd: %s: value is not base64", key);
    }
  }
  json_decref(ans);
  return rc;
}
