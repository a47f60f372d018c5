/* Internal side of the topology (the public API is include/tpx/topo.h):
 * detection with quiet errors for the engine, and NUMA placement of the
 * calling thread and of memory it allocates (numa.c), without libnuma. */
#ifndef TPX_TOPO_TOPO_H
#define TPX_TOPO_TOPO_H

#include <stddef.h>

#include "tpx/topo.h"

/* As tpx_topo_detect, errors recorded quietly (the caller decides). */
int tpx__topo_detect(const tpx_topo_params_t *p, tpx_topo_t **out);

/* "00000000:04:00.0" (CUDA's 8-digit domain) or "0000:04:00.0" ->
 * "0000:04:00.0", lower case. 0 or TPX_EINVAL. */
int tpx__topo_bus_id_norm(const char *in, char *out, size_t cap);

/* Pin the calling thread to NUMA node `node`'s CPUs
 * (<sysfs_root>/devices/system/node/node<N>/cpulist; NULL root = /sys),
 * as far as the thread may run there. 0 done; < 0 not done (node unknown
 * (-1), no such file, no allowed CPU there): the thread is left as it was. */
int tpx__numa_bind_thread(const char *sysfs_root, int node);

/* Parse a sysfs cpulist ("0-3,8-11\n") into set bits of cpus[0..ncpus). 
 * Returns the number of CPUs set, or TPX_EINVAL when malformed. */
int tpx__numa_parse_cpulist(const char *s, unsigned char *cpus, int ncpus);

/* Memory the calling thread allocates (first touch) between enter and leave
 * prefers NUMA node `node` (set_mempolicy MPOL_PREFERRED); leave restores the
 * thread's policy. No-op when node < 0 or the kernel refuses. */
typedef struct tpx_numa_pref {
  int active, mode;
  unsigned long mask[16]; /* up to 1024 nodes */
} tpx_numa_pref_t;
void tpx__numa_prefer_enter(int node, tpx_numa_pref_t *s);
void tpx__numa_prefer_leave(tpx_numa_pref_t *s);

#endif
