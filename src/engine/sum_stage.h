/* Integrity's stage in a window (integrity.h): each request's CRC-32C,
 * computed where its bytes are. On the CPU, in place for a small chunk, on
 * the endpoint's checksum threads for a large one (common/crcpool.h), so the
 * progress thread goes on posting; on the GPU's kernel for bytes only a GPU
 * sees (gpu/gpu_path.h). A send's slot leaves its ring only once its sum went
 * to the peer; a receive's only once its sum matched the sender's. */
#ifndef TPX_ENGINE_SUM_STAGE_H
#define TPX_ENGINE_SUM_STAGE_H

#include <sys/uio.h>

#include "engine/core.h"

/* A send just posted (s filled): dev -1 when the CPU sees its bytes (s->data,
 * or s->nv pieces in iov), else the GPU whose memory it is. */
int tpx__sum_stage_sent(struct tpx_peer *p, struct tpx__window *q, struct tpx__wslot *s, int dev,
                        const struct iovec *iov);
/* A receive the transport completed (consumed 0), or consumed. */
void tpx__sum_stage_landed(struct tpx_peer *p, struct tpx__window *q, struct tpx__wslot *s, int consumed);
/* Before a slot leaves its ring: 1 it may, 0 not yet (its sum is not in),
 * < 0 error (a receive whose sender's sum never came: TPX_ETIMEDOUT). */
int tpx__sum_stage_recv_ok(struct tpx_peer *p, struct tpx__window *q, struct tpx__wslot *s);
int tpx__sum_stage_send_ok(struct tpx_peer *p, struct tpx__window *q, struct tpx__wslot *s);
/* The slot goes (its comm is purged): a sum still running ends first. */
void tpx__sum_stage_drop(struct tpx_peer *p, struct tpx__wslot *s);
/* Endpoint teardown: the checksum threads. */
void tpx__sum_stage_fini(tpx_endpoint_t *ep);

#endif
