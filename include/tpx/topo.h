/* GPU-NIC topology: which network interfaces each GPU's channels use, and
 * why (docs/TOPOLOGY.md).
 *
 * Detected from sysfs: a GPU's PCI path comes from its PCI bus id (the CUDA
 * driver's, or given), a NIC's from /sys/class/net/<if>/device; both carry
 * their NUMA node (numa_node). Each GPU gets the NICs nearest to it: the
 * deepest common ancestor in the PCI tree (a shared switch beats a shared
 * root complex), then the same NUMA node; when several are equally near, all
 * of them, and the engine spreads the channels evenly over them.
 * TPX_GPU_NIC_MAP (tpx_config_t.gpu_nic_map) overrides the detection for the
 * GPUs it lists.
 *
 * An endpoint does this by itself for its GPU (tpx_endpoint_params.gpu) over
 * its transport's devices; this API is for tools (tpx-info) and for callers
 * that want to see the decision. Public, not in the tpx.h umbrella. */
#ifndef TPX_TOPO_H
#define TPX_TOPO_H

#include "tpx/export.h"

#ifdef __cplusplus
extern "C" {
#endif

#define TPX_TOPO_MAX_GPUS 64
#define TPX_TOPO_MAX_NICS 32
#define TPX_TOPO_PATH_MAX 256
#define TPX_TOPO_NAME_MAX 16 /* interface names and PCI bus ids */

/* tpx_topo_nic.numa / tpx_topo_gpu.numa when sysfs does not say. */
#define TPX_NUMA_UNKNOWN (-1)

/* Why a GPU got its NICs. */
enum tpx_topo_why {
  TPX_TOPO_NONE = 0, /* nothing known (no PCI path for the GPU or for any NIC): the engine's
                        default, channel c on device (c + gpu) % ndev */
  TPX_TOPO_MAP = 1,  /* TPX_GPU_NIC_MAP lists the GPU */
  TPX_TOPO_PCI = 2,  /* shares a PCI bridge (switch or root port) with its NICs */
  TPX_TOPO_HOST = 3, /* shares only the host bridge (root complex) with its NICs */
  TPX_TOPO_NUMA = 4, /* no shared PCI bridge; NICs on the GPU's NUMA node */
  TPX_TOPO_ANY = 5   /* every NIC equally far (NUMA unknown or none local): all of them */
};

typedef struct tpx_topo_nic {
  char name[TPX_TOPO_NAME_MAX];     /* interface name */
  char bus_id[TPX_TOPO_NAME_MAX];   /* "0000:06:00.0"; "" when it has no PCI device */
  char pci_path[TPX_TOPO_PATH_MAX]; /* "/devices/pci0000:00/.../0000:06:00.0" below the sysfs root */
  int numa;                         /* NUMA node, TPX_NUMA_UNKNOWN */
} tpx_topo_nic_t;

typedef struct tpx_topo_gpu {
  int index;                        /* CUDA device ordinal */
  char bus_id[TPX_TOPO_NAME_MAX];   /* "0000:04:00.0"; "" unknown */
  char pci_path[TPX_TOPO_PATH_MAX];
  int numa;                         /* NUMA node, TPX_NUMA_UNKNOWN */
  int why;                          /* enum tpx_topo_why */
  int depth;                        /* PCI path components shared with its NICs (PCI/HOST) */
  char via[TPX_TOPO_NAME_MAX];      /* the deepest shared component ("0000:02:00.0", "pci0000:00") */
  int nnics;                        /* 0 with TPX_TOPO_NONE */
  int nics[TPX_TOPO_MAX_NICS];      /* indices into tpx_topo_t.nics: in the order given
                                       (params.nics), or the map's order for TPX_TOPO_MAP */
} tpx_topo_gpu_t;

typedef struct tpx_topo {
  int ngpus, nnics;
  tpx_topo_gpu_t gpus[TPX_TOPO_MAX_GPUS];
  tpx_topo_nic_t nics[TPX_TOPO_MAX_NICS];
} tpx_topo_t;

typedef struct tpx_topo_params {
  const char *sysfs_root;         /* NULL: "/sys" (tests point it at a fake tree) */
  const char *const *nics;        /* candidate interfaces, e.g. the transport's devices */
  int nnics;
  const char *const *gpu_bus_ids; /* NULL: every GPU the CUDA driver sees (none without CUDA) */
  int ngpus;
  const char *map;                /* NULL: TPX_GPU_NIC_MAP from the environment; "": none */
} tpx_topo_params_t;

TPX_API void tpx_topo_params_init(tpx_topo_params_t *p);

/* Detect the topology. GPUs listed by the map but unknown otherwise are
 * included (by index). Errors: TPX_EINVAL (bad map, naming the bad part; a map
 * naming an interface not among p->nics; more than TPX_TOPO_MAX_* GPUs or
 * NICs), TPX_ENOMEM. A missing sysfs file is no error: that fact is unknown. */
TPX_API int tpx_topo_detect(const tpx_topo_params_t *p, tpx_topo_t **out);
TPX_API void tpx_topo_free(tpx_topo_t *t); /* NULL ok */

/* "pci", "map", ... for enum tpx_topo_why. */
TPX_API const char *tpx_topo_why_str(int why);

#ifdef __cplusplus
}
#endif
#endif
