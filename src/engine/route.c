/* Where each chunk of a transfer travels (route.h): patterns, layers, and
 * each window link's walk over its chunks. */
#include "engine/route.h"

#include <string.h>

#include "tpx/error.h"

void tpx__route_pat_fixed(struct tpx__route_pat *pat, int n) {
  if (n < 1) n = 1;
  if (n > ROUTE_MAX_PAT) n = ROUTE_MAX_PAT;
  pat->len = (uint8_t)n;
  for (int c = 0; c < n; c++) pat->ch[c] = (uint8_t)c;
}

int tpx__route_pat_weighted(struct tpx__route_pat *pat, const uint32_t *w, int n) {
  int live = 0;
  for (int c = 0; c < n && c < ROUTE_MAX_PAT; c++) live += w[c] != 0;
  if (!live) return TPX_EINVAL;
  /* Slots one at a time, each to the channel that would finish its share
   * soonest with it ((slots + 1) / weight smallest): the slowest channel
   * sets the transfer's end, so rounding never favours a slow one. Then at
   * least one each (a slow channel keeps being measured), taken from the
   * channel with the most. */
  uint32_t slots[ROUTE_MAX_PAT] = {0};
  int total = ROUTE_MAX_PAT;
  for (int k = 0; k < total; k++) {
    int best = -1;
    for (int c = 0; c < n && c < ROUTE_MAX_PAT; c++)
      if (w[c] && (best < 0 || (uint64_t)(slots[c] + 1) * w[best] < (uint64_t)(slots[best] + 1) * w[c])) best = c;
    slots[best]++;
  }
  for (int c = 0; c < n && c < ROUTE_MAX_PAT; c++) {
    if (!w[c] || slots[c]) continue;
    int most = 0;
    for (int d = 1; d < n && d < ROUTE_MAX_PAT; d++)
      if (slots[d] > slots[most]) most = d;
    slots[most]--;
    slots[c] = 1;
  }
  /* Smooth weighted round robin: each slot to the channel furthest behind
   * its share, so a channel's chunks are spread through the pattern. */
  int64_t cur[ROUTE_MAX_PAT] = {0};
  for (int k = 0; k < total; k++) {
    int best = -1;
    for (int c = 0; c < n && c < ROUTE_MAX_PAT; c++) {
      if (!slots[c]) continue;
      cur[c] += slots[c];
      if (best < 0 || cur[c] > cur[best]) best = c;
    }
    cur[best] -= total;
    pat->ch[k] = (uint8_t)best;
  }
  pat->len = (uint8_t)total;
  return 0;
}

int tpx__route_pat_valid(const struct tpx__route_pat *pat, int n) {
  if (pat->len < 1 || pat->len > ROUTE_MAX_PAT) return 0;
  for (int k = 0; k < pat->len; k++)
    if (pat->ch[k] >= n) return 0;
  return 1;
}

/* A resend layer's slot for chunk i: splitmix64, so that the dead channel's
 * chunks (every len-th index of a pattern) spread over the whole pattern. */
static uint32_t mix(uint64_t i, uint32_t seed) {
  uint64_t z = i + 0x9e3779b97f4a7c15ull * ((uint64_t)seed + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return (uint32_t)((z ^ (z >> 31)) >> 32);
}

static int layer0(const struct tpx__op *o, uint64_t i) { return o->pat.ch[(o->first_ch + i) % o->pat.len]; }

int tpx__route_ch_at(const struct tpx__op *o, uint64_t i, uint32_t layers) {
  int c = layer0(o, i);
  for (uint32_t k = 0; k < layers && k < o->nlayers; k++) {
    const struct tpx__route_layer *L = &o->layers[k];
    if (c == L->dead) c = L->pat.ch[mix(i, L->seed) % L->pat.len];
  }
  return c;
}

uint64_t tpx__route_count(const struct tpx__op *o, int ch) {
  uint64_t n = 0;
  if (o->nlayers == 0) { /* whole periods of the pattern, then the rest */
    uint64_t per = 0;
    for (int k = 0; k < o->pat.len; k++) per += o->pat.ch[k] == ch;
    uint64_t full = o->nchunks / o->pat.len;
    n = full * per;
    for (uint64_t i = full * o->pat.len; i < o->nchunks; i++) n += layer0(o, i) == ch;
    return n;
  }
  for (uint64_t i = 0; i < o->nchunks; i++) n += tpx__route_ch_at(o, i, o->nlayers) == ch;
  return n;
}

void tpx__route_totals(struct tpx__op *o) {
  for (uint32_t c = 0; c < o->nch; c++) o->links[c].total = o->nlayers ? 0 : tpx__route_count(o, (int)c);
  if (!o->nlayers) return;
  for (uint64_t i = 0; i < o->nchunks; i++) {
    int c = tpx__route_ch_at(o, i, o->nlayers);
    if ((uint32_t)c < o->nch) o->links[c].total++;
  }
}

/* Chunk i belongs to link l: layer 0's chunks on its channel, or those a
 * resend layer took from its dead channel and gave to l's. */
static int member(const struct tpx__op *o, const struct tpx__wlink *l, uint64_t i) {
  if (l->layer == 0) return layer0(o, i) == l->ch;
  const struct tpx__route_layer *L = &o->layers[l->layer - 1];
  if (tpx__route_ch_at(o, i, l->layer - 1u) != L->dead) return 0;
  return L->pat.ch[mix(i, L->seed) % L->pat.len] == l->ch;
}

/* The next chunk index of l at or after i, or nchunks. Layer 0 looks at most
 * one period ahead (a channel absent from the pattern has none). */
static uint64_t next_of(const struct tpx__op *o, const struct tpx__wlink *l, uint64_t i) {
  uint64_t end = o->nchunks;
  if (l->layer == 0) {
    uint64_t lim = i + o->pat.len;
    if (lim < end) end = lim;
  }
  for (; i < end; i++)
    if (member(o, l, i)) return i;
  return o->nchunks;
}

int tpx__route_first(const struct tpx__wlink *l, struct tpx__cursor *c) {
  const struct tpx__op *o = l->op;
  uint64_t i = next_of(o, l, 0);
  if (i >= o->nchunks) return 0;
  tpx__plan_seek_packed(o->ents, o->nents, o->chunk, o->pack_max, i, c);
  return 1;
}

int tpx__route_advance(const struct tpx__wlink *l, struct tpx__cursor *c) {
  const struct tpx__op *o = l->op;
  uint64_t i = next_of(o, l, c->idx + 1);
  if (i >= o->nchunks) return 0;
  return tpx__plan_advance(o->ents, o->nents, o->chunk, c, i - c->idx);
}
