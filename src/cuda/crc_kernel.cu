// CRC-32C on the GPU (crc_kernel.h): the bytes of chunks that only the GPU
// sees (integrity, src/engine/integrity.h), a batch of chunks per launch.
//
// The raw CRC register (no inversions) is linear, and leading zero bytes
// leave it at 0, so each chunk is taken as if zero-padded in front to a
// whole number of segments: every thread then takes an equal 64-byte piece
// (a table in shared memory, a byte at a time), and pieces combine in a
// tree, the earlier one moved over the later one's length by the
// zero-bytes operator of that length (32 x 32 bits over GF(2), from the
// host, in device memory). One block per segment of any chunk, then one
// block per chunk over its segments; the initial value's share is added last.
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/crc_kernel.h"

namespace {

constexpr uint32_t kPiece = TPX_CRC_SEG / TPX_CRC_THREADS;
constexpr uint32_t kMaxSegs = 1u << TPX_CRC_SEG_LEVELS;

struct Batch {  // by value in the launch parameters
  const uint8_t *p[TPX_CRC_BATCH];
  uint64_t len[TPX_CRC_BATCH];
  uint32_t seg0[TPX_CRC_BATCH + 1];  // chunk i's segments: [seg0[i], seg0[i + 1])
  uint32_t init[TPX_CRC_BATCH];
  uint32_t idx[TPX_CRC_BATCH];
  uint32_t n;
};

__device__ __forceinline__ uint32_t apply(const uint32_t *m, uint32_t v) {
  uint32_t r = 0;
#pragma unroll 8
  for (int i = 0; i < 32; i++)
    if (v >> i & 1u) r ^= m[i];
  return r;
}

// Block b: a segment of one chunk; partials[b] its raw CRC.
__global__ void crc_segments(const tpx_crc_ops_t *__restrict__ ops, Batch b, uint32_t *partials) {
  __shared__ uint32_t table[256];
  __shared__ uint32_t c[TPX_CRC_THREADS];
  for (uint32_t i = threadIdx.x; i < 256; i += blockDim.x) {
    uint32_t v = i;
    for (int k = 0; k < 8; k++) v = v & 1u ? (v >> 1) ^ 0x82f63b78u : v >> 1;
    table[i] = v;
  }
  uint32_t k = 0;
  while (k + 1 < b.n && b.seg0[k + 1] <= blockIdx.x) k++;
  const uint64_t nseg = b.seg0[k + 1] - b.seg0[k];
  const uint64_t pad = nseg * TPX_CRC_SEG - b.len[k];
  const uint8_t *p = b.p[k];
  __syncthreads();
  const uint64_t v0 = (uint64_t)(blockIdx.x - b.seg0[k]) * TPX_CRC_SEG + (uint64_t)threadIdx.x * kPiece;
  uint32_t r = 0;
  if (v0 + kPiece > pad) {  // some of the piece is data
    for (uint32_t j = 0; j < kPiece; j++) {
      const uint64_t v = v0 + j;
      const uint8_t x = v >= pad ? p[v - pad] : 0;
      r = table[(r ^ x) & 0xffu] ^ (r >> 8);
    }
  }
  c[threadIdx.x] = r;
  __syncthreads();
  for (int l = 0; l < TPX_CRC_PIECE_LEVELS; l++) {
    const unsigned s = 1u << l;
    if ((threadIdx.x & (2 * s - 1)) == 0) c[threadIdx.x] = apply(ops->piece[l], c[threadIdx.x]) ^ c[threadIdx.x + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) partials[blockIdx.x] = c[0];
}

// Block i: chunk i's segments, front-padded with zeros to a power of two.
__global__ void crc_join(const tpx_crc_ops_t *__restrict__ ops, Batch b, const uint32_t *partials, uint32_t *out) {
  __shared__ uint32_t c[kMaxSegs];
  const uint32_t i = blockIdx.x, n = b.seg0[i + 1] - b.seg0[i];
  uint32_t n2 = 1, levels = 0;
  while (n2 < n) n2 <<= 1, levels++;
  const uint32_t lead = n2 - n;
  for (uint32_t t = threadIdx.x; t < n2; t += blockDim.x) c[t] = t >= lead ? partials[b.seg0[i] + t - lead] : 0u;
  __syncthreads();
  for (uint32_t l = 0; l < levels; l++) {
    const unsigned s = 1u << l;
    for (uint32_t t = threadIdx.x; t < n2; t += blockDim.x)
      if ((t & (2 * s - 1)) == 0) c[t] = apply(ops->seg[l], c[t]) ^ c[t + s];
    __syncthreads();
  }
  if (threadIdx.x == 0) out[b.idx[i]] = ~(c[0] ^ b.init[i]);
}

}  // namespace

extern "C" int tpx__crc_kernel_launch(const tpx_crc_ops_t *ops, const void *const *p, const uint64_t *len,
                                      const uint32_t *init, const uint32_t *idx, uint32_t n, uint32_t *partials,
                                      uint32_t *out, void *stream) {
  if (n == 0 || n > TPX_CRC_BATCH) return cudaErrorInvalidValue;
  Batch b;
  b.n = n;
  b.seg0[0] = 0;
  for (uint32_t i = 0; i < n; i++) {
    const uint64_t segs = (len[i] + TPX_CRC_SEG - 1) / TPX_CRC_SEG;
    if (len[i] == 0 || segs > kMaxSegs) return cudaErrorInvalidValue;
    b.p[i] = static_cast<const uint8_t *>(p[i]);
    b.len[i] = len[i];
    b.init[i] = init[i];
    b.idx[i] = idx[i];
    b.seg0[i + 1] = b.seg0[i] + static_cast<uint32_t>(segs);
  }
  cudaStream_t st = static_cast<cudaStream_t>(stream);
  void *a1[] = {&ops, &b, &partials};
  cudaError_t e = cudaLaunchKernel(reinterpret_cast<const void *>(crc_segments), dim3(b.seg0[n]),
                                   dim3(TPX_CRC_THREADS), a1, 0, st);
  if (e != cudaSuccess) return e;
  void *a2[] = {&ops, &b, &partials, &out};
  return cudaLaunchKernel(reinterpret_cast<const void *>(crc_join), dim3(n), dim3(TPX_CRC_THREADS), a2, 0, st);
}
