/* What nvcc's generated code calls to register a module's kernels when it is
 * loaded (crt/host_runtime.h): accepted, so libraries with device code load;
 * launching any kernel fails, as nothing here can run one. */
#include "fake_cudart.h"

#include <stdint.h>

/* Their declarations, from crt/host_runtime.h (a C++ header). */
void **__cudaRegisterFatBinary(void *fatCubin);
void __cudaRegisterFatBinaryEnd(void **handle);
void __cudaUnregisterFatBinary(void **handle);
void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize);
void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
                       size_t size, int constant, int global);
unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st *stream);
cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream);
cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func);
cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                               cudaStream_t stream);

static void *module_handle; /* any non-NULL handle; its address */

void **__cudaRegisterFatBinary(void *fatCubin) {
  (void)fatCubin;
  return &module_handle;
}

void __cudaRegisterFatBinaryEnd(void **handle) { (void)handle; }
void __cudaUnregisterFatBinary(void **handle) { (void)handle; }

void __cudaRegisterFunction(void **handle, const char *hostFun, char *deviceFun, const char *deviceName,
                            int thread_limit, uint3 *tid, uint3 *bid, dim3 *bDim, dim3 *gDim, int *wSize) {
  (void)handle, (void)hostFun, (void)deviceFun, (void)deviceName, (void)thread_limit;
  (void)tid, (void)bid, (void)bDim, (void)gDim, (void)wSize;
}

void __cudaRegisterVar(void **handle, char *hostVar, char *deviceAddress, const char *deviceName, int ext,
                       size_t size, int constant, int global) {
  (void)handle, (void)hostVar, (void)deviceAddress, (void)deviceName, (void)ext, (void)size, (void)constant,
      (void)global;
}

unsigned __cudaPushCallConfiguration(dim3 gridDim, dim3 blockDim, size_t sharedMem, struct CUstream_st *stream) {
  (void)gridDim, (void)blockDim, (void)sharedMem, (void)stream;
  return 0;
}

cudaError_t __cudaPopCallConfiguration(dim3 *gridDim, dim3 *blockDim, size_t *sharedMem, void *stream) {
  (void)gridDim, (void)blockDim, (void)sharedMem, (void)stream;
  return cudaSuccess;
}

cudaError_t cudaLaunchKernel(const void *func, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                             cudaStream_t stream) {
  (void)func, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
  return fake_cudart_err(cudaErrorNotSupported);
}

cudaError_t __cudaGetKernel(cudaKernel_t *kernel, const void *func) {
  if (kernel) *kernel = (cudaKernel_t)(uintptr_t)func;
  return cudaSuccess;
}

cudaError_t __cudaLaunchKernel(cudaKernel_t kernel, dim3 gridDim, dim3 blockDim, void **args, size_t sharedMem,
                               cudaStream_t stream) {
  (void)kernel, (void)gridDim, (void)blockDim, (void)args, (void)sharedMem, (void)stream;
  return fake_cudart_err(cudaErrorNotSupported);
}
