/* CRC-32C of GPU memory on its GPU (integrity: src/engine/integrity.h), for
 * the chunks whose bytes no CPU sees: GPU memory received through the
 * unpack path or written by the transport itself, or sent straight from GPU
 * memory. Asynchronous: start queues a chunk and returns a ticket, flush
 * launches what is queued (up to TPX_CRC_BATCH chunks a launch: one
 * launch's cost shared), poll says when the sum is in. One per GPU, with its
 * own stream; tickets may be polled in any order; a ticket holds its slot
 * until polled done or dropped. */
#ifndef TPX_CUDA_CRC_H
#define TPX_CUDA_CRC_H

#include <stdint.h>

typedef struct tpx_gpu_crc tpx_gpu_crc_t;

#define TPX_GPU_CRC_MAX_BYTES (4u << 20) /* a chunk at most (WIRE_MAX_CHUNK) */

/* TPX_ENOTSUP without CUDA or a usable GPU dev. */
int tpx__gpu_crc_create(int dev, tpx_gpu_crc_t **out);
void tpx__gpu_crc_destroy(tpx_gpu_crc_t *c); /* waits for its work; NULL ok */
/* The CRC-32C of [p, p + len) (memory dev's kernels can read; 0 < len <=
 * TPX_GPU_CRC_MAX_BYTES) starts after work already done: the caller has
 * seen whatever wrote those bytes finish. TPX_EAGAIN while every slot is
 * busy. */
int tpx__gpu_crc_start(tpx_gpu_crc_t *c, const void *p, uint64_t len, uint64_t *ticket);
/* Launch the queued chunks (a poll of a queued ticket does too). */
int tpx__gpu_crc_flush(tpx_gpu_crc_t *c);
/* n chunks (1..TPX_CRC_BATCH, cuda/crc_kernel.h) launched at once on
 * `stream` (a tpx_gpu_stream_t of the same GPU), after the work already
 * queued there: what writes them (the unpacker's copies). tickets[i] as
 * start's. TPX_EAGAIN when slots are busy (start them later instead). */
struct tpx_gpu_stream;
int tpx__gpu_crc_start_on(tpx_gpu_crc_t *c, struct tpx_gpu_stream *stream, const void *const *p, const uint64_t *len,
                          uint32_t n, uint64_t *tickets);
/* 1: done, *crc set; 0: not yet; < 0: the GPU failed. */
int tpx__gpu_crc_poll(tpx_gpu_crc_t *c, uint64_t ticket, uint32_t *crc);
/* The sum is no longer wanted (its transfer ended): the slot is free once
 * its work is done. */
void tpx__gpu_crc_drop(tpx_gpu_crc_t *c, uint64_t ticket);

#endif
