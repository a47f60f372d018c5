/* Dial policy: before the transport connects to the listen handles a peer
 * sent in its HELLO (or HELLO_ACK), every handle must name an address we
 * accept, and together they may ask for a bounded number of connections.
 * Accepted: the address the control connection came from; any of this
 * host's addresses when the peer itself is on this host (it could reach
 * them anyway); an address in TPX_ALLOW_DIAL. Transports whose handles are
 * opaque (ncclNet plugins: no handle_dials op) are not checked beyond the
 * channel count; docs/SECURITY.md says why. Lock held. */
#ifndef TPX_ENGINE_DIAL_H
#define TPX_ENGINE_DIAL_H

#include <stdint.h>

struct tpx_peer;

/* 0, or an error (tpx_err_quiet detail) naming the handle and the address;
 * nothing has been dialled either way. */
int tpx__dial_check(struct tpx_peer *p, const uint8_t *handles, int n);

#endif
