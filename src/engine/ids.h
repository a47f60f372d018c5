/* Ids of a peer's operations: how a control message names the op it is
 * about. */
#ifndef TPX_ENGINE_IDS_H
#define TPX_ENGINE_IDS_H

#include <stdint.h>

#include "engine/core.h"

/* Slot index in the low half, generation in the high half, so a late
 * or forged id never matches a recycled slot. 0 when out of memory. */
uint64_t tpx__id_register(struct tpx_peer *p, struct tpx__op *o);
struct tpx__op *tpx__id_lookup(struct tpx_peer *p, uint64_t id);
void tpx__id_unregister(struct tpx_peer *p, uint64_t id);
/* A transfer as both sides name it in MSG_CHAN and MSG_SUM: what
 * (wire_status_what) and key, the initiator's id for one-sided requests, the
 * receive's for two-sided ones. sends_data: o is the data's sender. find: the
 * op in p's active list with that name and role, or NULL. */
int tpx__op_sends_data(const struct tpx__op *o);
uint8_t tpx__op_what(const struct tpx__op *o);
uint64_t tpx__op_key(const struct tpx__op *o);
struct tpx__op *tpx__op_find(struct tpx_peer *p, uint8_t what, uint64_t id, int sender);

#endif
