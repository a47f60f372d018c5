// copy_share: pinned host <-> GPU copies in 512 KiB pieces, the way the
// engine's staging issues them, by SM kernel (through the pinned mapping)
// and by copy engine (cudaMemcpyAsync). Run two at once, one per direction,
// to see what two processes sharing one GPU get (bench/copy_share.sh).
//
//   copy_share h2d|d2h CHUNK BLOCKS NSTREAMS TOTAL_MIB [REPS [sm|ce]]
//
// Prints, per way: the best and mean GB/s (1e9 B/s) of REPS passes over
// TOTAL_MIB, and the shortest time of one CHUNK copy alone. The first
// and last byte of every piece are checked after the last pass.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>

#define CK(x)                                                                  \
  do {                                                                         \
    cudaError_t e_ = (x);                                                      \
    if (e_ != cudaSuccess) {                                                   \
      fprintf(stderr, "%s: %s\n", #x, cudaGetErrorString(e_));                 \
      exit(1);                                                                 \
    }                                                                          \
  } while (0)

__global__ void copy16(const uint4 *__restrict__ s, uint4 *__restrict__ d, size_t n) {
  const size_t st = (size_t)gridDim.x * blockDim.x;
  size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x;
  for (; i + 3 * st < n; i += 4 * st) { // four loads in flight before the stores
    uint4 a = s[i], b = s[i + st], c = s[i + 2 * st], e = s[i + 3 * st];
    d[i] = a;
    d[i + st] = b;
    d[i + 2 * st] = c;
    d[i + 3 * st] = e;
  }
  for (; i < n; i += st) d[i] = s[i];
}

struct run {
  int h2d, blocks, ns, reps;
  size_t chunk, total;
  unsigned char *host, *host_dev, *gpu;
  cudaStream_t st[8];
  cudaEvent_t e0, e1, join[8];
};

static void piece(run &r, int ce, size_t k, cudaStream_t s) {
  unsigned char *src = (r.h2d ? r.host_dev : r.gpu) + k * r.chunk;
  unsigned char *dst = (r.h2d ? r.gpu : r.host_dev) + k * r.chunk;
  if (ce) {
    CK(cudaMemcpyAsync(dst, src, r.chunk, cudaMemcpyDefault, s));
  } else {
    copy16<<<r.blocks, 256, 0, s>>>((const uint4 *)src, (uint4 *)dst, r.chunk / 16);
    CK(cudaGetLastError());
  }
}

static double pass(run &r, int ce) {
  size_t n = r.total / r.chunk;
  CK(cudaEventRecord(r.e0, r.st[0]));
  for (int s = 1; s < r.ns; s++) CK(cudaStreamWaitEvent(r.st[s], r.e0, 0));
  for (size_t k = 0; k < n; k++) piece(r, ce, k, r.st[k % r.ns]);
  for (int s = 1; s < r.ns; s++) {
    CK(cudaEventRecord(r.join[s], r.st[s]));
    CK(cudaStreamWaitEvent(r.st[0], r.join[s], 0));
  }
  CK(cudaEventRecord(r.e1, r.st[0]));
  CK(cudaEventSynchronize(r.e1));
  float ms = 0;
  CK(cudaEventElapsedTime(&ms, r.e0, r.e1));
  return (double)r.total / (ms * 1e6);
}

static double one_piece_us(run &r, int ce) {
  float best = 1e9f;
  for (int i = 0; i < 20; i++) {
    CK(cudaEventRecord(r.e0, r.st[0]));
    piece(r, ce, 0, r.st[0]);
    CK(cudaEventRecord(r.e1, r.st[0]));
    CK(cudaEventSynchronize(r.e1));
    float ms = 0;
    CK(cudaEventElapsedTime(&ms, r.e0, r.e1));
    if (ms < best) best = ms;
  }
  return best * 1e3;
}

static int check(run &r, unsigned char want) {
  size_t n = r.total / r.chunk;
  for (size_t k = 0; k < n; k++) {
    unsigned char a = 0, b = 0;
    const unsigned char *p = (r.h2d ? r.gpu : r.host) + k * r.chunk;
    if (r.h2d) {
      CK(cudaMemcpy(&a, p, 1, cudaMemcpyDeviceToHost));
      CK(cudaMemcpy(&b, p + r.chunk - 1, 1, cudaMemcpyDeviceToHost));
    } else {
      a = p[0];
      b = p[r.chunk - 1];
    }
    if (a != want || b != want) {
      fprintf(stderr, "piece %zu: %u %u, want %u\n", k, a, b, want);
      return 1;
    }
  }
  return 0;
}

int main(int argc, char **argv) {
  const char *only = argc > 7 ? argv[7] : NULL; /* one way only: two processes overlap for their whole run */
  if (argc < 6 || (strcmp(argv[1], "h2d") && strcmp(argv[1], "d2h")) ||
      (only && strcmp(only, "sm") && strcmp(only, "ce"))) {
    fprintf(stderr, "usage: copy_share h2d|d2h CHUNK BLOCKS NSTREAMS TOTAL_MIB [REPS [sm|ce]]\n");
    return 2;
  }
  run r = {};
  r.h2d = argv[1][0] == 'h';
  r.chunk = strtoull(argv[2], NULL, 0);
  r.blocks = atoi(argv[3]);
  r.ns = atoi(argv[4]);
  r.total = strtoull(argv[5], NULL, 0) << 20;
  r.reps = argc > 6 ? atoi(argv[6]) : 6;
  if (r.chunk < 16 || r.chunk % 16 || r.total < r.chunk || r.total % r.chunk || r.blocks < 1 || r.ns < 1 ||
      r.ns > 8 || r.reps < 1) {
    fprintf(stderr, "copy_share: bad sizes\n");
    return 2;
  }
  CK(cudaHostAlloc((void **)&r.host, r.total, cudaHostAllocMapped | cudaHostAllocPortable));
  CK(cudaHostGetDevicePointer((void **)&r.host_dev, r.host, 0));
  CK(cudaMalloc((void **)&r.gpu, r.total));
  for (int s = 0; s < r.ns; s++) {
    CK(cudaStreamCreateWithFlags(&r.st[s], cudaStreamNonBlocking));
    CK(cudaEventCreateWithFlags(&r.join[s], cudaEventDisableTiming));
  }
  CK(cudaEventCreate(&r.e0));
  CK(cudaEventCreate(&r.e1));
  int bad = 0;
  for (int ce = 0; ce < 2; ce++) {
    if (only && strcmp(only, ce ? "ce" : "sm")) continue;
    unsigned char v = (unsigned char)(0x5a + ce);
    memset(r.host, r.h2d ? v : 0, r.total);
    CK(cudaMemset(r.gpu, r.h2d ? 0 : v, r.total));
    CK(cudaDeviceSynchronize());
    double best = 0, sum = 0;
    for (int i = 0; i < r.reps; i++) {
      double g = pass(r, ce);
      sum += g;
      if (g > best) best = g;
    }
    bad |= check(r, v);
    printf("%s %s chunk %zu blocks %d streams %d: best %.1f mean %.1f GB/s over %d passes of %zu MiB, one piece %.1f us\n",
           argv[1], ce ? "ce" : "sm", r.chunk, r.blocks, r.ns, best, sum / r.reps, r.reps, r.total >> 20,
           one_piece_us(r, ce));
  }
  for (int s = 0; s < r.ns; s++) {
    CK(cudaStreamDestroy(r.st[s]));
    CK(cudaEventDestroy(r.join[s]));
  }
  CK(cudaEventDestroy(r.e0));
  CK(cudaEventDestroy(r.e1));
  CK(cudaFree(r.gpu));
  CK(cudaFreeHost(r.host));
  return bad;
}
