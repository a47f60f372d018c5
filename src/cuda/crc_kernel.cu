// CRC-32C on the GPU (crc_kernel.h): the bytes of a chunk that only the GPU
// sees (integrity, src/engine/integrity.h).
//
// The raw CRC register (no inversions) is linear, and leading zero bytes
// leave it at 0, so the range is taken as if zero-padded in front to a
// whole number of segments: every thread then takes an equal 64-byte piece
// (a table in shared memory, a byte at a time), and pieces combine in a
// tree, the earlier one moved over the later one's length by the
// zero-bytes operator of that length (32 x 32 bits over GF(2), from the
// host). One block per segment, then one block over the segments; the
// initial value's share is added last.
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/crc_kernel.h"

namespace {

constexpr uint32_t kPiece = TPX_CRC_SEG / TPX_CRC_THREADS;

struct PieceOps {
  uint32_t m[TPX_CRC_PIECE_LEVELS][32];
};
struct SegOps {
  uint32_t m[TPX_CRC_SEG_LEVELS][32];
};

__device__ __forceinline__ uint32_t apply(const uint32_t *m, uint32_t v) {
  uint32_t r = 0;
#pragma unroll 8
  for (int i = 0; i < 32; i++)
    if (v >> i & 1u) r ^= m[i];
  return r;
}

__device__ void make_table(uint32_t *t) {
  for (uint32_t i = threadIdx.x; i < 256; i += blockDim.x) {
    uint32_t c = i;
    for (int k = 0; k < 8; k++) c = c & 1u ? (c >> 1) ^ 0x82f63b78u : c >> 1;
    t[i] = c;
  }
}

// Block b: segment b of the padded range; partials[b] its raw CRC.
__global__ void crc_segments(const uint8_t *p, uint64_t len, uint64_t pad, PieceOps ops, uint32_t *partials) {
  __shared__ uint32_t table[256];
  __shared__ uint32_t c[TPX_CRC_THREADS];
  make_table(table);
  __syncthreads();
  const uint64_t v0 = (uint64_t)blockIdx.x * TPX_CRC_SEG + (uint64_t)threadIdx.x * kPiece;
  uint32_t r = 0;
  if (v0 + kPiece > pad) {  // some of the piece is data
    for (uint32_t j = 0; j < kPiece; j++) {
      const uint64_t v = v0 + j;
      const uint8_t b = v >= pad ? p[v - pad] : 0;
      r = table[(r ^ b) & 0xffu] ^ (r >> 8);
    }
  }
  c[threadIdx.x] = r;
  __syncthreads();
  for (int k = 0; k < TPX_CRC_PIECE_LEVELS; k++) {
    const unsigned s = 1u << k;
    if ((threadIdx.x & (2 * s - 1)) == 0) c[threadIdx.x] = apply(ops.m[k], c[threadIdx.x]) ^ c[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = c[0];
}

// One block: the segments' CRCs, front-padded with zeros to n2 (a power of
// two), each thread a run of `per` of them, then a tree over the threads.
__global__ void crc_join(const uint32_t *partials, uint32_t n, uint32_t n2, uint32_t per, int per_log, SegOps ops,
                         uint32_t init, uint32_t *out) {
  __shared__ uint32_t c[TPX_CRC_THREADS];
  const uint32_t lead = n2 - n;
  uint32_t r = 0;
  for (uint32_t j = 0; j < per; j++) {
    const uint32_t i = threadIdx.x * per + j;
    r = apply(ops.m[0], r) ^ (i >= lead ? partials[i - lead] : 0u);
  }
  c[threadIdx.x] = r;
  __syncthreads();
  for (int k = 0; (1u << k) < blockDim.x; k++) {
    const unsigned s = 1u << k;
    if ((threadIdx.x & (2 * s - 1)) == 0) c[threadIdx.x] = apply(ops.m[per_log + k], c[threadIdx.x]) ^ c[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) *out = ~(c[0] ^ init);
}

}  // namespace

extern "C" int tpx__crc_kernel_launch(const void *p, uint64_t len, const tpx_crc_ops_t *ops, uint32_t init,
                                      uint32_t *partials, uint32_t *out, void *stream) {
  const uint64_t n = (len + TPX_CRC_SEG - 1) / TPX_CRC_SEG;
  if (len == 0 || n > (1ull << TPX_CRC_SEG_LEVELS)) return cudaErrorInvalidValue;
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  PieceOps po;
  SegOps so;
  for (int k = 0; k < TPX_CRC_PIECE_LEVELS; k++)
    for (int i = 0; i < 32; i++) po.m[k][i] = ops->piece[k][i];
  for (int k = 0; k < TPX_CRC_SEG_LEVELS; k++)
    for (int i = 0; i < 32; i++) so.m[k][i] = ops->seg[k][i];
  const uint8_t *a_p = static_cast<const uint8_t *>(p);
  uint64_t a_len = len, a_pad = n * TPX_CRC_SEG - len;
  void *a1[] = {&a_p, &a_len, &a_pad, &po, &partials};
  cudaError_t e = cudaLaunchKernel(reinterpret_cast<const void *>(crc_segments), dim3(static_cast<unsigned>(n)),
                                   dim3(TPX_CRC_THREADS), a1, 0, st);
  if (e != cudaSuccess) return e;
  uint32_t n2 = 1;
  while (n2 < n) n2 <<= 1;
  uint32_t threads = n2 < TPX_CRC_THREADS ? n2 : TPX_CRC_THREADS, per = n2 / threads;
  int per_log = 0;
  while ((1u << per_log) < per) per_log++;
  uint32_t a_n = static_cast<uint32_t>(n);
  void *a2[] = {&partials, &a_n, &n2, &per, &per_log, &so, &init, &out};
  return cudaLaunchKernel(reinterpret_cast<const void *>(crc_join), dim3(1), dim3(threads), a2, 0, st);
}
