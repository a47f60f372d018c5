#include "engine/plan.h"

static void skip_empty(const struct tpx__xent *ents, uint32_t n, struct tpx__cursor *c) {
  while (c->e < n && ents[c->e].len == 0) c->e++;
}

/* c->e < n, at a non-empty entry: the chunk's length and end entry. */
/* A remainder of rem bytes starts a packed chunk. */
static int packs(const struct tpx__cursor *c, uint64_t rem, uint32_t chunk) {
  return c->pmax && rem < chunk && rem <= c->pmax;
}

static void fill(const struct tpx__xent *ents, uint32_t n, uint32_t chunk, struct tpx__cursor *c) {
  uint64_t rem = ents[c->e].len - c->off;
  c->end = c->e + 1;
  if (!packs(c, rem, chunk)) {
    c->len = rem < chunk ? rem : chunk;
    return;
  }
  uint64_t len = rem;
  for (uint32_t j = c->e + 1; j < n; j++) {
    if (ents[j].len > c->pmax || ents[j].len > chunk - len) break; /* small entries, whole */
    len += ents[j].len;
    c->end = j + 1;
  }
  c->len = len;
}

uint64_t tpx__plan_nchunks(const struct tpx__xent *ents, uint32_t n, uint32_t chunk) {
  uint64_t total = 0;
  for (uint32_t i = 0; i < n; i++) {
    uint64_t k = ents[i].len / chunk + (ents[i].len % chunk != 0);
    if (total + k < total) return UINT64_MAX;
    total += k;
  }
  return total;
}

/* Step over the whole chunks of the entry at c (k at most), then over
 * packed chunks one at a time. Returns the chunks stepped. */
static uint64_t step(const struct tpx__xent *ents, uint32_t n, uint32_t chunk, struct tpx__cursor *c, uint64_t k) {
  uint64_t done = 0;
  while (done < k && c->e < n) {
    uint64_t rem = ents[c->e].len - c->off;
    if (packs(c, rem, chunk)) { /* a packed chunk: its entries end with it */
      fill(ents, n, chunk, c);
      c->e = c->end;
      c->off = 0;
      skip_empty(ents, n, c);
      done++;
      continue;
    }
    uint64_t tail = rem % chunk; /* after the whole chunks: a chunk alone, or the start of a packed one */
    uint64_t d = rem / chunk + (tail != 0 && !packs(c, tail, chunk)); /* chunks starting in this entry's rest */
    if (k - done < d) {
      c->off += (k - done) * chunk;
      return k;
    }
    done += d;
    c->off += d * chunk;
    if (c->off >= ents[c->e].len) {
      c->e++;
      c->off = 0;
      skip_empty(ents, n, c);
    }
  }
  return done;
}

uint64_t tpx__plan_nchunks_packed(const struct tpx__xent *ents, uint32_t n, uint32_t chunk, uint64_t pmax) {
  uint64_t plain = tpx__plan_nchunks(ents, n, chunk);
  if (!pmax || plain == UINT64_MAX) return plain; /* packing only ever merges chunks */
  struct tpx__cursor c = {0, 0, 0, 0, 0, pmax};
  skip_empty(ents, n, &c);
  return step(ents, n, chunk, &c, UINT64_MAX);
}

int tpx__plan_advance(const struct tpx__xent *ents, uint32_t n, uint32_t chunk, struct tpx__cursor *c, uint64_t k) {
  c->idx += k;
  step(ents, n, chunk, c, k);
  if (c->e >= n) return 0;
  fill(ents, n, chunk, c);
  return 1;
}

void tpx__plan_seek_packed(const struct tpx__xent *ents, uint32_t n, uint32_t chunk, uint64_t pmax, uint64_t idx,
                           struct tpx__cursor *c) {
  c->e = 0;
  c->off = 0;
  c->idx = 0;
  c->len = 0;
  c->end = 0;
  c->pmax = pmax;
  skip_empty(ents, n, c);
  tpx__plan_advance(ents, n, chunk, c, idx);
}
