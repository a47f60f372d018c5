/* Packed chunks (pack.h). */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/core.h"
#include "engine/mem.h"
#include "engine/pack.h"
#include "engine/wire.h"
#include "net/caps.h"

/* Any packed chunk fits once the ring is empty, whatever piece limit the
 * sender chose (up to WIRE_MAX_PACK_LOG2; a packed chunk is never longer
 * than the chunk size, at most WIRE_MAX_CHUNK). */
_Static_assert(PACK_RING_BYTES >= 2ull * WIRE_MAX_CHUNK,
               "the pack ring holds two of the largest chunk");

static int ring_open(tpx_endpoint_t *ep, struct tpx__pack_ring **out) {
  struct tpx__pack_ring *pr = calloc(1, sizeof(*pr));
  if (pr) pr->buf = aligned_alloc(4096, PACK_RING_BYTES);
  if (!pr || !pr->buf || tpx__mem_register_internal(ep, pr->buf, PACK_RING_BYTES, &pr->mem) != 0) {
    if (pr) free(pr->buf);
    free(pr);
    return tpx_err_quiet(TPX_ENOMEM, "out of memory for the %u-byte pack ring", PACK_RING_BYTES);
  }
  tpx__ring_init(&pr->ring, PACK_RING_BYTES, 64);
  *out = pr;
  return 0;
}

/* Between the ring and the chunk's pieces: entries [c->e, c->end), the first
 * from c->off, c->len bytes in all. */
static void copy_pieces(const struct tpx__xent *ents, const struct tpx__cursor *c, uint8_t *buf, int to_buf) {
  uint64_t done = 0;
  for (uint32_t i = c->e; i < c->end && done < c->len; i++) {
    uint64_t o = i == c->e ? c->off : 0;
    uint64_t l = ents[i].len - o;
    if (l > c->len - done) l = c->len - done;
    if (l == 0) continue;
    uint8_t *u = ents[i].mem->base + ents[i].off + o;
    if (to_buf) memcpy(buf + done, u, (size_t)l);
    else memcpy(u, buf + done, (size_t)l);
    done += l;
  }
}

int tpx__pack_prep(tpx_endpoint_t *ep, struct tpx__pack_ring **pr, int is_send, const struct tpx__xent *ents,
                   const struct tpx__cursor *c, struct tpx_mem **m, uint64_t *off) {
  if (!*pr) {
    int rc = ring_open(ep, pr);
    if (rc) return rc;
  }
  int fit = tpx__ring_fit(&(*pr)->ring, c->len, &(*pr)->fit);
  if (fit < 0) /* chunks are at most WIRE_MAX_CHUNK, half the ring */
    return tpx_err_quiet(TPX_EINTERNAL, "a %llu-byte chunk cannot fit the pack ring", (unsigned long long)c->len);
  if (fit == 0) return 0;
  *m = (*pr)->mem;
  *off = (*pr)->fit.off;
  if (is_send) copy_pieces(ents, c, (*pr)->buf + *off, 1);
  return 1;
}

uint64_t tpx__pack_commit(struct tpx__pack_ring *pr) {
  tpx__ring_take(&pr->ring, &pr->fit);
  return pr->fit.end;
}

void tpx__pack_release(struct tpx__pack_ring *pr, uint64_t end, const struct tpx__xent *ents,
                       const struct tpx__cursor *c, uint8_t *from) {
  if (from) copy_pieces(ents, c, from, 0);
  tpx__ring_release(&pr->ring, end);
}

void tpx__pack_purge(struct tpx__pack_ring *pr) {
  if (pr) tpx__ring_release_all(&pr->ring);
}

void tpx__pack_free(struct tpx__pack_ring **pr) {
  if (!*pr) return;
  tpx__mem_unregister((*pr)->mem);
  free((*pr)->buf);
  free(*pr);
  *pr = NULL;
}

/* The pieces of the packed chunk at c as one vectored request, when the
 * transport takes them (tpx/net.h isendv): host memory, at most
 * TPX_NET_IOV_MAX pieces. Returns their count into iov, or 0: the chunk
 * goes through the pack ring. The wire is the same either way: the peer
 * decides for itself how its side moves. */
int tpx__pack_iov(const tpx_net_t *net, const struct tpx__op *o, const struct tpx__cursor *c, struct iovec *iov) {
  if (!tpx__net_iov_ok(net) || o->discard) return 0;
  int n = 0;
  uint64_t done = 0;
  for (uint32_t i = c->e; i < c->end && done < c->len; i++) {
    const struct tpx__xent *e = &o->ents[i];
    uint64_t from = i == c->e ? c->off : 0;
    uint64_t l = TPX_MIN(e->len - from, c->len - done);
    if (l == 0) continue;
    if (n == TPX_NET_IOV_MAX || e->mem->type != TPX_MEM_HOST) return 0;
    iov[n].iov_base = e->mem->base + e->off + from;
    iov[n++].iov_len = (size_t)l;
    done += l;
  }
  return n;
}
