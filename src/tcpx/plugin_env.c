/* The GPUDirect-TCPX plugin's environment (plugin_env.h). The plugin reads
 * these through NCCL's parameter loader at init (src/net_tcpx.cc, tcpxInit,
 * TCPX_GET_INT_FLAG): a set value inside the flag's range replaces the
 * compiled-in default of src/flags.cc, and so does the parameter's own
 * default when the variable is unset. Where that default is unsafe, a safe
 * value is filled in here; docs/CONFIG.md cites each. */
#define _GNU_SOURCE
#include "tcpx/plugin_env.h"

#include <errno.h>
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "common/error.h"
#include "common/log.h"
#include "tpx/tcpx.h"

struct var {
  const char *name;
  const char *safe;
  const char *why; /* logged when we set it */
  long bad_below;  /* a set value below this is unsafe (LONG_MIN: none) */
  const char *bad; /* why such a value (or the variable unset) is unsafe */
};

static const struct var vars[] = {
    {"NCCL_DYNAMIC_CHUNK_SIZE", "524288", "unset, the plugin cuts every send into 0-byte pieces", 1,
     "0 or unset: every send is cut into 0-byte pieces and never finishes"},
    {"NCCL_GPUDIRECTTCPX_RECV_SYNC", "1",
     "unset, the plugin turns its receiver sync off (its compiled-in default is on)", 1,
     "0 or unset: the sender does not wait for the receiver's posted request (data integrity)"},
    {"NCCL_MIN_ZCOPY_SIZE", "4096", "unset, host sends never use MSG_ZEROCOPY (UCCL's setting)",
     LONG_MIN, NULL},
};
#define NVARS ((int)(sizeof(vars) / sizeof(vars[0])))

static unsigned set_mask; /* which rows apply() set */

int tpx__tcpx_env_is_plugin(const char *name, const char *file) {
  if (name && strncasecmp(name, "GPUDirectTCPX", 13) == 0) return 1;
  if (!file) return 0;
  const char *base = strrchr(file, '/');
  base = base ? base + 1 : file;
  return strncmp(base, "libnccl-net-tcpx", 16) == 0 || strcasestr(base, "gpudirecttcpx") != NULL;
}

/* The value as a long, or 0 when it is no number (the plugin's loader then
 * keeps its default, which for every row here is the unsafe one). */
static long num(const char *v) {
  if (!v) return 0;
  errno = 0;
  char *end = NULL;
  long x = strtol(v, &end, 0);
  return errno || end == v ? 0 : x;
}

static const char *danger(const struct var *v, const char *value) {
  if (v->bad_below == LONG_MIN) return NULL;
  return num(value) < v->bad_below ? v->bad : NULL;
}

int tpx__tcpx_env_apply(const char *who) {
  int n = 0;
  for (int i = 0; i < NVARS; i++) {
    const char *cur = getenv(vars[i].name);
    if (cur == NULL) {
      if (setenv(vars[i].name, vars[i].safe, 0) != 0) {
        TPX_WARN("%s: could not set %s=%s", who, vars[i].name, vars[i].safe);
        continue;
      }
      set_mask |= 1u << i;
      n++;
      TPX_INFO("%s: set %s=%s (%s)", who, vars[i].name, vars[i].safe, vars[i].why);
    } else if (danger(&vars[i], cur)) {
      TPX_WARN("%s: %s=%s is unsafe (%s); docs/CONFIG.md suggests %s", who, vars[i].name, cur,
               danger(&vars[i], cur), vars[i].safe);
    }
  }
  return n;
}

int tpx_net_tcpx_env(int i, tpx_net_env_t *r) {
  if (r == NULL) return tpx_err_quiet(TPX_EINVAL, "tpx_net_tcpx_env: NULL row");
  memset(r, 0, sizeof(*r));
  if (i < 0 || i >= NVARS) return TPX_ENOENT;
  r->name = vars[i].name;
  r->safe = vars[i].safe;
  r->value = getenv(vars[i].name);
  r->set_by_us = (set_mask >> i) & 1u;
  r->danger = danger(&vars[i], r->value);
  return 0;
}

long tpx__tcpx_env_chunk(void) {
  const char *v = getenv("NCCL_DYNAMIC_CHUNK_SIZE");
  if (!v) return 0;
  long x = num(v);
  return x >= 0 && x < INT_MAX ? x : 128 * 1024;
}
