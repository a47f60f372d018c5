/* Ids of a peer's operations: how a control message names the op it is
 * about. */
#ifndef TPX_ENGINE_IDS_H
#define TPX_ENGINE_IDS_H

#include <stdint.h>

#include "engine/core.h"

/* Slot index in the low half, generation in the high half, so a late
 * or forged id never matches a recycled slot. 0 when out of memory. */
uint64_t tpx__id_register(struct tpx_peer *p, struct op *o);
struct op *tpx__id_lookup(struct tpx_peer *p, uint64_t id);
void tpx__id_unregister(struct tpx_peer *p, uint64_t id);

#endif
