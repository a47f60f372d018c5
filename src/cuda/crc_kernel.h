/* The CRC-32C kernels' host-side entry points (crc_kernel.cu), used by
 * crc.c. CUDA builds only. Each returns a cudaError_t value (0 = success)
 * and runs in the calling thread's current context. */
#ifndef TPX_CUDA_CRC_KERNEL_H
#define TPX_CUDA_CRC_KERNEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TPX_CRC_SEG 16384u      /* bytes a block of the first kernel takes */
#define TPX_CRC_THREADS 256     /* its threads: 64 bytes each */
#define TPX_CRC_PIECE_LEVELS 8  /* log2(TPX_CRC_THREADS) */
#define TPX_CRC_SEG_LEVELS 8    /* a chunk of up to 256 segments (4 MiB) */
#define TPX_CRC_BATCH 64        /* chunks one launch sums */

/* The zero-bytes operators the kernels combine pieces with
 * (tpx__crc32c_zeros_op): piece[k] for 64 * 2^k bytes, seg[k] for
 * TPX_CRC_SEG * 2^k bytes. */
typedef struct tpx_crc_ops {
  uint32_t piece[TPX_CRC_PIECE_LEVELS][32];
  uint32_t seg[TPX_CRC_SEG_LEVELS][32];
} tpx_crc_ops_t;

/* n chunks (1..TPX_CRC_BATCH) in one launch pair on `stream`, with the
 * operators `ops` in device memory: chunk i is
 * device-readable [p[i], p[i] + len[i]) (0 < len <= 256 segments); its
 * CRC-32C goes to out[idx[i]] (device-writable: mapped pinned memory);
 * init[i] is the zero-bytes operator for len[i] applied to 0xffffffff.
 * partials: device memory for the chunks' segments, one word each. */
int tpx__crc_kernel_launch(const tpx_crc_ops_t *ops, const void *const *p, const uint64_t *len, const uint32_t *init,
                           const uint32_t *idx, uint32_t n, uint32_t *partials, uint32_t *out, void *stream);

#ifdef __cplusplus
}
#endif
#endif
