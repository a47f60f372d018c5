/* tpx_net_open / tpx_net_close: pick the built-in transport or dlopen an
 * ncclNet plugin, find the highest table it exports (v11 down to v7), and
 * hand it to the adapter (adapt.c). A process loads and initialises each
 * plugin once; every opener shares that instance (reference-counted). */
#define _GNU_SOURCE /* dlinfo */
#include <dlfcn.h>
#include <link.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "ncclnet/adapt.h"
#include "ncclnet/loader.h"
#include "net/caps.h"
#include "tpx/config.h"
#include "tcpx/plugin_env.h"
#include "tpx/net.h"
#include "tpx/tcpx.h"

/* ---- plugin logs -> our levels ---------------------------------------------- */

/* NCCL's INFO is chatty (GPUDirect-TCPX logs every connection step there), so
 * it lands at our DEBUG; VERSION lines at INFO; ABORT is an error. */
static void plugin_log(int level, unsigned long flags, const char *file, int line, const char *fmt,
                       ...) {
  (void)flags;
  int lvl;
  switch (level) {
  case NCCLNET_LOG_ABORT: lvl = TPX_LOG_ERROR; break;
  case NCCLNET_LOG_WARN: lvl = TPX_LOG_WARN; break;
  case NCCLNET_LOG_VERSION: lvl = TPX_LOG_INFO; break;
  case NCCLNET_LOG_INFO: lvl = TPX_LOG_DEBUG; break;
  case NCCLNET_LOG_TRACE: lvl = TPX_LOG_TRACE; break;
  default: return;
  }
  if (lvl > tpx__log_level || fmt == NULL) return;
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  size_t n = strlen(msg);
  while (n > 0 && msg[n - 1] == '\n')
    msg[--n] = '\0';
  tpx__log_emit(lvl, file ? file : "plugin", line, "[plugin] %s", msg);
}

/* ---- finding the file -------------------------------------------------------------- */

int tpx_net_spec_is_builtin(const char *spec) {
  return spec == NULL || spec[0] == '\0' || strcmp(spec, "tpx") == 0 ||
         strcmp(spec, "builtin") == 0;
}

/* dlerror() reports a missing candidate as "<name>: cannot open shared object
 * file: No such file or directory"; a missing *dependency* names the
 * dependency instead, and that is a load failure, not "not found". */
static int is_missing(const char *err, const char *cand) {
  return err && strstr(err, "No such file or directory") && strstr(err, cand);
}

static int open_library(const char *spec, void **dl_out) {
  char cands[3][PATH_MAX];
  int ncand = 0;
  snprintf(cands[ncand++], PATH_MAX, "%s", spec);
  if (strchr(spec, '/') == NULL) {
    snprintf(cands[ncand++], PATH_MAX, "libnccl-net-%s.so", spec);
    snprintf(cands[ncand++], PATH_MAX, "%s/libnccl-net-%s.so", TPX_NET_TCPX_LIBDIR, spec);
  }
  char last_err[512] = "";
  for (int i = 0; i < ncand; i++) {
    (void)dlerror();
    void *dl = dlopen(cands[i], RTLD_NOW | RTLD_LOCAL);
    if (dl) {
      TPX_DEBUG("net plugin '%s': opened %s", spec, cands[i]);
      *dl_out = dl;
      return 0;
    }
    const char *e = dlerror();
    snprintf(last_err, sizeof(last_err), "%s", e ? e : "unknown dlopen error");
    if (!is_missing(e, cands[i]))
      return tpx_err_quiet(TPX_ESYSTEM, "net plugin '%s': %s exists but cannot be loaded: %s", spec,
                     cands[i], last_err);
  }
  if (ncand == 1) return tpx_err_quiet(TPX_ENOENT, "net plugin '%s' not found: %s", spec, last_err);
  return tpx_err_quiet(TPX_ENOENT,
                 "net plugin '%s' not found (tried %s and %s on the library path, then %s): %s",
                 spec, cands[0], cands[1], cands[2], last_err);
}

/* ---- finding the table -------------------------------------------------------------- */

static const void *find_symbol(void *dl, int version) {
  char sym[32];
  snprintf(sym, sizeof(sym), NCCLNET_SYMBOL_PREFIX "%d", version);
  (void)dlerror();
  return dlsym(dl, sym);
}

/* "ncclNetPlugin_v11, ncclNetPlugin_v7" for the tables dl exports among
 * v1..v20 outside [skip_lo, skip_hi]; "" when none. */
static void exported_list(void *dl, int skip_lo, int skip_hi, char *found, size_t cap) {
  size_t len = 0;
  found[0] = '\0';
  for (int v = 20; v >= 1; v--) {
    if (v >= skip_lo && v <= skip_hi) continue;
    if (find_symbol(dl, v) && len + 24 < cap)
      len += (size_t)snprintf(found + len, cap - len, "%s" NCCLNET_SYMBOL_PREFIX "%d", len ? ", " : "", v);
  }
}

/* The table to drive: exactly v<abi> when abi is set (TPX_NET_ABI), else the
 * highest of max_version .. v7. */
static int probe(void *dl, const char *file, int max_version, int abi, const void **table,
                 int *version) {
  int hi = abi ? abi : max_version, lo = abi ? abi : NCCLNET_MIN_VERSION;
  for (int v = hi; v >= lo; v--) {
    const void *t = find_symbol(dl, v);
    if (t) {
      *table = t;
      *version = v;
      return 0;
    }
  }
  /* Nothing we can drive: say what is there, if anything. */
  char found[160];
  if (abi) {
    exported_list(dl, abi, abi, found, sizeof(found));
    return tpx_err_quiet(TPX_EVERSION, "net plugin %s has no " NCCLNET_SYMBOL_PREFIX "%d, which TPX_NET_ABI=%d "
                   "forces; it exports %s", file, abi, abi, found[0] ? found : "no ncclNetPlugin_vN table");
  }
  exported_list(dl, NCCLNET_MIN_VERSION, max_version, found, sizeof(found));
  if (found[0])
    return tpx_err_quiet(TPX_EVERSION, "net plugin %s exports only %s; supported: ncclNetPlugin_v%d..v%d",
                   file, found, NCCLNET_MIN_VERSION, max_version);
  return tpx_err_quiet(TPX_ENOSYM,
                 "%s exports no ncclNetPlugin_vN symbol (looked for v%d..v%d): not an "
                 "NCCL net plugin",
                 file, max_version, NCCLNET_MIN_VERSION);
}

/* ---- open / close ---------------------------------------------------------------------- */

/* Our own libnccl-net-tpx.so (the built-in transport behind the plugin ABI,
 * named "tpx") reads TPX_SOCK_STRICT from this same environment, and its
 * HOST devices cannot report that it then allows only 16 requests per comm.
 * (Its unpack mode shows as UNPACK devices.) */
static int own_plugin_strict(const tpx_net_t *net) {
  return strcmp(net->name, "tpx") == 0 && tpx_config_global()->sock_strict;
}

/* One instance per library and process, shared by every opener, as in NCCL:
 * it loads and initialises a plugin once (never a second init: a real plugin
 * may refuse one, and before v11 there is no finalize), so a second endpoint
 * gets the first one's instance. Guarded by reg_mu; keyed by the dlopen
 * handle, which the dynamic loader returns unchanged for a library already
 * loaded. */
static pthread_mutex_t reg_mu = PTHREAD_MUTEX_INITIALIZER;
static struct tpx_plugin *reg_head;

static void plugin_destroy(tpx_net_t *net) {
  struct tpx_plugin *p = net->impl;
  pthread_mutex_lock(&reg_mu);
  int last = --p->refs == 0;
  if (last) {
    struct tpx_plugin **pp = &reg_head;
    while (*pp && *pp != p)
      pp = &(*pp)->next;
    if (*pp) *pp = p->next;
  }
  pthread_mutex_unlock(&reg_mu);
  if (!last) return;
  tpx__adapt_fini(p);
  if (p->dl && dlclose(p->dl) != 0) TPX_WARN("net plugin %s: dlclose: %s", net->name, dlerror());
  free(p);
}

const char *tpx_net_plugin_file(const tpx_net_t *net) {
  if (net == NULL || net->ops == NULL || net->ops->destroy != plugin_destroy) return NULL;
  return ((const struct tpx_plugin *)net->impl)->file;
}

/* The instance already loaded from dl, with one more reference (reg_mu
 * held), or NULL. Another ABI version than the one it was initialised with
 * is an error: that would take a second init. */
static int share_loaded(void *dl, int max_version, int abi, tpx_net_t **out) {
  struct tpx_plugin *p = reg_head;
  while (p && p->dl != dl)
    p = p->next;
  if (p == NULL) return 0;
  const void *table = NULL;
  int v = 0;
  int rc = probe(dl, p->file, max_version, abi, &table, &v);
  dlclose(dl); /* the instance holds its own reference */
  if (rc) return rc;
  if (v != p->version)
    return tpx_err_quiet(TPX_EUSAGE, "net plugin %s is already loaded in this process at ncclNet v%d; "
                   "v%d would initialise it a second time", p->file, p->version, v);
  p->refs++;
  *out = &p->net;
  return 1;
}

/* Load a library not loaded yet: find its table, bind, init, read caps. */
static int load_new(void *dl, const char *spec, int max_version, int abi, tpx_net_t **out) {
  struct tpx_plugin *p = calloc(1, sizeof(*p));
  if (p == NULL) {
    dlclose(dl);
    return tpx_err_quiet(TPX_ENOMEM, "net plugin '%s': out of memory", spec);
  }
  p->dl = dl;
  struct link_map *lm = NULL;
  if (dlinfo(dl, RTLD_DI_LINKMAP, &lm) == 0 && lm && lm->l_name && lm->l_name[0])
    snprintf(p->file, sizeof(p->file), "%s", lm->l_name);
  else
    snprintf(p->file, sizeof(p->file), "%s", spec);

  const void *table = NULL;
  int rc = probe(dl, p->file, max_version, abi, &table, &p->version);
  if (rc == 0) {
    const char *name = *(const char *const *)table; /* every table starts with its name */
    snprintf(p->net.name, sizeof(p->net.name), "%s", name ? name : "(unnamed)");
    p->net.abi_version = p->version;
    p->net.impl = p;
    rc = tpx__adapt_bind(p, table);
  }
  if (rc == 0) {
    p->ops.destroy = plugin_destroy;
    p->net.ops = &p->ops;
    rc = tpx__adapt_init(p, plugin_log);
  }
  if (rc == 0) {
    rc = tpx__net_caps_init(&p->net, 0, own_plugin_strict(&p->net));
    if (rc) tpx__adapt_fini(p);
  }
  if (rc) {
    dlclose(dl);
    free(p);
    return rc;
  }
  p->refs = 1;
  p->next = reg_head;
  reg_head = p;
  *out = &p->net;
  return 0;
}

static int open_abi(const char *spec, int max_version, int abi, tpx_net_t **out) {
  if (out == NULL) return tpx_err_quiet(TPX_EINVAL, "tpx_net_open: out is NULL");
  *out = NULL;
  if (spec == NULL) spec = tpx_config_global()->net_plugin;
  if (tpx_net_spec_is_builtin(spec)) return tpx_net_open_builtin(NULL, out);
  if (max_version < NCCLNET_MIN_VERSION || max_version > NCCLNET_MAX_VERSION)
    return tpx_err_quiet(TPX_EINVAL, "tpx_net_open: ABI version %d outside %d..%d", max_version,
                   NCCLNET_MIN_VERSION, NCCLNET_MAX_VERSION);
  if (abi != 0 && (abi < NCCLNET_MIN_VERSION || abi > NCCLNET_MAX_VERSION))
    return tpx_err_quiet(TPX_EINVAL, "TPX_NET_ABI=%d outside %d..%d", abi, NCCLNET_MIN_VERSION,
                   NCCLNET_MAX_VERSION);

  void *dl = NULL;
  int rc = open_library(spec, &dl);
  if (rc) return rc;
  pthread_mutex_lock(&reg_mu);
  rc = share_loaded(dl, max_version, abi, out);
  if (rc == 0) rc = load_new(dl, spec, max_version, abi, out);
  pthread_mutex_unlock(&reg_mu);
  return rc < 0 ? rc : 0;
}

int tpx__net_open_version(const char *spec, int max_version, tpx_net_t **out) {
  return open_abi(spec, max_version, 0, out);
}

int tpx__net_open_abi(const char *spec, int abi, tpx_net_t **out) {
  return open_abi(spec, NCCLNET_MAX_VERSION, abi, out);
}

int tpx_net_open(const char *spec, tpx_net_t **out) {
  return open_abi(spec, NCCLNET_MAX_VERSION, tpx_config_global()->net_abi, out);
}

void tpx_net_close(tpx_net_t *net) {
  if (net == NULL) return;
  if (net->ops && net->ops->destroy) net->ops->destroy(net);
}

/* The plugin is known by its name or file; the built-in transport emulates it
 * in unpack mode. */
int tpx_net_is_tcpx(const tpx_net_t *net) {
  if (net == NULL) return 0;
  if (net->caps.builtin) return net->caps.unpack;
  return tpx__tcpx_env_is_plugin(net->name, tpx_net_plugin_file(net));
}
