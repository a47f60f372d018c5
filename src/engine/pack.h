/* Packed chunks (plan.h's packed plan): a chunk holding several entries of a
 * vectored host-memory transfer moves through the window's pack ring, one
 * host buffer per comm direction, registered with that comm like any
 * region. The sender gathers the pieces into the ring and sends from there;
 * the receiver receives into the ring and scatters once the receive is
 * consumed (after the TCPX contract's gather on UNPACK transports). Ring
 * space is taken in posting order and given back in release order, both
 * FIFO per comm (common/ring.h), so it costs no allocation per chunk. */
#ifndef TPX_ENGINE_PACK_H
#define TPX_ENGINE_PACK_H

#include <stdint.h>
#include <sys/uio.h>

#include "common/ring.h"
#include "engine/plan.h"
#include "tpx/endpoint.h"
#include "tpx/net.h"

struct tpx__op;

struct tpx_mem;

/* Two of the largest chunk, so any chunk fits once the ring is empty; 16
 * chunks of the default size. */
#define PACK_RING_BYTES (8u << 20)

struct tpx__pack_ring {
  uint8_t *buf;
  struct tpx_mem *mem; /* internal registration of buf */
  tpx_ring_t ring;
  tpx_ring_span_t fit; /* the span the last tpx__pack_prep gave */
};

/* Room in *pr (created on first use) for the chunk at c: 1 with *m / *off
 * (the ring's registration and offset) and, for a send, the pieces copied
 * in; 0 no room until earlier chunks of this comm are released; < 0 error
 * (tpx_err_quiet). Nothing is taken until tpx__pack_commit. */
int tpx__pack_prep(tpx_endpoint_t *ep, struct tpx__pack_ring **pr, int is_send, const struct tpx__xent *ents,
                   const struct tpx__cursor *c, struct tpx_mem **m, uint64_t *off);
/* The request was posted: take the span; returns its release position. */
uint64_t tpx__pack_commit(struct tpx__pack_ring *pr);
/* The chunk left the window: a receive's bytes (at `from`, its place in
 * the ring; NULL for a send) go to their entries, and the span is given
 * back (FIFO). */
void tpx__pack_release(struct tpx__pack_ring *pr, uint64_t end, const struct tpx__xent *ents,
                       const struct tpx__cursor *c, uint8_t *from);
/* The comm is closing: every span given back. */
void tpx__pack_purge(struct tpx__pack_ring *pr);
/* After the comm closed: registration and buffer freed. */
void tpx__pack_free(struct tpx__pack_ring **pr);
/* The pieces of the packed chunk at c as one vectored request, when the
 * transport takes them (tpx/net.h isendv): host memory, at most
 * TPX_NET_IOV_MAX pieces. Returns their count into iov, or 0: the chunk
 * goes through the pack ring. The wire is the same either way: the peer
 * decides for itself how its side moves. */
int tpx__pack_iov(const tpx_net_t *net, const struct tpx__op *o, const struct tpx__cursor *c, struct iovec *iov);

#endif
