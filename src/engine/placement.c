/* The endpoint's place in the machine (placement.h): the topology (src/topo)
 * asked about this endpoint's GPU and its transport's devices. */
#include "engine/placement.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "cuda/gpu.h"
#include "engine/core.h"
#include "topo/topo.h"

/* Device names in device order: the topology's NIC i is device i. */
static int device_names(tpx_endpoint_t *ep, char (*names)[TPX_TOPO_NAME_MAX], const char **ptrs) {
  for (int d = 0; d < ep->ndev; d++) {
    tpx_net_props_t pr;
    names[d][0] = '\0';
    if (ep->net->ops->get_properties(ep->net, d, &pr) == 0)
      snprintf(names[d], TPX_TOPO_NAME_MAX, "%.*s", TPX_TOPO_NAME_MAX - 1, pr.name);
    ptrs[d] = names[d];
  }
  return ep->ndev;
}

static void log_choice(const tpx_endpoint_t *ep, const tpx_topo_t *t, const tpx_topo_gpu_t *g) {
  char list[TPX_TOPO_MAX_NICS * (TPX_TOPO_NAME_MAX + 1)] = "";
  size_t len = 0;
  for (int i = 0; i < g->nnics; i++)
    len += (size_t)snprintf(list + len, sizeof(list) - len, "%s%s", i ? "," : "", t->nics[g->nics[i]].name);
  TPX_INFO("endpoint %s: GPU %d (%s, NUMA %d): channels on %s (%s)", ep->name, g->index,
           g->bus_id[0] ? g->bus_id : "bus id unknown", g->numa, len ? list : "every device",
           tpx_topo_why_str(g->why));
}

int tpx__placement_init(tpx_endpoint_t *ep) {
  ep->numa = -1;
  ep->nchdev = 0;
  /* One device and no map: nothing to choose (and no CUDA query). */
  if (ep->gpu < 0 || ep->gpu >= TPX_TOPO_MAX_GPUS || ep->ndev > TPX_TOPO_MAX_NICS ||
      (ep->ndev < 2 && ep->cfg.gpu_nic_map[0] == '\0'))
    return 0;
  char names[TPX_TOPO_MAX_NICS][TPX_TOPO_NAME_MAX], bus[TPX_TOPO_MAX_GPUS][TPX_TOPO_NAME_MAX];
  const char *nics[TPX_TOPO_MAX_NICS], *ids[TPX_TOPO_MAX_GPUS];
  tpx_topo_params_t q;
  tpx_topo_params_init(&q);
  q.nics = nics;
  q.nnics = device_names(ep, names, nics);
  int cnt = 0;
  char buf[64];
  for (int i = 0; i <= ep->gpu; i++) ids[i] = bus[i], bus[i][0] = '\0';
  if (tpx__gpu_device_count(&cnt) == 0 && ep->gpu < cnt && tpx__gpu_pci_bus_id(ep->gpu, buf, sizeof(buf)) == 0 &&
      tpx__topo_bus_id_norm(buf, bus[ep->gpu], TPX_TOPO_NAME_MAX) != 0)
    bus[ep->gpu][0] = '\0';
  q.gpu_bus_ids = ids;
  q.ngpus = ep->gpu + 1;
  q.map = ep->cfg.gpu_nic_map;
  tpx_topo_t *t = NULL;
  int rc = tpx__topo_detect(&q, &t);
  if (rc) return tpx_err(rc, "endpoint %s: %s", ep->name, tpx_last_error());
  const tpx_topo_gpu_t *g = &t->gpus[ep->gpu];
  ep->numa = g->numa;
  if (ep->ndev > 1)
    for (int i = 0; i < g->nnics; i++)
      ep->chdev[ep->nchdev++] = g->nics[i];
  log_choice(ep, t, g);
  tpx_topo_free(t);
  return 0;
}

int tpx__placement_dev(const tpx_endpoint_t *ep, int c) {
  int g = ep->gpu > 0 ? ep->gpu : 0;
  return ep->nchdev > 0 ? ep->chdev[(c + g) % ep->nchdev] : (c + g) % ep->ndev;
}

void tpx__placement_bind_thread(const tpx_endpoint_t *ep) {
  if (ep->numa >= 0 && tpx__numa_bind_thread(NULL, ep->numa) != 0)
    TPX_DEBUG("endpoint %s: progress thread left unpinned (NUMA node %d)", ep->name, ep->numa);
}
