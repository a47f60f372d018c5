/* Progress: one pass over an endpoint (control events, setups, every
 * window, deadlines), the idle policy, the optional progress thread, and the
 * one wait loop every blocking call uses. */
#ifndef TPX_ENGINE_PROGRESS_H
#define TPX_ENGINE_PROGRESS_H

#include <stdint.h>

#include "tpx/endpoint.h"

/* One pass, lock held. Returns the work done (0: nothing moved). */
int tpx__ep_pass(tpx_endpoint_t *ep);

/* Wait, lock held, until pred(ep, arg) is true or the deadline passes
 * (UINT64_MAX: no deadline). With a progress thread the caller first spins
 * briefly driving progress itself (short answers come faster than a
 * sleep/wake-up), then sleeps on the condition variable; without one it
 * drives progress all along. Returns pred's final value. */
int tpx__ep_wait(tpx_endpoint_t *ep, int (*pred)(tpx_endpoint_t *, void *), void *arg, uint64_t deadline);

int tpx__progress_thread_start(tpx_endpoint_t *ep);
void tpx__progress_thread_stop(tpx_endpoint_t *ep);

#endif
