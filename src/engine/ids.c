/* Transfer ids (op.h): the slot index in the low half, a generation in the
 * high half, so a late or forged id never matches a recycled slot. */
#include <stdlib.h>
#include <string.h>

#include "engine/ids.h"

uint64_t tpx__id_register(struct tpx_peer *p, struct tpx__op *o) {
  uint32_t i = p->ids_free_hint;
  while (i < p->ids_cap && p->ids[i].op) i++;
  if (i >= p->ids_cap) {
    uint32_t ncap = p->ids_cap ? p->ids_cap * 2 : 64;
    struct tpx__id_slot *n = realloc(p->ids, ncap * sizeof(*n));
    if (!n) return 0;
    memset(n + p->ids_cap, 0, (ncap - p->ids_cap) * sizeof(*n));
    p->ids = n;
    i = p->ids_cap;
    p->ids_cap = ncap;
  }
  p->ids[i].op = o;
  if (++p->ids[i].gen == 0) p->ids[i].gen = 1;
  p->ids_free_hint = i + 1;
  o->id_reg = 1;
  return ((uint64_t)p->ids[i].gen << 32) | i;
}

struct tpx__op *tpx__id_lookup(struct tpx_peer *p, uint64_t id) {
  uint32_t i = (uint32_t)id, gen = (uint32_t)(id >> 32);
  if (i < p->ids_cap && p->ids[i].op && p->ids[i].gen == gen) return p->ids[i].op;
  return NULL;
}

void tpx__id_unregister(struct tpx_peer *p, uint64_t id) {
  uint32_t i = (uint32_t)id;
  if (i < p->ids_cap && p->ids[i].gen == (uint32_t)(id >> 32)) {
    p->ids[i].op = NULL;
    if (i < p->ids_free_hint) p->ids_free_hint = i;
  }
}

/* ---- a transfer as both sides name it (failover.h, integrity.h) ---- */
int tpx__op_sends_data(const struct tpx__op *o) {
  return o->kind == K_WRITE || o->kind == K_SERVE_READ || o->kind == K_SEND;
}

uint8_t tpx__op_what(const struct tpx__op *o) {
  switch (o->kind) {
  case K_WRITE:
  case K_IN_WRITE: return ST_WRITE;
  case K_READ:
  case K_SERVE_READ: return ST_READ;
  default: return ST_SEND;
  }
}

uint64_t tpx__op_key(const struct tpx__op *o) { return o->kind == K_SEND ? o->match_id : o->id; }

struct tpx__op *tpx__op_find(struct tpx_peer *p, uint8_t what, uint64_t id, int sender) {
  for (struct tpx__op *o = p->active; o; o = o->next)
    if (o->kind != K_NOTIF && tpx__op_sends_data(o) == sender && tpx__op_what(o) == what && tpx__op_key(o) == id) return o;
  return NULL;
}
