/* Runtime allocations and copies: the driver test double's, whose "device"
 * memory is host memory, so every copy is a memcpy. */
#include "fake_cudart.h"

#include <string.h>

static cudaError_t from(CUresult rc, cudaError_t otherwise) {
  return rc == CUDA_SUCCESS ? cudaSuccess : fake_cudart_err(otherwise);
}

cudaError_t cudaMalloc(void **p, size_t size) {
  cudaError_t e = fake_cudart_bind();
  if (e) return e;
  if (!p) return fake_cudart_err(cudaErrorInvalidValue);
  CUdeviceptr d;
  CUresult rc = cuMemAlloc(&d, size);
  if (rc == CUDA_SUCCESS) *p = (void *)(uintptr_t)d;
  return from(rc, cudaErrorMemoryAllocation);
}

cudaError_t cudaFree(void *p) {
  cudaError_t e = fake_cudart_init();
  return e ? e : from(cuMemFree((CUdeviceptr)(uintptr_t)p), cudaErrorInvalidValue);
}

cudaError_t cudaHostAlloc(void **p, size_t size, unsigned int flags) {
  cudaError_t e = fake_cudart_bind();
  return e ? e : from(cuMemHostAlloc(p, size, flags), cudaErrorMemoryAllocation);
}

cudaError_t cudaMallocHost(void **p, size_t size) { return cudaHostAlloc(p, size, 0); }

cudaError_t cudaFreeHost(void *p) {
  cudaError_t e = fake_cudart_init();
  return e ? e : from(cuMemFreeHost(p), cudaErrorInvalidValue);
}

cudaError_t cudaHostGetDevicePointer(void **dev, void *host, unsigned int flags) {
  cudaError_t e = fake_cudart_init();
  if (e) return e;
  CUdeviceptr d;
  CUresult rc = cuMemHostGetDevicePointer(&d, host, flags);
  if (rc == CUDA_SUCCESS) *dev = (void *)(uintptr_t)d;
  return from(rc, cudaErrorInvalidValue);
}

cudaError_t cudaMemcpy(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind) {
  (void)kind;
  cudaError_t e = fake_cudart_init();
  if (e) return e;
  if (n && (!dst || !src)) return fake_cudart_err(cudaErrorInvalidValue);
  memmove(dst, src, n);
  return cudaSuccess;
}

cudaError_t cudaMemset(void *p, int value, size_t n) {
  cudaError_t e = fake_cudart_init();
  if (e) return e;
  if (n && !p) return fake_cudart_err(cudaErrorInvalidValue);
  memset(p, value, n);
  return cudaSuccess;
}
