/* The unpack kernel's host-side entry points (unpack_kernel.cu), used by
 * unpack.c. CUDA builds only. Both return a cudaError_t value (0 = success)
 * and run in the calling thread's current context. */
#ifndef TPX_CUDA_UNPACK_KERNEL_H
#define TPX_CUDA_UNPACK_KERNEL_H

#include <stdint.h>

#include "tcpx/contract.h" /* tpx_unpack_meta_t */

#ifdef __cplusplus
extern "C" {
#endif

/* Largest block size the kernel is compiled for. */
#define TPX_UNPACK_KERNEL_MAX_THREADS 512

/* Copy cnt fragments described by desc (device-readable) from src to dst on
 * `stream` (cudaStream_t). Each fragment is split into 2^slice_shift slices,
 * one warp each; at most blocks_cap blocks are launched (the kernel strides
 * over the rest). cnt == 0 launches nothing. */
int tpx__unpacker_kernel_launch(const tpx_unpack_meta_t *desc, uint32_t cnt, uint32_t slice_shift,
                             const void *src, void *dst, int threads, int blocks_cap, void *stream);

/* Most entries one launch can carry in its parameters. */
#define TPX_UNPACK_PARAM_MAX 2040

/* Same, with the entries passed by value in the launch parameters (copied
 * at the call: entries may be reused as soon as it returns). entries must
 * point to TPX_UNPACK_PARAM_MAX readable entries; cnt <= that. */
int tpx__unpacker_kernel_launch_param(const tpx_unpack_meta_t *entries, uint32_t cnt, uint32_t slice_shift,
                                   const void *src, void *dst, int threads, int blocks_cap, void *stream);

/* Blocks of `threads` that fit on the current device at once (all SMs). */
int tpx__unpacker_kernel_max_blocks(int threads, int *blocks);

#ifdef __cplusplus
}
#endif
#endif
