/* TPX_GPU_NIC_MAP: a static GPU -> NIC map that overrides the detected
 * topology (src/topo/topo.h). Syntax: entries separated by ';', each a GPU
 * set, ':', and a comma-separated list of interface names:
 *
 *   0-3:eth1,eth2;4-7:eth3,eth4      GPUs 0..3 on eth1 and eth2, 4..7 on eth3 and eth4
 *   0,2:eth1;1,3:eth2                a GPU set is indices and ranges, comma-separated
 *
 * Blanks around items are trimmed and empty entries skipped. A GPU may appear
 * in one entry only. Parsed here for config.c (the environment) and for the
 * topology (values set in code), so both apply the same checks. */
#ifndef TPX_COMMON_GPUMAP_H
#define TPX_COMMON_GPUMAP_H

#include <stdint.h>

#include "common/ifname.h"

#define TPX_GPUMAP_MAX_GPUS 64 /* GPU indices 0..63 */
#define TPX_GPUMAP_MAX_ENTRIES 16
#define TPX_GPUMAP_MAX_NICS 16 /* names per entry */

typedef struct tpx_gpumap_entry {
  uint64_t gpus; /* bit g: GPU g */
  int nnics;
  char nics[TPX_GPUMAP_MAX_NICS][TPX_IFNAME_LEN];
} tpx_gpumap_entry_t;

typedef struct tpx_gpumap {
  int n; /* 0: no map */
  tpx_gpumap_entry_t e[TPX_GPUMAP_MAX_ENTRIES];
} tpx_gpumap_t;

/* Parse s (NULL or blank: no map). 0, or TPX_EINVAL with a quiet detail
 * (tpx_last_error) that quotes the bad part; the caller decides how loudly
 * to fail. */
int tpx__gpumap_parse(const char *s, tpx_gpumap_t *out);

/* The entry that lists GPU g, or NULL. */
const tpx_gpumap_entry_t *tpx__gpumap_find(const tpx_gpumap_t *m, int g);

#endif
