/* A lost channel comes back (failover.h): re-established in the background,
 * with a pause that doubles after each failed attempt, once its link answers
 * again. Either side starts an attempt when its pause is over, or when the
 * peer's fresh handle arrives: it listens anew and sends its handle
 * (CHAN_REJOIN); each connects to the other's. A side whose two comms are up
 * says so (CHAN_UP) and from then on waits for the peer's UP (the channel
 * rejoins: the next pattern includes it) or CHAN_DOWN (the peer gave the
 * attempt up: so does it). A side that is not up when the attempt's time
 * runs out gives it up and says CHAN_DOWN. */
#ifndef TPX_ENGINE_REJOIN_H
#define TPX_ENGINE_REJOIN_H

#include <stdint.h>

#include "engine/wire.h"

struct tpx_peer;

#define REJOIN_FIRST_MS 1000   /* the first attempt, after the loss */
#define REJOIN_MAX_MS 8000     /* the longest pause between attempts */
#define REJOIN_ATTEMPT_MS 3000 /* an attempt's connect and accept, at most */

/* Attempts due, comms coming up. 0, or < 0 when the peer cannot go on. */
int tpx__rejoin_tick(struct tpx_peer *p, uint64_t now);
/* CHAN_REJOIN, CHAN_UP, and CHAN_DOWN for a channel already lost. */
int tpx__rejoin_on_frame(struct tpx_peer *p, const struct tpx__wire_chan *m);

#endif
