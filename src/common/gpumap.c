/* TPX_GPU_NIC_MAP parsing (gpumap.h). Pure functions. */
#include "common/gpumap.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"

#define BAD(...) tpx_err_quiet(TPX_EINVAL, "TPX_GPU_NIC_MAP: " __VA_ARGS__)

/* [*a, *b) without surrounding blanks. */
static void trim(const char **a, const char **b) {
  while (*a < *b && isspace((unsigned char)**a))
    (*a)++;
  while (*b > *a && isspace((unsigned char)(*b)[-1]))
    (*b)--;
}

/* A GPU index 0..63 filling exactly [a, b). */
static int gpu_index(const char *a, const char *b, int *out) {
  trim(&a, &b);
  if (a == b || b - a > 2) return TPX_EINVAL;
  int v = 0;
  for (const char *c = a; c < b; c++) {
    if (!isdigit((unsigned char)*c)) return TPX_EINVAL;
    v = v * 10 + (*c - '0');
  }
  if (v >= TPX_GPUMAP_MAX_GPUS) return TPX_EINVAL;
  *out = v;
  return 0;
}

/* "0-3", "5" or "0,2,4-5" -> bits; ent is the whole entry, for messages. */
static int parse_gpus(const char *a, const char *b, int elen, const char *ent, uint64_t *bits) {
  *bits = 0;
  while (a < b) {
    const char *comma = memchr(a, ',', (size_t)(b - a));
    const char *e = comma ? comma : b;
    const char *dash = memchr(a, '-', (size_t)(e - a));
    int lo, hi;
    if (gpu_index(a, dash ? dash : e, &lo) != 0 || (dash && gpu_index(dash + 1, e, &hi) != 0))
      return BAD("'%.*s' in '%.*s' is not a GPU index or range (0..%d)", (int)(e - a), a, elen, ent,
                 TPX_GPUMAP_MAX_GPUS - 1);
    if (!dash) hi = lo;
    if (hi < lo) return BAD("range '%.*s' in '%.*s' runs backwards", (int)(e - a), a, elen, ent);
    for (int g = lo; g <= hi; g++)
      *bits |= 1ull << g;
    a = comma ? comma + 1 : b;
  }
  if (*bits == 0) return BAD("'%.*s' names no GPU before ':'", elen, ent);
  return 0;
}

static int parse_nics(const char *a, const char *b, int elen, const char *ent, tpx_gpumap_entry_t *e) {
  while (a < b) {
    const char *comma = memchr(a, ',', (size_t)(b - a));
    const char *x = a, *y = comma ? comma : b;
    trim(&x, &y);
    if (y > x) {
      if (y - x >= TPX_IFNAME_LEN)
        return BAD("'%.*s' in '%.*s' is longer than an interface name (%d characters)", (int)(y - x), x,
                   elen, ent, TPX_IFNAME_LEN - 1);
      if (e->nnics >= TPX_GPUMAP_MAX_NICS)
        return BAD("'%.*s' lists more than %d interfaces", elen, ent, TPX_GPUMAP_MAX_NICS);
      memcpy(e->nics[e->nnics], x, (size_t)(y - x));
      e->nics[e->nnics][y - x] = '\0';
      e->nnics++;
    }
    a = comma ? comma + 1 : b;
  }
  if (e->nnics == 0) return BAD("'%.*s' names no interface after ':'", elen, ent);
  return 0;
}

static int parse_entry(const char *a, const char *b, tpx_gpumap_t *m) {
  int elen = (int)(b - a);
  const char *colon = memchr(a, ':', (size_t)(b - a));
  if (!colon) return BAD("'%.*s' has no ':' between GPUs and interfaces", elen, a);
  if (m->n >= TPX_GPUMAP_MAX_ENTRIES) return BAD("more than %d entries", TPX_GPUMAP_MAX_ENTRIES);
  tpx_gpumap_entry_t *e = &m->e[m->n];
  memset(e, 0, sizeof(*e));
  int rc = parse_gpus(a, colon, elen, a, &e->gpus);
  if (rc == 0) rc = parse_nics(colon + 1, b, elen, a, e);
  if (rc) return rc;
  for (int i = 0; i < m->n; i++) {
    uint64_t both = m->e[i].gpus & e->gpus;
    if (both) return BAD("GPU %d appears twice (again in '%.*s')", __builtin_ctzll(both), elen, a);
  }
  m->n++;
  return 0;
}

int tpx__gpumap_parse(const char *s, tpx_gpumap_t *out) {
  memset(out, 0, sizeof(*out));
  const char *p = s ? s : "", *end = p + strlen(p);
  while (p < end) {
    const char *semi = memchr(p, ';', (size_t)(end - p));
    const char *a = p, *b = semi ? semi : end;
    trim(&a, &b);
    int rc = a < b ? parse_entry(a, b, out) : 0;
    if (rc) {
      memset(out, 0, sizeof(*out));
      return rc;
    }
    p = semi ? semi + 1 : end;
  }
  return 0;
}

const tpx_gpumap_entry_t *tpx__gpumap_find(const tpx_gpumap_t *m, int g) {
  if (m == NULL || g < 0 || g >= TPX_GPUMAP_MAX_GPUS) return NULL;
  for (int i = 0; i < m->n; i++)
    if (m->e[i].gpus & (1ull << g)) return &m->e[i];
  return NULL;
}
