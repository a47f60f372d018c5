/* Data integrity: every chunk checked end to end (TPX_INTEGRITY).
 *
 * The data's sender computes each chunk's CRC-32C (common/crc32c.h) where its
 * CPU sees the bytes (host memory, the pack ring, GPU memory's host staging)
 * right after the chunk went to the transport, and sends the sums on the
 * control connection (MSG_SUM, batched per progress pass). The receiver
 * computes the same over what landed (at the transport's completion, or after
 * the consume stage for an UNPACK gather into host memory) and a chunk counts
 * as landed only once the two match: its window holds it until the sender's
 * sum is in. A mismatch marks the transfer failed (TPX_EINTEGRITY naming
 * chunk, channel and peer, logged once here); its remaining chunks still
 * drain so the channels stay in step, and nothing of it is acknowledged as
 * landed: a write's target answers TPX_EINTEGRITY and delivers no
 * notification.
 *
 * Chunks whose bytes only a GPU sees (GPU memory sent or received without
 * host staging: GPUDirect, the UNPACK path) go unchecked, said once per peer
 * (docs/SECURITY.md). Both sides must offer HELLO_F_SUM; with an older peer,
 * or one with TPX_INTEGRITY=0, nothing is checked and the log says so once. */
#ifndef TPX_ENGINE_INTEGRITY_H
#define TPX_ENGINE_INTEGRITY_H

#include <stdint.h>

#include "engine/wire.h"

struct tpx_peer;
struct tpx__op;

/* HELLO: what this side offers (HELLO_F_SUM with TPX_INTEGRITY=1), and the
 * agreement once the peer's flags are in. */
uint32_t tpx__sum_flag(const struct tpx_peer *p);
void tpx__sum_agree(struct tpx_peer *p, uint32_t peer_flags);

/* Data sender: chunk `chunk` of o went to the transport; have: its sum is
 * `sum` (0: sent without one). Queued until tpx__sum_flush. */
int tpx__sum_sent(struct tpx_peer *p, const struct tpx__op *o, uint64_t chunk, int have, uint32_t sum);
/* The queued sums to the peer (end of a progress pass). */
int tpx__sum_flush(struct tpx_peer *p);

/* Data receiver: room for the sender's sums as o's data phase starts (no-op
 * without agreement); freed with o. */
int tpx__sum_op_start(struct tpx__op *o);
void tpx__sum_op_free(struct tpx__op *o);
/* Data receiver: chunk `chunk` of o landed on channel ch; have: this side
 * computed `sum` over it (0: it cannot read the bytes). Returns 1 when the
 * chunk may count as landed (a mismatch marks o failed), 0 while the
 * sender's sum has not come. */
int tpx__sum_check(struct tpx_peer *p, struct tpx__op *o, uint64_t chunk, int ch, int have, uint32_t sum);
/* Inline data (it rode in the control message) against its sender's sum:
 * 0, or TPX_EINTEGRITY with o marked as for a bad chunk. */
int tpx__sum_inline(struct tpx__op *o, const uint8_t *data, uint64_t len, uint32_t sum);
/* A receiving transfer's verdict once every chunk is in: 0, or
 * TPX_EINTEGRITY with o's errmsg naming the first bad chunk. */
int tpx__sum_verdict(struct tpx__op *o);

/* MSG_SUM from the peer: < 0 fails it. */
int tpx__sum_on_frame(struct tpx_peer *p, const struct tpx__wire_frame *f);

#endif
