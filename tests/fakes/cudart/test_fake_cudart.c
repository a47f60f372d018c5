/* The CUDA runtime test double (tests/fakes/cudart): what the TCPX plugin
 * asks of the runtime (the current device, a device by PCI id) and what our
 * processes ask around it, answered from the driver test double. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>
#include <cuda.h>
#include <cuda_runtime_api.h>

static void t_devices(void **state) {
  (void)state;
  int n = -1, d = -1;
  assert_int_equal(cudaGetDeviceCount(&n), cudaSuccess);
  assert_int_equal(n, 2);
  assert_int_equal(cudaGetDevice(&d), cudaSuccess);
  assert_int_equal(d, 0); /* the default device */
  assert_int_equal(cudaSetDevice(1), cudaSuccess);
  assert_int_equal(cudaGetDevice(&d), cudaSuccess);
  assert_int_equal(d, 1);
  /* The runtime follows the driver's current context (the plugin pushes its own). */
  CUcontext c0, popped;
  assert_int_equal(cuDevicePrimaryCtxRetain(&c0, 0), CUDA_SUCCESS);
  assert_int_equal(cuCtxPushCurrent(c0), CUDA_SUCCESS);
  assert_int_equal(cudaGetDevice(&d), cudaSuccess);
  assert_int_equal(d, 0);
  assert_int_equal(cuCtxPopCurrent(&popped), CUDA_SUCCESS);
  assert_int_equal(cudaSetDevice(2), cudaErrorInvalidDevice);
  assert_int_equal(cudaGetLastError(), cudaErrorInvalidDevice);
  assert_int_equal(cudaGetLastError(), cudaSuccess);
  assert_int_equal(cudaDeviceGetByPCIBusId(&d, "0000:14:00.0"), cudaSuccess);
  assert_int_equal(d, 1);
  assert_int_equal(cudaDeviceGetByPCIBusId(&d, "0000:ff:00.0"), cudaErrorInvalidDevice);
  char pci[32];
  assert_int_equal(cudaDeviceGetPCIBusId(pci, sizeof(pci), 0), cudaSuccess);
  assert_string_equal(pci, "0000:04:00.0");
  assert_string_equal(cudaGetErrorName(cudaErrorNoDevice), "cudaErrorNoDevice");
}

static void t_memory(void **state) {
  (void)state;
  void *p, *h, *hd;
  assert_int_equal(cudaMalloc(&p, 1 << 20), cudaSuccess);
  assert_int_equal(cudaMemset(p, 7, 1 << 20), cudaSuccess);
  char out[4];
  assert_int_equal(cudaMemcpy(out, (char *)p + 100, 4, cudaMemcpyDeviceToHost), cudaSuccess);
  assert_memory_equal(out, "\7\7\7\7", 4);
  assert_int_equal(cudaHostAlloc(&h, 4096, cudaHostAllocMapped), cudaSuccess);
  assert_int_equal(cudaHostGetDevicePointer(&hd, h, 0), cudaSuccess);
  assert_ptr_equal(hd, h);
  assert_int_equal(cudaFreeHost(h), cudaSuccess);
  assert_int_equal(cudaFree(p), cudaSuccess);
  assert_int_equal(cudaFree(p), cudaErrorInvalidValue);
  dim3 g = {1, 1, 1};
  assert_int_equal(cudaLaunchKernel((const void *)t_memory, g, g, NULL, 0, NULL), cudaErrorNotSupported);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(t_devices), cmocka_unit_test(t_memory)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
