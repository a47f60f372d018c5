/* Memory registration and public memory descriptors.
 *
 * A registration (tpx_mem_t) makes a buffer usable for transfers. Its access
 * flags say what REMOTE peers may do with it: TPX_ACCESS_READ lets them read
 * it (tpx one-sided read), TPX_ACCESS_WRITE lets them write into it. Local use
 * (source of our writes/sends, destination of our reads/recvs) needs no flag.
 *
 * The public descriptor is an opaque blob (region identity, address, length,
 * access, memory type, owner endpoint) that the owner hands to peers out of
 * band or in a notification; peers turn it into a tpx_rmem_t with
 * tpx_load_remote_md. The owner checks every remote access against its own
 * registrations, so a forged or stale descriptor cannot reach other memory.
 *
 * The transport registration (regMr) happens lazily per comm, split into
 * pieces that fit the v7 int-size limit.
 */
#ifndef TPX_MEM_H
#define TPX_MEM_H

#include <stddef.h>
#include <stdint.h>

#include "tpx/endpoint.h"
#include "tpx/export.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct tpx_mem tpx_mem_t;
typedef struct tpx_rmem tpx_rmem_t;

typedef enum tpx_mem_type { TPX_MEM_HOST = 0, TPX_MEM_CUDA = 1 } tpx_mem_type_t;

enum tpx_access { TPX_ACCESS_READ = 0x1, TPX_ACCESS_WRITE = 0x2 };

#define TPX_MD_MAX 128 /* upper bound of a public descriptor blob */

typedef struct tpx_mem_desc {
  void *addr;
  size_t len;           /* > 0 */
  tpx_mem_type_t type;  /* TPX_MEM_CUDA: device memory (cudaMalloc); TPX_ENOTSUP in builds
                           without CUDA or without a usable GPU */
  int device;           /* CUDA device ordinal for TPX_MEM_CUDA (-1: the pointer's own), else ignored */
  unsigned access;      /* TPX_ACCESS_* bits granted to remote peers */
} tpx_mem_desc_t;

TPX_API int tpx_mem_register(tpx_endpoint_t *ep, const tpx_mem_desc_t *desc, tpx_mem_t **out);
/* TPX_EAGAIN while this endpoint's transfers (prepared or in flight, freed
 * handles included) still use it. Peers' requests into or from it are waited
 * for (a stalled peer's fail at their deadline, TPX_TIMEOUT_MS); TPX_EAGAIN
 * if a peer still uses it after that. Once it returned 0 nothing writes into
 * the memory any more (docs/SECURITY.md). */
TPX_API int tpx_mem_deregister(tpx_mem_t *mem);

/* Serialise the public descriptor into buf (cap >= TPX_MD_MAX is always enough). */
TPX_API int tpx_mem_get_public_data(const tpx_mem_t *mem, void *buf, size_t cap, size_t *len);
/* Parse a descriptor blob from a peer. TPX_EPROTO / TPX_EVERSION on a bad blob. */
TPX_API int tpx_load_remote_md(const void *blob, size_t len, tpx_rmem_t **out);
TPX_API void tpx_rmem_free(tpx_rmem_t *rmem);
TPX_API uint64_t tpx_rmem_addr(const tpx_rmem_t *rmem); /* the owner's virtual address */
TPX_API size_t tpx_rmem_len(const tpx_rmem_t *rmem);
TPX_API unsigned tpx_rmem_access(const tpx_rmem_t *rmem);

#ifdef __cplusplus
}
#endif
#endif
