/* A byte ring over a caller-owned buffer: space is taken in order and given
 * back in the same (FIFO) order, so two monotonic positions describe it and
 * nothing is allocated per entry. Pure arithmetic on offsets (no memory, no
 * locking): the engine's pinned staging arenas (src/engine/staging.c) and
 * the built-in transport's staging of CUDA sends (src/sock/unpack.c) use it.
 *
 * The policy:
 *  - an allocation is one contiguous run: one that would straddle the end of
 *    the buffer starts at offset 0 instead, and the skipped tail counts as
 *    used until the allocation after it is released;
 *  - an empty ring starts the next allocation at offset 0, so any length up
 *    to the ring's size fits once earlier allocations are released;
 *  - lengths are rounded up to `align` (every offset is then aligned);
 *  - release is FIFO: releasing an allocation's end position gives back it
 *    and everything allocated before it;
 *  - a zero-length allocation always fits, takes nothing and moves nothing.
 */
#ifndef TPX_COMMON_RING_H
#define TPX_COMMON_RING_H

#include <stdint.h>

typedef struct tpx_ring {
  uint64_t size;      /* bytes, a multiple of align */
  uint64_t align;     /* power of two */
  uint64_t alloc_pos; /* monotonic: bytes taken so far (skipped tails included) */
  uint64_t free_pos;  /* monotonic: bytes given back; alloc_pos - free_pos <= size */
} tpx_ring_t;

/* Where an allocation lies: what tpx__ring_fit gives and tpx__ring_take takes. */
typedef struct tpx_ring_span {
  uint64_t off;   /* offset in the buffer */
  uint64_t start; /* ring position of its first byte */
  uint64_t end;   /* ring position after it: what tpx__ring_release takes */
} tpx_ring_span_t;

/* An empty ring over `size` bytes (rounded down to a multiple of align;
 * align 0 is taken as 1, and must otherwise be a power of two). */
void tpx__ring_init(tpx_ring_t *r, uint64_t size, uint64_t align);

/* Where `len` bytes would go now, without taking them: 1 with *sp set; 0 no
 * room until earlier allocations are released; TPX_EINVAL never (len
 * rounded up to align exceeds the ring). */
int tpx__ring_fit(const tpx_ring_t *r, uint64_t len, tpx_ring_span_t *sp);

/* Take the span the last tpx__ring_fit gave (releases in between are fine,
 * other takes are not). */
void tpx__ring_take(tpx_ring_t *r, const tpx_ring_span_t *sp);

/* Give back everything allocated up to position `end` (an allocation's
 * span.end, released in allocation order). Positions at or below what was
 * already released, or beyond what was allocated, change nothing. */
void tpx__ring_release(tpx_ring_t *r, uint64_t end);

/* Give back everything (teardown, or the allocations were abandoned). */
void tpx__ring_release_all(tpx_ring_t *r);

/* Bytes held, skipped tails included, and bytes free (not all of them in
 * one run: see tpx__ring_fit for what fits). */
static inline uint64_t tpx__ring_used(const tpx_ring_t *r) {
  return r->alloc_pos - r->free_pos;
}
static inline uint64_t tpx__ring_free(const tpx_ring_t *r) {
  return r->size - tpx__ring_used(r);
}

#endif
