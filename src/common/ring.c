/* Byte-ring arithmetic; the policy is described in ring.h. */
#include "common/ring.h"

#include "tpx/error.h"

void tpx__ring_init(tpx_ring_t *r, uint64_t size, uint64_t align) {
  if (align == 0) align = 1;
  r->align = align;
  r->size = size & ~(align - 1);
  r->alloc_pos = r->free_pos = 0;
}

int tpx__ring_fit(const tpx_ring_t *r, uint64_t len, tpx_ring_span_t *sp) {
  if (len > r->size) return TPX_EINVAL; /* also keeps the rounding below from wrapping */
  uint64_t need = (len + r->align - 1) & ~(r->align - 1);
  if (need > r->size) return TPX_EINVAL;
  uint64_t pos = r->alloc_pos;
  if (need > 0) {
    if (pos == r->free_pos) {
      /* Empty: restart at offset 0, so anything up to the size fits. */
      pos = (pos + r->size - 1) / r->size * r->size;
    } else {
      uint64_t off = pos % r->size;
      if (off + need > r->size) pos += r->size - off; /* never straddle the end */
      if (pos + need - r->free_pos > r->size) return 0;
    }
  }
  sp->off = r->size ? pos % r->size : 0;
  sp->start = pos;
  sp->end = pos + need;
  return 1;
}

void tpx__ring_take(tpx_ring_t *r, const tpx_ring_span_t *sp) {
  /* An empty ring restarted at sp->start: the gap before it was never used. */
  if (r->free_pos == r->alloc_pos) r->free_pos = sp->start;
  r->alloc_pos = sp->end;
}

void tpx__ring_release(tpx_ring_t *r, uint64_t end) {
  if (end > r->free_pos && end <= r->alloc_pos) r->free_pos = end;
}

void tpx__ring_release_all(tpx_ring_t *r) {
  r->free_pos = r->alloc_pos;
}
