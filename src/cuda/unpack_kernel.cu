// The unpack kernel: scatter-gather copy of one received chunk's fragments
// from the bounce buffer into the receive buffer.
//
// Work unit = one warp on one fragment (or one slice of a large fragment).
// Each warp aligns the destination to 16 bytes with a byte-wise head, then
// moves 16-byte vectors with kUnroll loads in flight per lane before the
// stores (a 4 KiB page is exactly one unrolled pass of a warp), then a
// byte-wise tail. The source side picks the widest loads its alignment
// relative to the destination allows: 16-byte, 4-byte, or 4-byte loads
// funnel-shifted together when source and destination differ in their
// low two bits. Every load touches only 4-byte words that hold at least one
// byte of the fragment, so nothing outside the allocation is read.
#include <cuda_runtime.h>
#include <stdint.h>

#include "cuda/unpack_kernel.h"

namespace {

constexpr int kUnroll = 8;

struct AlignedSrc {  // source 16-byte aligned
  const uint4 *p;
  __device__ __forceinline__ uint4 operator()(uint64_t j) const { return p[j]; }
};

struct WordSrc {  // source 4-byte aligned
  const uint32_t *p;
  __device__ __forceinline__ uint4 operator()(uint64_t j) const {
    const uint32_t *q = p + 4 * j;
    return make_uint4(q[0], q[1], q[2], q[3]);
  }
};

struct ShiftSrc {  // source off by 1..3 bytes from a word: p is rounded down
  const uint32_t *p;
  uint32_t shift;  // 8, 16 or 24
  __device__ __forceinline__ uint4 operator()(uint64_t j) const {
    const uint32_t *q = p + 4 * j;
    const uint32_t w0 = q[0], w1 = q[1], w2 = q[2], w3 = q[3], w4 = q[4];
    return make_uint4(__funnelshift_r(w0, w1, shift), __funnelshift_r(w1, w2, shift),
                      __funnelshift_r(w2, w3, shift), __funnelshift_r(w3, w4, shift));
  }
};

// Lane `lane` of a warp copies vectors lane, lane + 32, ... of nv.
template <class Src>
__device__ __forceinline__ void copy_vectors(Src src, uint4 *dst, uint64_t nv, unsigned lane) {
  uint64_t i = lane;
  for (; i + 32 * (kUnroll - 1) < nv; i += 32 * kUnroll) {
    uint4 v[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; k++) v[k] = src(i + 32 * k);
#pragma unroll
    for (int k = 0; k < kUnroll; k++) dst[i + 32 * k] = v[k];
  }
  // Fewer than kUnroll vectors left for this lane.
  uint4 v[kUnroll];
#pragma unroll
  for (int k = 0; k < kUnroll; k++) v[k] = (i + 32 * k < nv) ? src(i + 32 * k) : make_uint4(0, 0, 0, 0);
#pragma unroll
  for (int k = 0; k < kUnroll; k++)
    if (i + 32 * k < nv) dst[i + 32 * k] = v[k];
}

__device__ __forceinline__ void warp_copy(const uint8_t *s, uint8_t *d, uint64_t n, unsigned lane) {
  uint64_t head = (16u - (static_cast<uint32_t>(reinterpret_cast<uintptr_t>(d)) & 15u)) & 15u;
  if (head > n) head = n;
  if (lane < head) d[lane] = s[lane];
  s += head;
  d += head;
  n -= head;
  const uint64_t nv = n >> 4;
  if (nv) {
    uint4 *dv = reinterpret_cast<uint4 *>(d);
    const uint32_t r = static_cast<uint32_t>(reinterpret_cast<uintptr_t>(s)) & 15u;
    if (r == 0) {
      copy_vectors(AlignedSrc{reinterpret_cast<const uint4 *>(s)}, dv, nv, lane);
    } else if ((r & 3u) == 0) {
      copy_vectors(WordSrc{reinterpret_cast<const uint32_t *>(s)}, dv, nv, lane);
    } else {
      const uint32_t *base =
          reinterpret_cast<const uint32_t *>(reinterpret_cast<uintptr_t>(s) & ~uintptr_t(3));
      copy_vectors(ShiftSrc{base, 8u * (r & 3u)}, dv, nv, lane);
    }
  }
  const uint64_t done = nv << 4;
  if (lane < n - done) d[done + lane] = s[done + lane];
}

// The work loop shared by both kernels: desc points to global memory (device
// or host-mapped) or into the kernel's parameter space.
__device__ __forceinline__ void unpack_body(const uint4 *desc, uint32_t cnt, uint32_t slice_shift,
                                            const uint8_t *__restrict__ src, uint8_t *__restrict__ dst) {
  const unsigned lane = threadIdx.x & 31u;
  const uint64_t warps_per_block = blockDim.x >> 5;
  const uint64_t units = static_cast<uint64_t>(cnt) << slice_shift;
  const uint64_t stride = static_cast<uint64_t>(gridDim.x) * warps_per_block;
  const uint64_t slice_mask = (1ull << slice_shift) - 1;
  uint64_t w = blockIdx.x * warps_per_block + (threadIdx.x >> 5);
  // Entries are fetched one unit ahead, so a slow (host-mapped) descriptor
  // read overlaps the previous fragment's copy. Lanes read the same address.
  uint4 next = w < units ? desc[w >> slice_shift] : make_uint4(0, 0, 0, 0);
  for (; w < units; w += stride) {
    const uint4 m = next;
    if (w + stride < units) next = desc[(w + stride) >> slice_shift];
    const uint64_t len = m.y;
    const uint64_t dst_off = static_cast<uint64_t>(m.z) | (static_cast<uint64_t>(m.w) << 32);
    uint64_t b = 0, e = len;
    if (slice_shift) {
      // Slices start at multiples of 16 from the fragment start, so every
      // slice keeps the fragment's relative alignment.
      const uint64_t per = (((len + slice_mask) >> slice_shift) + 15) & ~15ull;
      b = (w & slice_mask) * per;
      if (b >= len) continue;
      e = b + per < len ? b + per : len;
    }
    warp_copy(src + m.x + b, dst + dst_off + b, e - b, lane);
  }
}

__global__ void __launch_bounds__(TPX_UNPACK_KERNEL_MAX_THREADS)
    unpack_kernel(const tpx_unpack_meta_t *__restrict__ desc, uint32_t cnt, uint32_t slice_shift,
                  const uint8_t *__restrict__ src, uint8_t *__restrict__ dst) {
  unpack_body(reinterpret_cast<const uint4 *>(desc), cnt, slice_shift, src, dst);
}

// Entries passed by value in the launch itself (kernel parameters may be up
// to 32764 bytes on Volta and newer since CUDA 12.1): no descriptor copy on
// the stream and no dependent read over PCIe before the first data load.
template <int N>
struct ParamDesc {
  tpx_unpack_meta_t e[N];
};

template <int N>
__global__ void __launch_bounds__(TPX_UNPACK_KERNEL_MAX_THREADS)
    unpack_kernel_param(const __grid_constant__ ParamDesc<N> d, uint32_t cnt, uint32_t slice_shift,
                        const uint8_t *__restrict__ src, uint8_t *__restrict__ dst) {
  unpack_body(reinterpret_cast<const uint4 *>(&d.e[0]), cnt, slice_shift, src, dst);
}

static_assert(sizeof(ParamDesc<TPX_UNPACK_PARAM_MAX>) + 32 <= 32764, "kernel parameter limit");

uint64_t grid_for(uint32_t cnt, uint32_t slice_shift, int threads, int blocks_cap) {
  const uint64_t warps = static_cast<uint64_t>(threads / 32);
  const uint64_t units = static_cast<uint64_t>(cnt) << slice_shift;
  uint64_t blocks = (units + warps - 1) / warps;
  return blocks > static_cast<uint64_t>(blocks_cap) ? static_cast<uint64_t>(blocks_cap) : blocks;
}

bool bad_shape(int threads, int blocks_cap) {
  return threads < 32 || threads > TPX_UNPACK_KERNEL_MAX_THREADS || threads % 32 || blocks_cap < 1;
}

}  // namespace

extern "C" int tpx__unpacker_kernel_launch(const tpx_unpack_meta_t *desc, uint32_t cnt,
                                        uint32_t slice_shift, const void *src, void *dst,
                                        int threads, int blocks_cap, void *stream) {
  if (cnt == 0) return cudaSuccess;
  if (bad_shape(threads, blocks_cap)) return cudaErrorInvalidValue;
  const tpx_unpack_meta_t *a_desc = desc;
  uint32_t a_cnt = cnt, a_shift = slice_shift;
  const uint8_t *a_src = static_cast<const uint8_t *>(src);
  uint8_t *a_dst = static_cast<uint8_t *>(dst);
  void *args[] = {&a_desc, &a_cnt, &a_shift, &a_src, &a_dst};
  // cudaLaunchKernel reports launch errors directly: no reliance on the
  // thread's sticky last-error state.
  return cudaLaunchKernel(reinterpret_cast<const void *>(unpack_kernel),
                          dim3(static_cast<unsigned>(grid_for(cnt, slice_shift, threads, blocks_cap))),
                          dim3(static_cast<unsigned>(threads)), args, 0, static_cast<cudaStream_t>(stream));
}

extern "C" int tpx__unpacker_kernel_launch_param(const tpx_unpack_meta_t *entries, uint32_t cnt,
                                              uint32_t slice_shift, const void *src, void *dst,
                                              int threads, int blocks_cap, void *stream) {
  if (cnt == 0) return cudaSuccess;
  if (bad_shape(threads, blocks_cap) || cnt > TPX_UNPACK_PARAM_MAX) return cudaErrorInvalidValue;
  // The smallest instantiation that holds cnt entries: the launch copies the
  // whole parameter block, so small chunks pay for small blocks. The caller's
  // buffer holds TPX_UNPACK_PARAM_MAX entries (the tail is never read).
  const void *fn;
  if (cnt <= 64) fn = reinterpret_cast<const void *>(unpack_kernel_param<64>);
  else if (cnt <= 256) fn = reinterpret_cast<const void *>(unpack_kernel_param<256>);
  else if (cnt <= 1024) fn = reinterpret_cast<const void *>(unpack_kernel_param<1024>);
  else fn = reinterpret_cast<const void *>(unpack_kernel_param<TPX_UNPACK_PARAM_MAX>);
  uint32_t a_cnt = cnt, a_shift = slice_shift;
  const uint8_t *a_src = static_cast<const uint8_t *>(src);
  uint8_t *a_dst = static_cast<uint8_t *>(dst);
  void *args[] = {const_cast<tpx_unpack_meta_t *>(entries), &a_cnt, &a_shift, &a_src, &a_dst};
  return cudaLaunchKernel(fn, dim3(static_cast<unsigned>(grid_for(cnt, slice_shift, threads, blocks_cap))),
                          dim3(static_cast<unsigned>(threads)), args, 0, static_cast<cudaStream_t>(stream));
}

extern "C" int tpx__unpacker_kernel_max_blocks(int threads, int *blocks) {
  int dev = 0, sms = 0, per_sm = 0;
  cudaError_t e = cudaGetDevice(&dev);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  if (e == cudaSuccess)
    e = cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, unpack_kernel, threads, 0);
  if (e != cudaSuccess) return e;
  *blocks = (sms > 0 ? sms : 1) * (per_sm > 0 ? per_sm : 1);
  return cudaSuccess;
}
