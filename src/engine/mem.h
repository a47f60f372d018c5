/* Registrations: the id table peers' requests are checked against, and the
 * lazy per-comm transport registrations (split in pieces). Lock held for all.
 * struct tpx_mem is core.h's. */
#ifndef TPX_ENGINE_MEM_H
#define TPX_ENGINE_MEM_H

#include <stdint.h>

#include "engine/core.h"
#include "engine/wire.h"
#include "tpx/endpoint.h"
#include "tpx/mem.h"

/* Transport registrations are split into pieces the v7 int size accepts.
 * Piece k starts at k * PIECE_STRIDE and spans PIECE_SPAN bytes (clipped), so
 * pieces overlap by the largest chunk and any chunk lies inside the piece of
 * its first byte: lookup is one division, chunking needs no knowledge of it. */
#define PIECE_STRIDE (1ull << 30)
#define PIECE_SPAN (PIECE_STRIDE + WIRE_MAX_CHUNK)
/* CUDA registrations start on this boundary (the TCPX plugin's rule). */
#define MEM_CUDA_PAGE 4096u

/* Add a registration (desc already checked); internal ones are never in the
 * id table, so peers cannot name them. */
int tpx__mem_add(tpx_endpoint_t *ep, const tpx_mem_desc_t *d, int internal, struct tpx_mem **out);
int tpx__mem_register_internal(tpx_endpoint_t *ep, void *addr, size_t len, struct tpx_mem **out);
/* The range the transport registration of piece k covers: [*at, +*len). */
void tpx__mem_piece(const struct tpx_mem *m, uint32_t k, uint8_t **at, uint64_t *len);
struct tpx_mem *tpx__mem_lookup(tpx_endpoint_t *ep, uint64_t id);
void tpx__mem_unregister(struct tpx_mem *m);
void tpx__mem_free_all(tpx_endpoint_t *ep);

/* The transport memory handle of m's piece holding offset off, registered
 * with the comm in `slot` on first use. */
int tpx__mem_mhandle(struct tpx_mem *m, int slot, void *comm, uint64_t off, void **mh);

/* Comm slots: each comm gets an index into every region's handle cache. */
int tpx__mem_slot_alloc(tpx_endpoint_t *ep, void *comm);
/* The comm is about to close: deregister everything registered with it. */
void tpx__mem_slot_release(tpx_endpoint_t *ep, int slot);

#endif
