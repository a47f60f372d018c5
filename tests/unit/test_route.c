/* Where chunks travel (src/engine/route.c): weighted patterns, the fixed
 * pattern's old rule, and resend layers that give every chunk of a lost
 * channel exactly one new place, walked the way the windows walk them. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/op.h"
#include "engine/window.h"
#include "testutil.h"

#define NCH 4
#define CHUNK 4096u

static struct tpx__xent ent;

static void op_init(struct tpx__op *o, uint64_t nchunks, uint32_t first) {
  memset(o, 0, sizeof(*o));
  ent.mem = NULL;
  ent.off = 0;
  ent.len = nchunks * CHUNK;
  o->ents = &ent;
  o->nents = 1;
  o->chunk = CHUNK;
  o->nchunks = nchunks;
  o->nch = NCH;
  o->first_ch = first;
  tpx__route_pat_fixed(&o->pat, NCH);
}

static void add_layer(struct tpx__op *o, int dead, const uint8_t *alive, int n, uint32_t seed) {
  o->layers = realloc(o->layers, (o->nlayers + 1) * sizeof(*o->layers));
  assert_non_null(o->layers);
  struct tpx__route_layer *L = &o->layers[o->nlayers++];
  memset(L, 0, sizeof(*L));
  L->dead = (uint8_t)dead;
  L->seed = seed;
  L->pat.len = (uint8_t)n;
  memcpy(L->pat.ch, alive, (size_t)n);
}

/* Walk link (layer, ch) as a window does; mark each chunk it yields. */
static void walk(struct tpx__op *o, int layer, int ch, uint8_t *seen) {
  struct tpx__wlink l;
  memset(&l, 0, sizeof(l));
  l.op = o;
  l.ch = (uint8_t)ch;
  l.layer = (uint8_t)layer;
  struct tpx__cursor c;
  if (!tpx__route_first(&l, &c)) return;
  do {
    assert_true(c.idx < o->nchunks);
    assert_int_equal(c.off, c.idx * CHUNK);
    seen[c.idx]++;
  } while (tpx__route_advance(&l, &c));
}

static void test_fixed_is_the_old_rule(void **st) {
  (void)st;
  struct tpx__op o;
  op_init(&o, 37, 2);
  for (uint64_t i = 0; i < o.nchunks; i++) assert_int_equal(tpx__route_ch_at(&o, i, o.nlayers), (int)((2 + i) % NCH));
  uint8_t seen[37] = {0};
  for (int c = 0; c < NCH; c++) walk(&o, 0, c, seen);
  for (int i = 0; i < 37; i++) assert_int_equal(seen[i], 1);
}

static void test_weighted_shares(void **st) {
  (void)st;
  uint32_t w[NCH] = {1000, 1000, 1000, 100}; /* one link at a tenth */
  struct tpx__route_pat p;
  assert_int_equal(tpx__route_pat_weighted(&p, w, NCH), 0);
  assert_int_equal(p.len, ROUTE_MAX_PAT);
  int n[NCH] = {0};
  for (int k = 0; k < p.len; k++) n[p.ch[k]]++;
  assert_true(n[3] >= 1 && n[3] <= 3);
  for (int c = 0; c < 3; c++) assert_true(n[c] >= 19 && n[c] <= 22);
  /* spread: no run of the slow channel, and the fast ones interleaved */
  for (int k = 1; k < p.len; k++) assert_false(p.ch[k] == 3 && p.ch[k - 1] == 3);
  uint32_t lost[NCH] = {1000, 0, 1000, 1000}; /* a lost channel gets no slot */
  assert_int_equal(tpx__route_pat_weighted(&p, lost, NCH), 0);
  for (int k = 0; k < p.len; k++) assert_int_not_equal(p.ch[k], 1);
  uint32_t none[NCH] = {0};
  assert_int_equal(tpx__route_pat_weighted(&p, none, NCH), TPX_EINVAL);
  assert_true(tpx__route_pat_valid(&p, NCH));
  p.ch[0] = NCH;
  assert_false(tpx__route_pat_valid(&p, NCH));
}

/* Two channels lost one after the other: every chunk still has exactly one
 * link, and none is on a lost channel. */
static void test_layers_cover_once(void **st) {
  (void)st;
  enum { N = 1000 };
  struct tpx__op o;
  op_init(&o, N, 1);
  uint64_t on2 = tpx__route_count(&o, 2);
  assert_int_equal(on2, N / NCH);
  const uint8_t a1[] = {0, 1, 3}, a2[] = {0, 3};
  add_layer(&o, 2, a1, 3, 7);
  assert_int_equal(tpx__route_count(&o, 2), 0);
  uint64_t on1 = tpx__route_count(&o, 1);
  add_layer(&o, 1, a2, 2, 99);
  assert_int_equal(tpx__route_count(&o, 1), 0);
  assert_int_equal(tpx__route_count(&o, 0) + tpx__route_count(&o, 3), N);
  assert_true(on1 > N / NCH); /* it had its own and some of 2's */
  uint8_t seen[N] = {0}, seen1[N] = {0};
  walk(&o, 1, 1, seen1); /* layer 1's chunks on 1: exactly those layer 2 moves again */
  for (uint64_t i = 0; i < N; i++) {
    int want = tpx__route_ch_at(&o, i, o.nlayers);
    assert_true(want == 0 || want == 3);
  }
  /* every link of the channels alive, each layer: each chunk once */
  walk(&o, 0, 0, seen);
  walk(&o, 0, 3, seen);
  walk(&o, 1, 0, seen);
  walk(&o, 1, 3, seen);
  walk(&o, 2, 0, seen);
  walk(&o, 2, 3, seen);
  /* base chunks of 1 and layer-1 chunks on 1 went to layer 2 */
  for (uint64_t i = 0; i < N; i++) assert_int_equal(seen[i], 1);
  for (uint64_t i = 0; i < N; i++)
    if (seen1[i]) assert_int_equal(tpx__route_ch_at(&o, i, 1), 1);
  free(o.layers);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_fixed_is_the_old_rule),
      cmocka_unit_test(test_weighted_shares),
      cmocka_unit_test(test_layers_cover_once),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
