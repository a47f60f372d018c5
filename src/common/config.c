/* The one place that reads the environment. Each variable is a row of
 * `vars` below; docs/CONFIG.md documents the same table. */
#include "tpx/config.h"

#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "common/config.h"
#include "common/error.h"
#include "common/gpumap.h"
#include "common/hmac.h"
#include "common/keyfile.h"
#include "common/log.h"
#include "common/timeline.h"
#include "common/util.h"
#include "tpx/error.h"

enum var_kind { V_INT, V_SIZE, V_STR, V_LOG, V_MAP, V_NAME, V_KEY, V_KEYFILE };
/* Who needs a setting (docs/CONFIG.md has one section per tier, in this
 * order; tests/abi/check_config_doc.py holds the two together): everyday
 * (every deployment may set it), tuning (performance, with measured
 * defaults), limits (bounds against hostile peers), testing (emulation,
 * diagnostics and the baselines of comparisons). T_NONE: a row without a
 * tier, which the check refuses. */
enum var_tier { T_NONE, T_EVERYDAY, T_TUNING, T_LIMITS, T_TESTING, T_COUNT };

struct var {
  const char *name;
  const char *synonym; /* NCCL/UCCL name with the same meaning, or NULL */
  enum var_kind kind;
  size_t off;
  size_t cap; /* V_STR: buffer size */
  long long lo, hi; /* V_INT/V_SIZE bounds, inclusive */
  enum var_tier tier;
};

#define F(field) offsetof(tpx_config_t, field), sizeof(((tpx_config_t *)0)->field)

static const struct var vars[] = {
    {"TPX_LOG", NULL, V_LOG, F(log_level), 0, 0, T_EVERYDAY},
    {"TPX_NET_PLUGIN", NULL, V_STR, F(net_plugin), 0, 0, T_EVERYDAY},
    {"TPX_SOCKET_IFNAME", "NCCL_SOCKET_IFNAME", V_STR, F(socket_ifname), 0, 0, T_EVERYDAY},
    {"TPX_SOCKET_FAMILY", "NCCL_SOCKET_FAMILY", V_STR, F(socket_family), 0, 0, T_TUNING},
    {"TPX_NSOCKS", NULL, V_INT, F(nsocks), 0, 64, T_TUNING},
    {"TPX_NTHREADS", NULL, V_INT, F(nthreads), 1, 64, T_TUNING},
    {"TPX_SOCK_STRICT", NULL, V_INT, F(sock_strict), 0, 1, T_TESTING},
    {"TPX_SOCK_UNPACK", NULL, V_INT, F(sock_unpack), 0, 1, T_TESTING},
    {"TPX_SOCK_BOUNCE_BYTES", NULL, V_SIZE, F(sock_bounce_bytes), 8LL << 20, 4LL << 30, T_TUNING},
    {"TPX_NUM_CHANNELS", "UCCL_TCPX_NUM_CHANNELS", V_INT, F(num_channels), 1, 64, T_TUNING},
    {"TPX_CHUNK_BYTES", "UCCL_TCPX_CHUNK_BYTES", V_SIZE, F(chunk_bytes), 4096, 4 << 20, T_TUNING},
    {"TPX_WINDOW", NULL, V_INT, F(window), 1, 1024, T_TUNING},
    {"TPX_PORT_BASE", "UCCL_TCPX_BOOTSTRAP_PORT_BASE", V_INT, F(port_base), 0, 65535, T_EVERYDAY},
    {"TPX_PORT_SPAN", NULL, V_INT, F(port_span), 1, 4096, T_TUNING},
    {"TPX_TIMEOUT_MS", NULL, V_INT, F(timeout_ms), 1, 86400000, T_TUNING},
    {"TPX_CONNECT_TIMEOUT_MS", NULL, V_INT, F(connect_timeout_ms), 1, 86400000, T_TUNING},
    {"TPX_PEER_TIMEOUT_MS", NULL, V_INT, F(peer_timeout_ms), 0, 86400000, T_TUNING},
    {"TPX_UNPACK", "UCCL_TCPX_UNPACK_IMPL", V_STR, F(unpack), 0, 0, T_TUNING},
    {"TPX_PROGRESS_THREAD", NULL, V_INT, F(progress_thread), 0, 1, T_TUNING},
    {"TPX_STAGING_BYTES", NULL, V_SIZE, F(staging_bytes), 4096, 1LL << 34, T_TUNING},
    {"TPX_INLINE_BYTES", NULL, V_SIZE, F(inline_bytes), 0, 65536, T_TUNING},
    {"TPX_ALLOW_DIAL", NULL, V_STR, F(allow_dial), 0, 0, T_LIMITS},
    {"TPX_MAX_DIALS", NULL, V_INT, F(max_dials), 1, 64 * 65, T_LIMITS},
    {"TPX_MAX_HELD_BYTES", NULL, V_SIZE, F(max_held_bytes), 65536, 1LL << 40, T_LIMITS},
    {"TPX_MAX_EP_HELD_BYTES", NULL, V_SIZE, F(max_ep_held_bytes), 65536, 1LL << 42, T_LIMITS},
    {"TPX_DIAL_SYNS", NULL, V_INT, F(dial_syns), 2, 100000, T_LIMITS},
    {"TPX_MAX_UNAUTH", NULL, V_INT, F(max_unauth), 1, 65536, T_LIMITS},
    {"TPX_MAX_UNAUTH_PER_SOURCE", NULL, V_INT, F(max_unauth_per_source), 1, 65536, T_LIMITS},
    {"TPX_MAX_PREAUTH_BYTES", NULL, V_SIZE, F(max_preauth_bytes), 16384, 1 << 20, T_LIMITS},
    {"TPX_MAX_PEERS", NULL, V_INT, F(max_peers), 1, 1 << 20, T_LIMITS},
    {"TPX_MAX_NOTIFS", NULL, V_INT, F(max_notifs), 1, 1 << 24, T_LIMITS},
    {"TPX_MAX_NOTIF_BYTES", NULL, V_SIZE, F(max_notif_bytes), 4096, 1LL << 36, T_LIMITS},
    {"TPX_MAX_EP_NOTIF_BYTES", NULL, V_SIZE, F(max_ep_notif_bytes), 65536, 1LL << 40, T_LIMITS},
    {"TPX_MAX_CTL_QUEUE", NULL, V_INT, F(max_ctl_queue), 64, 1 << 24, T_LIMITS},
    {"TPX_MAX_CTL_OUT_BYTES", NULL, V_SIZE, F(max_ctl_out_bytes), 1 << 20, 1LL << 36, T_LIMITS},
    {"TPX_AUTH_KEY", NULL, V_KEY, F(auth_key), 0, 0, T_EVERYDAY},
    {"TPX_AUTH_KEY_FILE", NULL, V_KEYFILE, F(auth_key_file), 0, 0, T_EVERYDAY},
    {"TPX_ENCRYPT", NULL, V_INT, F(encrypt), 0, 1, T_EVERYDAY},
    {"TPX_NET_ABI", NULL, V_INT, F(net_abi), 7, 12, T_TESTING},
    {"TPX_GPU_NIC_MAP", NULL, V_MAP, F(gpu_nic_map), 0, 0, T_EVERYDAY},
    {"TPX_PROGRESS_SPIN_US", NULL, V_INT, F(progress_spin_us), 0, 1000000, T_TESTING},
    {"TPX_PACK_BYTES", NULL, V_SIZE, F(pack_bytes), 0, 4 << 20, T_TESTING},
    {"TPX_ETCD_ENDPOINTS", NULL, V_STR, F(etcd_endpoints), 0, 0, T_EVERYDAY},
    {"TPX_ETCD_JOB", NULL, V_NAME, F(etcd_job), 0, 0, T_EVERYDAY},
    {"TPX_ETCD_TIMEOUT_MS", NULL, V_INT, F(etcd_timeout_ms), 1, 86400000, T_TUNING},
    {"TPX_ETCD_TTL_S", NULL, V_INT, F(etcd_ttl_s), 2, 3600, T_TUNING},
    {"TPX_TIMELINE", NULL, V_STR, F(timeline), 0, 0, T_TESTING},
    /* connection setup on transient errors (common/retry.h) */
    {"TPX_SOCKET_RETRY_CNT", "NCCL_SOCKET_RETRY_CNT", V_INT, F(socket_retry_cnt), 0, 10000, T_TUNING},
    {"TPX_SOCKET_RETRY_SLEEP_MSEC", "NCCL_SOCKET_RETRY_SLEEP_MSEC", V_INT, F(socket_retry_sleep_msec), 1, 60000, T_TUNING},
    /* channels that differ or go away (engine/stripe.h, engine/failover.h) */
    {"TPX_STRIPE", NULL, V_INT, F(stripe), 0, 1, T_TUNING},
    {"TPX_CHANNEL_STALL_MS", NULL, V_INT, F(channel_stall_ms), 100, 600000, T_TUNING},
    {"TPX_INTEGRITY", NULL, V_INT, F(integrity), 0, 1, T_TUNING},
    {"TPX_INTEGRITY_THREADS", NULL, V_INT, F(integrity_threads), 0, 16, T_TUNING},
};

/* Settings retired once their experiment was answered (docs/CONFIG.md,
 * "Retired"): a value set is reported, once, as ignored. */
static const char *const retired[] = {"TPX_STAGING_COPY"};
#define NVARS (sizeof(vars) / sizeof(vars[0]))
#define NRETIRED (sizeof(retired) / sizeof(retired[0]))

/* The defaults alone; tpx_config_defaults also reads the process's
 * configuration first (tpx_config_global), as every public way to a
 * configuration does. */
static void defaults(tpx_config_t *cfg) {
  memset(cfg, 0, sizeof(*cfg));
  cfg->log_level = TPX_LOG_WARN;
  /* Built-in transport. 8 I/O threads per device, shared by all its comms:
   * in one process the two ends of a loopback comm share the pool, and with
   * fewer threads each one carries a send and a receive socket, which
   * serialises them; idle threads sleep, so the spare ones cost nothing
   * (docs/notes/transport-defaults.md). Data sockets per comm: 0 =
   * automatic, see tpx_config_nsocks. */
  cfg->nsocks = 0;
  cfg->nthreads = 8;
  /* Many-core hosts: twice the channels and threads keep more sockets
   * streaming at once, which a GPU-to-GPU transfer needs to fill the link;
   * the extra threads sleep when idle. */
  int ncpu = tpx__cpu_count(); /* >= 1 */
  if (ncpu >= 16) cfg->nthreads = 16;
  /* Small machines: 2 threads per CPU below 4 CPUs, enough for a sending
   * and a receiving thread per CPU and no more to switch between. */
  if (ncpu < 4) cfg->nthreads = 2 * ncpu;
  /* Unpack mode: 16 requests of the recommended <= 4 MiB chunks fit at once. */
  cfg->sock_bounce_bytes = 64u << 20;
  cfg->num_channels = ncpu >= 16 ? 8 : 4;
  /* Below 4 CPUs 2 channels: their data sockets already keep every CPU busy,
   * more only add sockets and switches. */
  if (ncpu < 4) cfg->num_channels = 2;
  /* Automatic, per transfer (tpx_config_chunk). */
  cfg->chunk_bytes = 0;
  cfg->window = 16;
  cfg->port_base = 20000;
  cfg->port_span = 64;
  cfg->timeout_ms = 30000;
  cfg->connect_timeout_ms = 10000;
  /* A silent peer fails within 4 s (issue 42's bound is 5 s), while a loaded
   * one answers a ping in milliseconds to a few hundred (engine/live.h). */
  cfg->peer_timeout_ms = 4000;
  strcpy(cfg->unpack, "kernel");
  cfg->progress_thread = 1;
  cfg->staging_bytes = 8u << 20;
  cfg->inline_bytes = 16384;
  /* Decided per transfer (engine/api_xfer.c): packed chunks through the
   * pack ring cost a copy on each side, more than they save at 16 KiB and
   * above; through one vectored request (caps.iov) they cost none
   * (docs/notes/small-blocks.md). */
  cfg->pack_bytes = TPX_PACK_BYTES_AUTO;
  /* Hostile-peer bounds (docs/SECURITY.md). Dials: 8 channels x (16 data
   * sockets + 1) fit twice. Pre-handshake frames: a HELLO of 64 channels is
   * 8.3 KiB. Notifications: 4096 pending cost about 17 MiB (a queued one
   * holds TPX_NOTIF_MAX bytes). */
  cfg->max_dials = 272;
  cfg->dial_syns = 2;
  cfg->max_held_bytes = 64u << 20;
  cfg->max_ep_held_bytes = 256u << 20;
  cfg->max_unauth = 64;
  cfg->max_unauth_per_source = 16;
  cfg->max_preauth_bytes = 16384;
  cfg->max_peers = 1024;
  cfg->max_notifs = 4096;
  cfg->max_notif_bytes = 4u << 20;
  cfg->max_ep_notif_bytes = 64u << 20;
  cfg->max_ctl_queue = 16384;
  cfg->max_ctl_out_bytes = 64u << 20;
  /* Napping: spinning takes CPUs from the transport's I/O threads
   * (docs/notes/progress-thread-idle.md). */
  cfg->progress_spin_us = 0;
  /* Rendezvous: a lookup waits 10 s for its peer to publish; what this
   * process published outlives it by at most 10 s. */
  cfg->etcd_timeout_ms = 10000;
  cfg->etcd_ttl_s = 10;
  /* NCCL's socket retry defaults; TPX_CONNECT_TIMEOUT_MS (10 s) ends them first. */
  cfg->socket_retry_cnt = 34;
  cfg->socket_retry_sleep_msec = 100;
  /* Adaptive striping and failover where both peers have them; a channel
   * silent for 2 s while another moves is lost (a slow link's chunk of
   * a few MiB still moves well within it: it gets fewer chunks). */
  cfg->stripe = 1;
  cfg->channel_stall_ms = 2000;
  cfg->integrity = 1;
}

int tpx__config_name_ok(const char *s, size_t cap) {
  size_t n = strlen(s);
  if (n == 0 || n >= cap) return 0;
  for (size_t i = 0; i < n; i++) {
    char c = s[i];
    if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' || c == '-'))
      return 0;
  }
  return strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static int parse_log_level(const char *s, int *out) {
  static const char *names[] = {"none", "error", "warn", "info", "debug", "trace"};
  for (int i = 0; i < 6; i++) {
    if (strcasecmp(s, names[i]) == 0) {
      *out = i;
      return 0;
    }
  }
  return TPX_EINVAL;
}

/* Accepts plain integers and K/M/G suffixes (binary). */
int tpx__config_parse_number(const char *s, long long *out) {
  char *end = NULL;
  errno = 0;
  long long v = strtoll(s, &end, 0);
  if (errno != 0 || end == s) return TPX_EINVAL;
  long long mul = 1;
  if (*end == 'k' || *end == 'K') mul = 1LL << 10, end++;
  else if (*end == 'm' || *end == 'M') mul = 1LL << 20, end++;
  else if (*end == 'g' || *end == 'G') mul = 1LL << 30, end++;
  if (*end != '\0') return TPX_EINVAL;
  if (v > INT64_MAX / mul || v < INT64_MIN / mul) return TPX_EINVAL;
  *out = v * mul;
  return 0;
}

/* Fields whose 0 means "the default" in code (outside their range; the
 * environment leaves them unset instead). */
static int zero_is_default(const struct var *v) {
  return v->off == offsetof(tpx_config_t, net_abi) || v->off == offsetof(tpx_config_t, chunk_bytes);
}
/* The automatic defaults the environment may name "auto": TPX_PACK_BYTES
 * (TPX_PACK_BYTES_AUTO) and TPX_CHUNK_BYTES (0, which may also be given as
 * "0", as the field holds it). 1 and *out, or 0. */
static int auto_value(const struct var *v, const char *val, size_t *out) {
  if (!val) return 0;
  int is_auto = strcasecmp(val, "auto") == 0;
  if (v->off == offsetof(tpx_config_t, pack_bytes) && is_auto) *out = TPX_PACK_BYTES_AUTO;
  else if (v->off == offsetof(tpx_config_t, chunk_bytes) && (is_auto || strcmp(val, "0") == 0)) *out = 0;
  else return 0;
  return 1;
}
/* TPX_STRIPE's names: "fixed" (0) and "adaptive" (1). 1 and *out, or 0. */
static int named_value(const struct var *v, const char *val, int *out) {
  if (!val || v->off != offsetof(tpx_config_t, stripe)) return 0;
  if (strcasecmp(val, "fixed") == 0) *out = 0;
  else if (strcasecmp(val, "adaptive") == 0) *out = 1;
  else return 0;
  return 1;
}
/* The one rule for a numeric setting, from the environment or elsewhere. */
static int parse_checked(const struct var *v, const char *val, long long *out) {
  long long n;
  if (tpx__config_parse_number(val, &n) != 0 || n < v->lo || n > v->hi) return TPX_EINVAL;
  *out = n;
  return 0;
}

/* The key's rows: the key itself, or a file holding it (keyfile.h). Either
 * replaces a key set before; a refusal leaves cfg unchanged. */
static int apply_key(tpx_config_t *cfg, const struct var *v, const char *val) {
  uint8_t key[TPX_AUTH_KEY_MAX];
  size_t len = strlen(val);
  int rc;
  if (v->kind == V_KEY) {
    if ((rc = tpx__key_len_check(len, "TPX_AUTH_KEY")) != 0) return rc;
    memcpy(key, val, len);
  } else {
    if (len >= v->cap) return tpx_err_quiet(TPX_EINVAL, "config: TPX_AUTH_KEY_FILE is longer than %zu bytes", v->cap - 1);
    if ((rc = tpx__keyfile_read(val, key, &len)) != 0) return rc;
  }
  rc = tpx_config_set_auth_key(cfg, key, len); /* the length is checked: it takes it */
  tpx__cleanse(key, sizeof(key));
  if (rc == 0 && v->kind == V_KEYFILE) memcpy(cfg->auth_key_file, val, strlen(val) + 1);
  return rc;
}

int tpx_config_set_auth_key(tpx_config_t *cfg, const void *key, size_t len) {
  if (!cfg || (!key && len)) return tpx_err(TPX_EINVAL, "tpx_config_set_auth_key: NULL argument");
  if (key || len) {
    if (tpx__key_len_check(len, "tpx_config_set_auth_key") != 0) return tpx_err_surface(TPX_EINVAL);
  }
  tpx__cleanse(cfg->auth_key, sizeof(cfg->auth_key));
  if (len) memcpy(cfg->auth_key, key, len);
  cfg->auth_key_len = len;
  cfg->auth_key_file[0] = '\0';
  cfg->auth_error[0] = '\0';
  return 0;
}

/* A bound as the user would write it: sizes with their largest exact
 * suffix (4194304 -> 4M), the rest as they are. */
static const char *bound_str(long long n, int size, char *buf, size_t cap) {
  if (size && n >= 1024 && n % (1LL << 30) == 0) snprintf(buf, cap, "%lldG", n >> 30);
  else if (size && n >= 1024 && n % (1LL << 20) == 0) snprintf(buf, cap, "%lldM", n >> 20);
  else if (size && n >= 1024 && n % 1024 == 0) snprintf(buf, cap, "%lldK", n >> 10);
  else snprintf(buf, cap, "%lld", n);
  return buf;
}

/* The unit a variable's name says (TPX_TIMEOUT_MS: ms). */
static const char *name_unit(const char *name) {
  size_t l = strlen(name);
  if ((l > 3 && strcmp(name + l - 3, "_MS") == 0) || (l > 5 && strcmp(name + l - 5, "_MSEC") == 0)) return " ms";
  if (l > 3 && strcmp(name + l - 3, "_US") == 0) return " us";
  if (l > 2 && strcmp(name + l - 2, "_S") == 0) return " s";
  return "";
}

/* Why val was refused for v: not a number, or out of v's range, the range
 * in the units the variable takes (sizes with K/M/G, times in their unit). */
static int number_refused(const struct var *v, const char *name, const char *val) {
  char lo[32], hi[32];
  int size = v->kind == V_SIZE;
  long long n;
  bound_str(v->lo, size, lo, sizeof(lo));
  bound_str(v->hi, size, hi, sizeof(hi));
  if (tpx__config_parse_number(val, &n) != 0)
    return tpx_err_quiet(TPX_EINVAL, "config: %s=%s is not a number%s; it takes %s..%s%s", name, val,
                         size ? " (a size: digits, then K, M or G)" : "", lo, hi, name_unit(v->name));
  return tpx_err_quiet(TPX_EINVAL, "config: %s=%s is out of range: it takes %s..%s%s", name, val, lo, hi,
                       name_unit(v->name));
}

/* Parse val into cfg's field for v, with v's bounds. The one check the
 * environment, tpx_config_set and the tools go through; the detail is
 * recorded quietly (each caller reports it its own way). */
static int apply(tpx_config_t *cfg, const struct var *v, const char *name, const char *val) {
  char *field = (char *)cfg + v->off;
  if (v->kind == V_KEY || v->kind == V_KEYFILE) return apply_key(cfg, v, val);
  if (v->kind == V_NAME && !tpx__config_name_ok(val, v->cap))
    return tpx_err_quiet(TPX_EINVAL, "config: %s=%s is not a name of 1..%zu characters from [A-Za-z0-9._-]", name, val,
                         v->cap - 1);
  if (v->kind == V_STR || v->kind == V_MAP || v->kind == V_NAME) {
    tpx_gpumap_t map;
    if (v->kind == V_MAP && tpx__gpumap_parse(val, &map) != 0)
      return TPX_EINVAL; /* the detail (recorded quietly) names the bad part */
    if (strlen(val) >= v->cap)
      return tpx_err_quiet(TPX_EINVAL, "config: %s is longer than %zu bytes", name, v->cap - 1);
    memcpy(field, val, strlen(val) + 1);
    return 0;
  }
  if (v->kind == V_LOG) {
    if (parse_log_level(val, (int *)field) != 0)
      return tpx_err_quiet(TPX_EINVAL, "config: %s=%s is not one of none|error|warn|info|debug|trace", name, val);
    return 0;
  }
  long long n;
  if (auto_value(v, val, (size_t *)field) || named_value(v, val, (int *)field)) return 0;
  if (parse_checked(v, val, &n) != 0) return number_refused(v, name, val);
  if (v->kind == V_INT) *(int *)field = (int)n;
  else *(size_t *)field = (size_t)n;
  return 0;
}

/* "TPX_NUM_CHANNELS", "num_channels" (any case) or the synonym
 * "UCCL_TCPX_NUM_CHANNELS" name the row TPX_NUM_CHANNELS. */
static const struct var *find_var(const char *key) {
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    const char *name = vars[i].name;
    if (strcmp(key, name) == 0 || strcasecmp(key, name + 4) == 0 ||
        (vars[i].synonym && strcmp(key, vars[i].synonym) == 0))
      return &vars[i];
  }
  return NULL;
}

int tpx__config_range(const char *var, long long *lo, long long *hi) {
  const struct var *v = find_var(var);
  if (!v || (v->kind != V_INT && v->kind != V_SIZE)) return TPX_EINVAL;
  *lo = v->lo;
  *hi = v->hi;
  return 0;
}

int tpx__config_parse_var(const char *var, const char *val, long long *out) {
  const struct var *v = find_var(var);
  if (!v || (v->kind != V_INT && v->kind != V_SIZE) || !val || parse_checked(v, val, out) != 0) return TPX_EINVAL;
  return 0;
}

int tpx_config_set(tpx_config_t *cfg, const char *key, const char *value) {
  if (!cfg || !key || !value) return tpx_err(TPX_EINVAL, "tpx_config_set: NULL argument");
  const struct var *v = find_var(key);
  if (!v) return tpx_err(TPX_ENOENT, "tpx_config_set: no setting '%s' (see docs/CONFIG.md)", key);
  if (apply(cfg, v, v->name, value) != 0) return tpx_err_surface(TPX_EINVAL);
  return 0;
}

size_t tpx_config_size(void) { return sizeof(tpx_config_t); }

/* Each refused value is reported once per process: the environment is read
 * by tpx_config_global and again by every tpx_config_from_env (a tool makes
 * one per endpoint), and the same refusal each time only repeats itself. A
 * variable given another value later, or the same one after a good one, is
 * reported again. */
static pthread_mutex_t reported_mu = PTHREAD_MUTEX_INITIALIZER;
/* Per row of vars, then per retired name, then both keys set: the hash of
 * the value last reported; 0 none. */
static uint64_t reported[NVARS + NRETIRED + 1];

static int first_report(size_t row, const char *val) {
  uint64_t h = 0;
  if (val != NULL) { /* NULL: the value was taken, forget the refusal */
    h = 1469598103934665603ull; /* FNV-1a */
    for (const char *c = val; *c; c++) h = (h ^ (unsigned char)*c) * 1099511628211ull;
    h |= 1; /* never 0 */
  }
  pthread_mutex_lock(&reported_mu);
  int first = reported[row] != h;
  reported[row] = h;
  pthread_mutex_unlock(&reported_mu);
  return first;
}

/* A key the environment asked for but that was refused must not leave the
 * endpoints running without one: the reason stays in cfg->auth_error and
 * tpx_config_check refuses the configuration. */
static void key_refused(tpx_config_t *cfg, const char *why, int report) {
  tpx__cleanse(cfg->auth_key, sizeof(cfg->auth_key));
  cfg->auth_key_len = 0;
  snprintf(cfg->auth_error, sizeof(cfg->auth_error), "%s", why);
  if (report) TPX_ERROR("%s; endpoints will refuse to start", why);
}

/* The environment into cfg, without the process's configuration (which is
 * read with this). */
static int from_env(tpx_config_t *cfg) {
  int rc = 0;
  defaults(cfg);
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    const struct var *v = &vars[i];
    const char *name = v->name;
    const char *val = getenv(name);
    if (val == NULL && v->synonym != NULL) {
      name = v->synonym;
      val = getenv(name);
    }
    if (val == NULL || val[0] == '\0') continue;
    if (apply(cfg, v, name, val) == 0) {
      (void)first_report(i, NULL);
      continue;
    }
    rc = TPX_EINVAL;
    int report = first_report(i, val);
    if (v->kind == V_KEY || v->kind == V_KEYFILE) key_refused(cfg, tpx_last_error(), report);
    else if (report) TPX_WARN("%s; ignored", tpx_last_error());
  }
  const char *k = getenv("TPX_AUTH_KEY"), *kf = getenv("TPX_AUTH_KEY_FILE");
  if (k && k[0] && kf && kf[0]) {
    key_refused(cfg, "config: both TPX_AUTH_KEY and TPX_AUTH_KEY_FILE are set: set one",
                first_report(NVARS + NRETIRED, "both"));
    rc = TPX_EINVAL;
  }
  for (size_t i = 0; i < NRETIRED; i++) {
    const char *val = getenv(retired[i]);
    if (val && val[0] && first_report(NVARS + i, val))
      TPX_WARN("config: %s=%s: the setting is retired and ignored (docs/CONFIG.md, \"Retired\")", retired[i], val);
  }
  return rc;
}

void tpx_config_defaults(tpx_config_t *cfg) {
  (void)tpx_config_global();
  defaults(cfg);
}

int tpx_config_from_env(tpx_config_t *cfg) {
  (void)tpx_config_global();
  return from_env(cfg);
}

int tpx_config_check(const tpx_config_t *cfg) {
  if (!cfg) return tpx_err(TPX_EINVAL, "configuration: NULL");
  if (cfg->auth_error[0])
    return tpx_err(TPX_EINVAL, "configuration: %.*s", (int)sizeof(cfg->auth_error), cfg->auth_error);
  if (cfg->auth_key_len != 0 && tpx__key_len_check(cfg->auth_key_len, "auth_key_len") != 0)
    return tpx_err_surface(TPX_EINVAL);
  if (cfg->encrypt && cfg->auth_key_len == 0)
    return tpx_err(TPX_EINVAL, "configuration: TPX_ENCRYPT=1 needs the shared key: set TPX_AUTH_KEY or "
                               "TPX_AUTH_KEY_FILE (the same on every peer)");
  for (size_t i = 0; i < sizeof(vars) / sizeof(vars[0]); i++) {
    const struct var *v = &vars[i];
    const char *field = (const char *)cfg + v->off;
    long long n;
    if (v->kind == V_INT) n = *(const int *)field;
    else if (v->kind == V_SIZE) n = *(const size_t *)field > (size_t)INT64_MAX ? INT64_MAX : (long long)*(const size_t *)field;
    else continue;
    if ((n < v->lo || n > v->hi) && !(n == 0 && zero_is_default(v)) &&
        !(v->off == offsetof(tpx_config_t, pack_bytes) && cfg->pack_bytes == TPX_PACK_BYTES_AUTO))
      return tpx_err(TPX_EINVAL, "configuration: %lld is out of range for %s [%lld, %lld]", n, v->name, v->lo, v->hi);
  }
  return 0;
}

/* One comm alone: 4 data sockets; 2 with at most 2 CPUs, where every busy
 * socket needs a sending and a receiving thread and more of them than CPUs
 * only adds switches (8 gained nothing at 64 MiB on 2 cores). Several comms
 * carrying one peer's traffic (the engine's channels) get no more sockets
 * together than there are CPUs: a chunk goes whole to one socket anyway, so
 * the channels are the parallelism, and sockets beyond what the CPUs can
 * serve only take turns. Bounding by the CPUs rather than a fixed 1 per
 * channel keeps 4 per channel where the cores can serve them
 * (docs/notes/transport-defaults.md). */
int tpx_config_nsocks(const tpx_config_t *cfg, int comms) {
  if (cfg != NULL && cfg->nsocks > 0) return cfg->nsocks;
  int ncpu = tpx__cpu_count(); /* >= 1 */
  int one = ncpu <= 2 ? 2 : 4;
  if (comms <= 1) return one;
  int fit = ncpu / comms;
  return fit < 1 ? 1 : fit > one ? one : fit;
}

size_t tpx__config_chunk_for(const tpx_config_t *cfg, uint64_t bytes, int channels, int ncpu) {
  if (cfg != NULL && cfg->chunk_bytes > 0) return cfg->chunk_bytes;
  /* Below 4 CPUs larger chunks put a whole transfer in the windows at once,
   * so the target never waits for a CPU to re-post receives; with more CPUs
   * and GPU memory finer chunks overlap the staging copies with the wire
   * better, so the larger sizes are kept to small machines
   * (docs/notes/chunk-size.md). */
  size_t c = TPX_CHUNK_BASE;
  if (ncpu >= 4) return c;
  uint64_t each = bytes / (uint64_t)(channels > 0 ? channels : 1);
  while (c < TPX_CHUNK_SMALL_MAX && each >= 2 * (uint64_t)c) c *= 2;
  return c;
}

size_t tpx_config_chunk(const tpx_config_t *cfg, uint64_t bytes, int channels) {
  return tpx__config_chunk_for(cfg, bytes, channels, tpx__cpu_count());
}

static tpx_config_t global_cfg;
static pthread_once_t global_once = PTHREAD_ONCE_INIT;

/* The process's configuration is read on its first use, never at load: the
 * log level (TPX_LOG) and the timeline hold from the first configuration any
 * caller makes or asks for (tpx_config_defaults, tpx_config_from_env, an
 * endpoint, a transport or a rendezvous without one). */
static void global_init(void) {
  (void)from_env(&global_cfg);
  tpx__log_level = global_cfg.log_level;
  tpx__tl_open(global_cfg.timeline);
}

const tpx_config_t *tpx_config_global(void) {
  pthread_once(&global_once, global_init);
  return &global_cfg;
}

/* Whether cfg's field for v differs from the default (the key: whether one
 * is set or was refused). */
static int is_set(const tpx_config_t *cfg, const tpx_config_t *def, const struct var *v) {
  const char *a = (const char *)cfg + v->off, *b = (const char *)def + v->off;
  switch (v->kind) {
  case V_KEY: return cfg->auth_key_len != 0 || cfg->auth_error[0] != '\0';
  case V_STR:
  case V_NAME:
  case V_MAP:
  case V_KEYFILE: return strncmp(a, b, v->cap) != 0;
  default: return memcmp(a, b, v->cap) != 0;
  }
}

static void print_row(const tpx_config_t *cfg, const struct var *v, int is_default, FILE *out) {
  static const char *levels[] = {"none", "error", "warn", "info", "debug", "trace"};
  const char *field = (const char *)cfg + v->off;
  fprintf(out, "%-24s ", v->name);
  switch (v->kind) {
  case V_STR:
  case V_NAME:
  case V_MAP:
  case V_KEYFILE: fprintf(out, "%s", field[0] ? field : "(unset)"); break;
  case V_KEY: /* the key itself is never printed */
    if (cfg->auth_error[0]) fprintf(out, "(refused: endpoints will not start)");
    else if (cfg->auth_key_len) fprintf(out, "(set, %zu bytes)", cfg->auth_key_len);
    else fprintf(out, "(unset: peers are not authenticated)");
    break;
  case V_LOG: {
    int l = *(const int *)field;
    fprintf(out, "%s", l >= 0 && l <= 5 ? levels[l] : "?");
    break;
  }
  case V_INT:
    fprintf(out, "%d", *(const int *)field);
    if (v->off == offsetof(tpx_config_t, net_abi) && cfg->net_abi == 0)
      fprintf(out, " (automatic: the highest the plugin exports)");
    if (v->off == offsetof(tpx_config_t, nsocks) && cfg->nsocks == 0)
      fprintf(out, " (automatic: %d for one comm, %d per comm of an endpoint's %d channels)",
              tpx_config_nsocks(cfg, 1), tpx_config_nsocks(cfg, cfg->num_channels), cfg->num_channels);
    break;
  case V_SIZE:
    if (v->off == offsetof(tpx_config_t, pack_bytes) && cfg->pack_bytes == TPX_PACK_BYTES_AUTO)
      fprintf(out, "auto (the transfer's chunk where the transport takes iovecs, else 8192)");
    else if (v->off == offsetof(tpx_config_t, chunk_bytes) && cfg->chunk_bytes == 0)
      fprintf(out, "auto (per transfer: %zu, up to %zu on this machine)", tpx_config_chunk(cfg, 0, 1),
              tpx_config_chunk(cfg, UINT64_MAX, 1));
    else
      fprintf(out, "%zu", *(const size_t *)field);
    break;
  }
  if (v->synonym) fprintf(out, "    (synonym %s)", v->synonym);
  /* A value the environment gave but that was refused (first_report keeps
   * it): say so beside the default in effect, when that is what is shown. */
  size_t row = (size_t)(v - vars);
  pthread_mutex_lock(&reported_mu);
  int refused = is_default && v->kind != V_KEY && v->kind != V_KEYFILE && reported[row] != 0;
  pthread_mutex_unlock(&reported_mu);
  if (refused) fprintf(out, "    (the environment's value was refused: see the warning)");
  fputc('\n', out);
}

/* What was set first (the values that differ from the defaults), then the
 * defaults; each part in the tiers' order (everyday first). */
void tpx_config_print(const tpx_config_t *cfg, FILE *out) {
  tpx_config_t def;
  tpx_config_defaults(&def);
  size_t n = sizeof(vars) / sizeof(vars[0]), shown = 0;
  for (int set = 1; set >= 0; set--) {
    for (int t = T_EVERYDAY; t <= T_COUNT; t++) {
      for (size_t i = 0; i < n; i++) {
        const struct var *v = &vars[i];
        int tier = v->tier > T_NONE && v->tier < T_COUNT ? (int)v->tier : T_COUNT; /* untiered last */
        if (tier != t || is_set(cfg, &def, v) != set) continue;
        if (shown++ == 0 && set) fprintf(out, "# set (not the default)\n");
        print_row(cfg, v, !set, out);
      }
    }
    if (set && shown) fprintf(out, "# defaults\n");
  }
}
