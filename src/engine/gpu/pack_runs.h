/* Packed chunks in GPU memory (plan.h's packed plan, over GPU staging): the
 * pieces of a chunk as the unpacker's entries (cuda/unpack.h), so the
 * sender gathers a chunk of many small GPU entries into its staging arena
 * with one launch and the receiver scatters it from the arena with one
 * launch, instead of one chunk and one copy per entry.
 *
 * A run is what one launch moves: GPU pieces of one device, at most `max`
 * entries, whose GPU addresses span at most 4 GiB when they are the source
 * (a gather: an entry's source offset is 32 bits). Pieces in host memory
 * are copied by the CPU as the walk meets them. Every piece lies inside its
 * entry, and every entry inside its registration (checked when the
 * transfer was prepared or, for a peer's request, resolved); the unpacker
 * checks each entry against the run's span and the arena again before
 * anything is queued. CPU-only: no CUDA call. */
#ifndef TPX_ENGINE_GPU_PACK_RUNS_H
#define TPX_ENGINE_GPU_PACK_RUNS_H

#include <stdint.h>

#include "engine/plan.h"
#include "tcpx/contract.h"

struct tpx_mem;

/* Where the walk over the pieces of one chunk stands. */
struct tpx__pack_walk {
  const struct tpx__xent *ents;
  struct tpx__cursor c;
  uint32_t i;    /* next entry */
  uint64_t done; /* the chunk's bytes before it */
};

struct tpx__pack_run {
  int dev;        /* the GPU of its pieces */
  uint8_t *lo;    /* lowest GPU address: the launch's source (gather) or destination (scatter) base */
  uint64_t span;  /* bytes from lo to the end of the highest piece */
  uint32_t n;     /* entries */
  uint64_t bytes; /* their bytes */
};

/* A run's GPU side spans at most this much when it is the source. */
#define PACK_RUN_SRC_SPAN ((uint64_t)UINT32_MAX)

void tpx__pack_walk_init(struct tpx__pack_walk *w, const struct tpx__xent *ents, const struct tpx__cursor *c);

/* The chunk at c moves through GPU staging: its first piece in GPU memory
 * (the chunk's device), or NULL when every piece is host memory. */
struct tpx_mem *tpx__pack_gpu_mem(const struct tpx__xent *ents, const struct tpx__cursor *c);

/* Entries may share packed chunks on this side: every one host memory, or,
 * where gpu_ok (this side stages GPU memory both ways), GPU memory of a
 * single device (a chunk's runs then share one unpacker and one ticket). */
int tpx__pack_mem_ok(const struct tpx__xent *ents, uint32_t n, int gpu_ok);

/* The next run of the chunk from w on, into meta[0..r->n), 1 <= r->n <=
 * max: gather (GPU -> buffer) when `gather`, else scatter. The buffer is
 * the chunk's staging bytes: `buf` as the CPU addresses them, at `buf_off`
 * in the launch's arena (the other side of every entry). Host pieces met on
 * the way are copied between buf and their memory (buf NULL: skipped).
 * Returns 1 (a run), 0 no GPU piece left (host pieces copied), or
 * TPX_EINTERNAL for a chunk whose pieces lie on two GPUs or whose arena
 * offsets do not fit 32 bits (tpx__pack_mem_ok and the arena's size rule
 * both out). */
int tpx__pack_next_run(struct tpx__pack_walk *w, int gather, uint8_t *buf, uint64_t buf_off, tpx_unpack_meta_t *meta,
                       uint32_t max, struct tpx__pack_run *r);

#endif
