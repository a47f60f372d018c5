/* Chunk arithmetic shared by both sides of a transfer.
 *
 * A transfer is a list of entries (contiguous pieces of local memory). Sender
 * and receiver derive the same sequence of chunks from the same lengths, so
 * no per-chunk message is needed; which channel each chunk takes is route.h's.
 * Zero-length entries give no bytes. Two plans:
 *
 *  - plain: each entry is cut into chunks of `chunk` bytes from its start
 *    (the last one shorter); a chunk never holds two entries;
 *  - packed with pieces up to `pmax` bytes (both peers agreed; host memory,
 *    or GPU memory both sides stage: docs/API.md): the same cut of every entry into whole `chunk`-byte
 *    pieces, but an entry's remainder of at most pmax bytes (shorter than
 *    `chunk`: a whole small entry, or the tail of a large one) starts a chunk
 *    that also takes the following entries of at most pmax bytes whole, as
 *    long as they fit in `chunk` bytes together. Such a chunk is gathered on
 *    the sender and scattered on the receiver (pack.c, gpu/pack_runs.c); a chunk of one piece
 *    moves directly, as in the plain plan. pmax 0 is the plain plan.
 */
#ifndef TPX_ENGINE_PLAN_H
#define TPX_ENGINE_PLAN_H

#include <stdint.h>

struct tpx_mem;

struct tpx__xent {
  struct tpx_mem *mem; /* local registration (NULL for a refused write) */
  uint64_t off;        /* offset in it */
  uint64_t len;
};

struct tpx__cursor {
  uint32_t e;     /* entry of the chunk's first byte */
  uint32_t end;   /* entry after the chunk's last one (e + 1 unless packed) */
  uint64_t off;   /* offset of the chunk within entry e */
  uint64_t idx;   /* chunk index within the transfer */
  uint64_t len;   /* chunk bytes */
  uint64_t pmax;  /* the plan: 0 plain, else packed pieces' limit (set by seek, kept by advance) */
};

/* Number of chunks, or UINT64_MAX on overflow. */
uint64_t tpx__plan_nchunks(const struct tpx__xent *ents, uint32_t n, uint32_t chunk);
uint64_t tpx__plan_nchunks_packed(const struct tpx__xent *ents, uint32_t n, uint32_t chunk, uint64_t pmax);
/* Position c at chunk index `idx` (idx < nchunks) of the plain plan (pmax 0)
 * or the packed one. */
void tpx__plan_seek_packed(const struct tpx__xent *ents, uint32_t n, uint32_t chunk, uint64_t pmax, uint64_t idx,
                           struct tpx__cursor *c);
/* Advance c by k chunks. Returns 0 if it ran past the last chunk. */
int tpx__plan_advance(const struct tpx__xent *ents, uint32_t n, uint32_t chunk, struct tpx__cursor *c, uint64_t k);
/* Length of the chunk at c. */
static inline uint64_t tpx__plan_len(const struct tpx__xent *ents, uint32_t chunk, const struct tpx__cursor *c) {
  (void)ents;
  (void)chunk;
  return c->len;
}
/* The chunk at c holds more than one piece (gathered / scattered). */
static inline int tpx__plan_gathered(const struct tpx__xent *ents, const struct tpx__cursor *c) {
  return c->len > ents[c->e].len - c->off;
}
/* First chunk index that channel ch gets under the fixed pattern (route.h)
 * with first_ch and nch channels. */
static inline uint64_t tpx__plan_first_idx(uint32_t ch, uint32_t first_ch, uint32_t nch) {
  return (uint64_t)((ch + nch - first_ch % nch) % nch);
}

#endif
