/* Connects a closing channel leaves behind. A channel whose transport
 * connect is still in progress when it closes (its peer failed or closed
 * during setup) hands the connect on instead of forgetting it: a transport
 * that can give a connect up (net op connect_abort: the built-in one) closes
 * its sockets at once; for one that cannot (ncclNet plugins) the endpoint
 * keeps the handle buffer and calls connect on it until it returns a comm,
 * which is closed, or an error, or TPX_CONNECT_TIMEOUT_MS passed (then it is
 * the plugin's, logged once). Until then the endpoint owns it, so no
 * connect outlives its owner holding sockets (docs/SECURITY.md). Lock held. */
#ifndef TPX_ENGINE_ABANDON_H
#define TPX_ENGINE_ABANDON_H

#include <stdint.h>

#include "tpx/endpoint.h"

struct tpx_peer;
struct tpx__channel;

/* ch's connect is in progress (ch->dial->started): end it or take it over. */
void tpx__abandon_connect(struct tpx_peer *p, struct tpx__channel *ch);
/* Drive the connects taken over (from the periodic scan). */
void tpx__abandon_step(tpx_endpoint_t *ep, uint64_t now);
/* Endpoint destroy: those still going are left to the transport. */
void tpx__abandon_free_all(tpx_endpoint_t *ep);

#endif
