/* NCCL_SOCKET_IFNAME parsing and matching (ifname.h). Pure functions. */
#include "common/ifname.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"

static int has_prefix(const char *s, const char *prefix) {
  return strncmp(s, prefix, strlen(prefix)) == 0;
}

int tpx__ifname_parse(const char *spec, tpx_ifname_spec_t *out) {
  memset(out, 0, sizeof(*out));
  const char *p = spec ? spec : "", *end = p + strlen(p);
  while (p < end && isspace((unsigned char)*p))
    p++;
  while (end > p && isspace((unsigned char)end[-1]))
    end--;
  if (end - p <= 1) { /* NCCL ignores values of one character */
    out->automatic = 1;
    return 0;
  }
  if (*p == '^') out->exclude = 1, p++;
  if (p < end && *p == '=') out->exact = 1, p++;
  while (p < end) {
    const char *comma = memchr(p, ',', (size_t)(end - p));
    const char *next = comma ? comma + 1 : end;
    const char *a = p, *b = comma ? comma : end;
    const char *colon = memchr(a, ':', (size_t)(b - a));
    if (colon) b = colon; /* NCCL's port suffix */
    while (a < b && isspace((unsigned char)*a))
      a++;
    while (b > a && isspace((unsigned char)b[-1]))
      b--;
    size_t len = (size_t)(b - a);
    if (len > 0) {
      if (len >= TPX_IFNAME_LEN)
        return tpx_err(TPX_EINVAL, "interface list '%s': '%.*s' is longer than %d characters", spec,
                       (int)len, a, TPX_IFNAME_LEN - 1);
      if (out->n >= TPX_IFNAME_MAX_ITEMS)
        return tpx_err(TPX_EINVAL, "interface list '%s': more than %d names", spec,
                       TPX_IFNAME_MAX_ITEMS);
      memcpy(out->names[out->n], a, len);
      out->names[out->n][len] = '\0';
      out->n++;
    }
    p = next;
  }
  return 0;
}

static int auto_tier(const char *name) {
  if (has_prefix(name, "ib")) return TPX_IFNAME_TIER_IB;
  if (has_prefix(name, "docker")) return TPX_IFNAME_TIER_DOCKER;
  if (has_prefix(name, "lo")) return TPX_IFNAME_TIER_LO;
  if (has_prefix(name, "virbr")) return TPX_IFNAME_TIER_VIRBR;
  return TPX_IFNAME_TIER_OTHER;
}

int tpx__ifname_tier(const tpx_ifname_spec_t *s, const char *name) {
  if (s->automatic) return auto_tier(name);
  int hit = 0;
  for (int i = 0; i < s->n && !hit; i++)
    hit = s->exact ? strcmp(name, s->names[i]) == 0 : has_prefix(name, s->names[i]);
  return hit != s->exclude ? 0 : -1;
}

int tpx__ifname_match(const char *spec, const char *name) {
  tpx_ifname_spec_t s;
  int rc = tpx__ifname_parse(spec, &s);
  if (rc != 0) return rc;
  int t = tpx__ifname_tier(&s, name);
  return t >= 0 && t <= TPX_IFNAME_TIER_OTHER;
}

int tpx__ifname_select(const char *spec, const char *const *names, int n, unsigned char *sel) {
  tpx_ifname_spec_t s;
  int rc = tpx__ifname_parse(spec, &s);
  if (rc != 0) return rc;
  int best = -1;
  for (int i = 0; i < n; i++) {
    int t = tpx__ifname_tier(&s, names[i]);
    if (t >= 0 && (best < 0 || t < best)) best = t;
  }
  int cnt = 0;
  for (int i = 0; i < n; i++) {
    sel[i] = best >= 0 && tpx__ifname_tier(&s, names[i]) == best;
    cnt += sel[i];
  }
  return cnt;
}

void tpx__ifname_none(const char *spec, int malformed, const char *kind, const char *const *names, int n, char *buf,
                      size_t cap) {
  char have[512] = "";
  size_t used = 0;
  int shown = 0;
  for (int i = 0; i < n && used + 1 < sizeof(have); i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = strcmp(names[j], names[i]) == 0;
    if (seen) continue;
    used += (size_t)snprintf(have + used, sizeof(have) - used, "%s%s", shown++ ? ", " : "", names[i]);
  }
  if (!spec || strlen(spec) <= 1) /* no list: NCCL's automatic choice found nothing */
    snprintf(buf, cap, "no interface is %s (TPX_SOCKET_IFNAME unset: %s); interfaces: %s", kind,
             TPX_IFNAME_DEFAULT_DESC, shown ? have : "none");
  else
    snprintf(buf, cap, "TPX_SOCKET_IFNAME '%s' (or NCCL_SOCKET_IFNAME when that is unset) %s this machine's "
             "interfaces that are %s: %s (syntax: docs/CONFIG.md)", spec,
             malformed ? "is malformed; it is matched against" : "selects none of", kind, shown ? have : "none");
}
