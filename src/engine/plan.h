/* Chunk arithmetic shared by both sides of a transfer.
 *
 * A transfer is a list of entries (contiguous pieces of local memory). Each
 * entry is cut into chunks of `chunk` bytes from its start (the last one
 * shorter); zero-length entries give no chunks. Chunk i of the transfer goes
 * to channel (first_ch + i) % nch. Sender and receiver derive the same
 * sequence from the same lengths, so no per-chunk message is needed.
 */
#ifndef TPX_ENGINE_PLAN_H
#define TPX_ENGINE_PLAN_H

#include <stdint.h>

struct tpx_mem;

struct xent {
  struct tpx_mem *mem; /* local registration (or the discard buffer) */
  uint64_t off;        /* offset in it */
  uint64_t len;
};

struct cursor {
  uint32_t e;    /* entry index */
  uint64_t off;  /* offset of the chunk within the entry */
  uint64_t idx;  /* chunk index within the transfer */
};

/* Number of chunks, or UINT64_MAX on overflow. */
uint64_t tpx__plan_nchunks(const struct xent *ents, uint32_t n, uint32_t chunk);
/* Position c at chunk index `idx` (idx < nchunks). */
void tpx__plan_seek(const struct xent *ents, uint32_t n, uint32_t chunk, uint64_t idx, struct cursor *c);
/* Advance c by k chunks. Returns 0 if it ran past the last chunk. */
int tpx__plan_advance(const struct xent *ents, uint32_t n, uint32_t chunk, struct cursor *c, uint64_t k);
/* Length of the chunk at c. */
static inline uint64_t tpx__plan_len(const struct xent *ents, uint32_t chunk, const struct cursor *c) {
  uint64_t rem = ents[c->e].len - c->off;
  return rem < chunk ? rem : chunk;
}
/* First chunk index that channel ch gets, given first_ch and nch. */
static inline uint64_t tpx__plan_first_idx(uint32_t ch, uint32_t first_ch, uint32_t nch) {
  return (uint64_t)((ch + nch - first_ch % nch) % nch);
}

#endif
