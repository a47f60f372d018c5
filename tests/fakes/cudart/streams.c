/* Streams, events and asynchronous copies: every operation here completes
 * before it returns (host memory underneath), so a stream is a token and an
 * event is always complete. Also the driver entry points by name and the
 * device attributes our processes ask for. */
#include "fake_cudart.h"

#include <stdlib.h>
#include <string.h>

struct CUstream_st {
  int unused;
};
struct CUevent_st {
  int unused;
};

cudaError_t cudaStreamCreateWithFlags(cudaStream_t *s, unsigned int flags) {
  (void)flags;
  cudaError_t e = fake_cudart_bind();
  if (e) return e;
  if (!s || !(*s = calloc(1, sizeof(**s)))) return fake_cudart_err(cudaErrorInvalidValue);
  return cudaSuccess;
}

cudaError_t cudaStreamDestroy(cudaStream_t s) {
  free(s);
  return cudaSuccess;
}

cudaError_t cudaStreamSynchronize(cudaStream_t s) {
  (void)s;
  return fake_cudart_init();
}

cudaError_t cudaEventCreateWithFlags(cudaEvent_t *ev, unsigned int flags) {
  (void)flags;
  cudaError_t e = fake_cudart_bind();
  if (e) return e;
  if (!ev || !(*ev = calloc(1, sizeof(**ev)))) return fake_cudart_err(cudaErrorInvalidValue);
  return cudaSuccess;
}

cudaError_t cudaEventDestroy(cudaEvent_t ev) {
  free(ev);
  return cudaSuccess;
}

cudaError_t cudaEventRecord(cudaEvent_t ev, cudaStream_t s) {
  (void)s;
  return ev ? cudaSuccess : fake_cudart_err(cudaErrorInvalidValue);
}

cudaError_t cudaEventQuery(cudaEvent_t ev) { return ev ? cudaSuccess : fake_cudart_err(cudaErrorInvalidValue); }
cudaError_t cudaEventSynchronize(cudaEvent_t ev) { return cudaEventQuery(ev); }

cudaError_t cudaMemcpyAsync(void *dst, const void *src, size_t n, enum cudaMemcpyKind kind, cudaStream_t s) {
  (void)s;
  return cudaMemcpy(dst, src, n, kind);
}

cudaError_t cudaMemcpyBatchAsync(void *const *dsts, const void *const *srcs, const size_t *sizes, size_t count,
                                 struct cudaMemcpyAttributes *attrs, size_t *attrsIdxs, size_t numAttrs,
                                 cudaStream_t s) {
  (void)attrs, (void)attrsIdxs, (void)numAttrs, (void)s;
  for (size_t i = 0; i < count; i++) {
    cudaError_t e = cudaMemcpy(dsts[i], srcs[i], sizes[i], cudaMemcpyDefault);
    if (e) return e;
  }
  return cudaSuccess;
}

/* Host memory is already "mapped" for the fake device. */
cudaError_t cudaHostRegister(void *p, size_t size, unsigned int flags) {
  (void)flags;
  return p && size ? fake_cudart_init() : fake_cudart_err(cudaErrorInvalidValue);
}

cudaError_t cudaHostUnregister(void *p) { return p ? cudaSuccess : fake_cudart_err(cudaErrorInvalidValue); }

cudaError_t cudaGetDriverEntryPointByVersion(const char *symbol, void **fn, unsigned int version,
                                             unsigned long long flags, enum cudaDriverEntryPointQueryResult *status) {
  cudaError_t e = fake_cudart_init();
  if (e) return e;
  CUdriverProcAddressQueryResult st = CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  CUresult rc = cuGetProcAddress(symbol, fn, (int)version, flags, &st);
  if (status) *status = st == CU_GET_PROC_ADDRESS_SUCCESS ? cudaDriverEntryPointSuccess : cudaDriverEntryPointSymbolNotFound;
  return rc == CUDA_SUCCESS ? cudaSuccess : fake_cudart_err(cudaErrorInvalidValue);
}

/* What the attributes describe for an H100 where someone might ask (SMs);
 * everything else 0. */
cudaError_t cudaDeviceGetAttribute(int *value, enum cudaDeviceAttr attr, int device) {
  int n;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e) return e;
  if (!value || device < 0 || device >= n) return fake_cudart_err(cudaErrorInvalidValue);
  *value = attr == cudaDevAttrMultiProcessorCount ? 132 : 0;
  return cudaSuccess;
}

cudaError_t cudaOccupancyMaxActiveBlocksPerMultiprocessorWithFlags(int *blocks, const void *func, int blockSize,
                                                                  size_t smem, unsigned int flags) {
  (void)func, (void)blockSize, (void)smem, (void)flags;
  if (blocks) *blocks = 1;
  return cudaSuccess;
}
