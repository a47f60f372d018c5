/* A test double of the CUDA runtime (libcudart.so.13) over the driver test
 * double (tests/fakes/cuda): the runtime calls Google's GPUDirect-TCPX plugin
 * makes when it is linked with the shared runtime (scripts/build-tcpx-plugin.sh),
 * and the ones a process of ours makes around it. Written from
 * cuda_runtime_api.h. Kernels cannot run: launches fail with
 * cudaErrorNotSupported. Never installed; tests put it on LD_LIBRARY_PATH
 * beside the fake libcuda.so.1.
 *
 * This file: devices, the current device, error names. */
#include "fake_cudart.h"

#include <stdio.h>

static _Thread_local int current_dev;
static _Thread_local cudaError_t last_error;

cudaError_t fake_cudart_err(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
  return e;
}

/* The runtime starts the driver itself. */
cudaError_t fake_cudart_init(void) {
  CUresult rc = cuInit(0);
  if (rc == CUDA_ERROR_NO_DEVICE) return fake_cudart_err(cudaErrorNoDevice);
  return rc == CUDA_SUCCESS ? cudaSuccess : fake_cudart_err(cudaErrorInitializationError);
}

/* Makes the thread's device's primary context current, as the runtime does
 * before any work. */
cudaError_t fake_cudart_bind(void) {
  cudaError_t e = fake_cudart_init();
  if (e) return e;
  CUcontext cur = NULL;
  cuCtxGetCurrent(&cur);
  if (cur) return cudaSuccess;
  CUcontext ctx;
  if (cuDevicePrimaryCtxRetain(&ctx, current_dev) != CUDA_SUCCESS) return fake_cudart_err(cudaErrorInvalidDevice);
  cuCtxSetCurrent(ctx);
  return cudaSuccess;
}

cudaError_t cudaGetDeviceCount(int *count) {
  if (!count) return fake_cudart_err(cudaErrorInvalidValue);
  cudaError_t e = fake_cudart_init();
  if (e) return *count = 0, e;
  return cuDeviceGetCount(count) == CUDA_SUCCESS ? cudaSuccess : fake_cudart_err(cudaErrorInitializationError);
}

/* The device of the thread's current context when there is one (the
 * runtime follows the driver's current context), else the one set last. */
cudaError_t cudaGetDevice(int *device) {
  if (!device) return fake_cudart_err(cudaErrorInvalidValue);
  cudaError_t e = fake_cudart_init();
  if (e) return e;
  CUdevice d;
  *device = cuCtxGetDevice(&d) == CUDA_SUCCESS ? d : current_dev;
  return cudaSuccess;
}

cudaError_t cudaSetDevice(int device) {
  int n;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e) return e;
  if (device < 0 || device >= n) return fake_cudart_err(cudaErrorInvalidDevice);
  current_dev = device;
  CUcontext ctx;
  if (cuDevicePrimaryCtxRetain(&ctx, device) != CUDA_SUCCESS) return fake_cudart_err(cudaErrorInvalidDevice);
  cuCtxSetCurrent(ctx);
  return cudaSuccess;
}

cudaError_t cudaDeviceGetByPCIBusId(int *device, const char *pciBusId) {
  cudaError_t e = fake_cudart_init();
  if (e) return e;
  CUdevice d;
  if (!device || !pciBusId || cuDeviceGetByPCIBusId(&d, pciBusId) != CUDA_SUCCESS)
    return fake_cudart_err(cudaErrorInvalidDevice);
  *device = d;
  return cudaSuccess;
}

cudaError_t cudaDeviceGetPCIBusId(char *pciBusId, int len, int device) {
  cudaError_t e = fake_cudart_init();
  if (e) return e;
  return cuDeviceGetPCIBusId(pciBusId, len, device) == CUDA_SUCCESS ? cudaSuccess
                                                                     : fake_cudart_err(cudaErrorInvalidDevice);
}

cudaError_t cudaDeviceSynchronize(void) { return fake_cudart_init(); }

cudaError_t cudaGetLastError(void) {
  cudaError_t e = last_error;
  last_error = cudaSuccess;
  return e;
}

cudaError_t cudaPeekAtLastError(void) { return last_error; }

static const struct {
  cudaError_t e;
  const char *name, *text;
} errors[] = {
    {cudaSuccess, "cudaSuccess", "no error"},
    {cudaErrorInvalidValue, "cudaErrorInvalidValue", "invalid argument"},
    {cudaErrorMemoryAllocation, "cudaErrorMemoryAllocation", "out of memory"},
    {cudaErrorInitializationError, "cudaErrorInitializationError", "initialization error"},
    {cudaErrorNoDevice, "cudaErrorNoDevice", "no CUDA-capable device is detected"},
    {cudaErrorInvalidDevice, "cudaErrorInvalidDevice", "invalid device ordinal"},
    {cudaErrorNotSupported, "cudaErrorNotSupported", "operation not supported"},
};

const char *cudaGetErrorName(cudaError_t e) {
  for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
    if (errors[i].e == e) return errors[i].name;
  return "cudaErrorUnknown";
}

const char *cudaGetErrorString(cudaError_t e) {
  for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
    if (errors[i].e == e) return errors[i].text;
  return "unknown error";
}
