/* The CRC-32C kernels' host-side entry point (crc_kernel.cu), used by
 * crc.c. CUDA builds only. Returns a cudaError_t value (0 = success) and runs
 * in the calling thread's current context. */
#ifndef TPX_CUDA_CRC_KERNEL_H
#define TPX_CUDA_CRC_KERNEL_H

#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TPX_CRC_SEG 16384u     /* bytes a block of the first kernel takes */
#define TPX_CRC_THREADS 256    /* its threads: 64 bytes each */
#define TPX_CRC_PIECE_LEVELS 8 /* log2(TPX_CRC_THREADS) */
#define TPX_CRC_SEG_LEVELS 20  /* up to 2^20 segments (16 GiB) */

/* The zero-bytes operators the kernels combine pieces with
 * (tpx__crc32c_zeros_op): piece[k] for 64 * 2^k bytes, seg[k] for
 * TPX_CRC_SEG * 2^k bytes. */
typedef struct tpx_crc_ops {
  uint32_t piece[TPX_CRC_PIECE_LEVELS][32];
  uint32_t seg[TPX_CRC_SEG_LEVELS][32];
} tpx_crc_ops_t;

/* The CRC-32C of device-readable [p, p + len) into *out (device-writable:
 * mapped pinned memory), on `stream` (cudaStream_t): `partials` holds
 * ceil(len / TPX_CRC_SEG) words of device memory; init is the zero-bytes
 * operator for len applied to 0xffffffff (what the standard CRC's initial
 * value contributes). len > 0, at most TPX_CRC_SEG << TPX_CRC_SEG_LEVELS. */
int tpx__crc_kernel_launch(const void *p, uint64_t len, const tpx_crc_ops_t *ops, uint32_t init,
                           uint32_t *partials, uint32_t *out, void *stream);

#ifdef __cplusplus
}
#endif
#endif
