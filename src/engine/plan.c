#include "engine/plan.h"

uint64_t tpx__plan_nchunks(const struct xent *ents, uint32_t n, uint32_t chunk) {
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t k = ents[i].len / chunk + (ents[i].len % chunk != 0);
    if (total + k < total) return UINT64_MAX;
    total += k;
  }
  return total;
}

static void skip_empty(const struct xent *ents, uint32_t n, struct cursor *c) {
  while (c->e < n && ents[c->e].len == 0) c->e++;
}

int tpx__plan_advance(const struct xent *ents, uint32_t n, uint32_t chunk, struct cursor *c, uint64_t k) {
  c->idx += k;
  while (k > 0 && c->e < n) {
    uint64_t rem = ents[c->e].len - c->off;
    uint64_t left = rem / chunk + (rem % chunk != 0); /* chunks left in this entry, incl. c */
    if (k < left) {
      c->off += k * chunk;
      return 1;
    }
    k -= left;
    c->e++;
    c->off = 0;
    skip_empty(ents, n, c);
  }
  return c->e < n;
}

void tpx__plan_seek(const struct xent *ents, uint32_t n, uint32_t chunk, uint64_t idx, struct cursor *c) {
  c->e = 0;
  c->off = 0;
  c->idx = 0;
  skip_empty(ents, n, c);
  tpx__plan_advance(ents, n, chunk, c, idx);
}
