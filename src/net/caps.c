/* Transport capabilities, asked once (caps.h): the one place that decides
 * what a transport is like, from what it reports about itself. */
#define _GNU_SOURCE /* strcasestr */
#include "net/caps.h"

#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "tcpx/contract.h"

/* Last resort, for the one property a HOST-type device cannot report: a
 * GPUDirect-TCPX build without receive offload still allows only 16 requests
 * per comm, and only its name says what it is. The real v7 plugin reports
 * UNPACK devices, which is the signal used first (docs/ARCHITECTURE.md). */
static int name_is_tcpx(const char *name) {
  return strcasestr(name, "tcpx") != NULL;
}

int tpx__net_cuda_reg_needs_pci(const tpx_net_t *net) {
  return !net->caps.builtin && net->caps.cuda_ptr && strcasestr(net->name, "gpudirecttcpx") != NULL;
}

int tpx__net_caps_init(tpx_net_t *net, int builtin, int strict) {
  memset(&net->caps, 0, sizeof(net->caps));
  tpx_net_caps_t c = {0};
  int ndev = 0;
  int rc = net->ops->devices(net, &ndev);
  if (rc != 0) return tpx_err_quiet(rc, "transport %s: devices: %s", net->name, tpx_last_error());
  c.host_ptr = c.cuda_ptr = ndev > 0;
  for (int d = 0; d < ndev; d++) {
    tpx_net_props_t pr;
    memset(&pr, 0, sizeof(pr));
    rc = net->ops->get_properties(net, d, &pr);
    if (rc != 0)
      return tpx_err_quiet(rc, "transport %s: properties of device %d: %s", net->name, d,
                     tpx_last_error());
    if (pr.dev_type == TPX_NET_DEV_UNPACK) c.unpack = 1;
    if (!(pr.ptr_support & TPX_PTR_HOST)) c.host_ptr = 0;
    if (!(pr.ptr_support & TPX_PTR_CUDA)) c.cuda_ptr = 0;
  }
  c.builtin = builtin != 0;
  c.flush = net->ops->iflush != NULL;
  int tcpx = c.unpack || strict || (!builtin && name_is_tcpx(net->name));
  c.max_requests = tcpx ? TPX_TCPX_MAX_REQUESTS : TPX_NET_NCCL_MAX_REQUESTS;
  /* Vectored requests keep nothing of the TCPX contract: never where it is
   * emulated or spoken. */
  c.iov = net->ops->isendv != NULL && net->ops->irecvv != NULL && !tcpx && c.host_ptr;
  net->caps = c;
  TPX_DEBUG("transport %s: %d requests per comm%s%s%s%s%s%s", net->name, c.max_requests,
            c.unpack ? ", UNPACK" : "", c.host_ptr ? ", host pointers" : "",
            c.cuda_ptr ? ", CUDA pointers" : "", c.flush ? ", iflush" : "",
            c.builtin ? ", built in" : "", c.iov ? ", iovec requests" : "");
  return 0;
}
