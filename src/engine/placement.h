/* Where an endpoint sits in the machine (docs/TOPOLOGY.md): which of the
 * transport's devices its channels use (its GPU's nearest NICs, or
 * TPX_GPU_NIC_MAP), and the NUMA node its progress thread and staging go on. */
#ifndef TPX_ENGINE_PLACEMENT_H
#define TPX_ENGINE_PLACEMENT_H

#include "tpx/endpoint.h"

/* Fill ep->chdev / ep->nchdev and ep->numa after the transport is open
 * (ep->ndev known). With one device and no map nothing changes (ep->nchdev
 * 0, ep->numa -1); with no topology information neither. Errors: a bad or
 * inapplicable TPX_GPU_NIC_MAP (TPX_EINVAL, logged here). */
int tpx__placement_init(tpx_endpoint_t *ep);

/* The net device of channel c: (c + gpu) over the GPU's devices when the
 * topology named them, else over all devices. */
int tpx__placement_dev(const tpx_endpoint_t *ep, int c);

/* Called first thing on the progress thread: onto ep->numa's CPUs, if known. */
void tpx__placement_bind_thread(const tpx_endpoint_t *ep);

#endif
