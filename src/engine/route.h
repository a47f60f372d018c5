/* Where each chunk of a transfer travels: rules both sides compute, so no
 * per-chunk header travels with the data (the TCPX plugin's receive buffers
 * are GPU memory no CPU reads).
 *
 * Layer 0 is a pattern of channels: chunk i goes to pat[(first + i) % len].
 * The sender picks the pattern from each channel's measured speed (stripe.h)
 * and announces it (MSG_SCHED) before the transfers that use it; a peer
 * without adaptive striping gets the fixed pattern 0, 1, .., nch - 1, which
 * is the old rule chunk i on channel (first + i) % nch.
 *
 * A lost channel adds a layer (failover.h): every chunk the layers below
 * placed on the dead channel is placed anew, on pat[mix(i, seed) % len] of
 * the layer's own pattern (the channels then alive). Each layer queues its
 * own links at the end of each window, on both sides in the order of the
 * control stream, so the two ends of every channel see the same chunks in
 * the same order. struct tpx__route_pat and route_layer are core.h's. */
#ifndef TPX_ENGINE_ROUTE_H
#define TPX_ENGINE_ROUTE_H

#include <stdint.h>

#include "engine/core.h"

struct tpx__op;
struct tpx__wlink;

/* pat = 0, 1, .., n - 1. */
void tpx__route_pat_fixed(struct tpx__route_pat *pat, int n);
/* A pattern of at most ROUTE_MAX_PAT slots over the channels with w[c] > 0,
 * each getting slots in proportion to its weight (at least one), spread
 * evenly (smooth weighted round robin). 0, or TPX_EINVAL when no weight is
 * > 0. */
int tpx__route_pat_weighted(struct tpx__route_pat *pat, const uint32_t *w, int n);
/* The pattern names only channels below n, and at least one slot. */
int tpx__route_pat_valid(const struct tpx__route_pat *pat, int n);

/* Channel of chunk i after the first `layers` layers of o (0: layer 0 only;
 * o->nlayers: all of them). */
int tpx__route_ch_at(const struct tpx__op *o, uint64_t i, uint32_t layers);
/* Chunks of o whose channel is ch under all layers. */
uint64_t tpx__route_count(const struct tpx__op *o, int ch);
/* Each channel's count at once, into o->links[c].total (one pass). */
void tpx__route_totals(struct tpx__op *o);

/* The first chunk of link l (its layer's chunks on its channel): c set and
 * 1, or 0 when it has none. */
int tpx__route_first(const struct tpx__wlink *l, struct tpx__cursor *c);
/* Advance c to the next chunk of link l: 1, or 0 past its last. */
int tpx__route_advance(const struct tpx__wlink *l, struct tpx__cursor *c);

#endif
