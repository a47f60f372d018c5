/* Filling tpx_net_t.caps (tpx/net.h) once, when a transport is opened. */
#ifndef TPX_NET_CAPS_H
#define TPX_NET_CAPS_H

#include "tpx/net.h"

/* Work out net->caps from net->ops (devices, get_properties, iflush) and
 * net->name. builtin: net is the built-in transport; strict: it enforces the
 * TCPX plugin's rules (the built-in's strict or unpack mode). Returns 0, or
 * the code of the devices / get_properties call that failed (net->caps is
 * then all zero). */
int tpx__net_caps_init(tpx_net_t *net, int builtin, int strict);

/* net is Google's GPUDirect-TCPX plugin by name (not our emulation of it),
 * whose CUDA regMr reads the NIC's PCI path without checking it is there
 * (net_tcpx.cc, tcpxRegMr: strrchr(pci_path, '/')): a device without one
 * (lo, veth) crashes the process there. docs/A3HIGH.md. */
int tpx__net_cuda_reg_needs_pci(const tpx_net_t *net);
/* net takes vectored requests: its caps say so and it has both calls (a
 * wrapper that copies the caps but not those calls takes none). */
static inline int tpx__net_iov_ok(const tpx_net_t *net) {
  return net->caps.iov && net->ops->isendv != NULL && net->ops->irecvv != NULL;
}

#endif
