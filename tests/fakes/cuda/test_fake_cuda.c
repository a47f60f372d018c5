/* The CUDA driver test double (tests/fakes/cuda) against what cuda.h
 * documents for the calls the GPUDirect-TCPX plugin and RxDM make. Linked
 * against the fake itself; FAKE_CUDA_DEVICES=2 (set by ctest). */
#define _GNU_SOURCE
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>

#include "fake_cuda.h"

#define OK(call) assert_int_equal((call), CUDA_SUCCESS)

static int setup(void **state) {
  (void)state;
  return cuInit(0) == CUDA_SUCCESS ? 0 : -1;
}

static void t_devices(void **state) {
  (void)state;
  int n;
  OK(cuDeviceGetCount(&n));
  assert_int_equal(n, 2);
  CUdevice d;
  OK(cuDeviceGet(&d, 1));
  assert_int_equal(cuDeviceGet(&d, 2), CUDA_ERROR_INVALID_DEVICE);
  char pci[32];
  OK(cuDeviceGetPCIBusId(pci, sizeof(pci), 1));
  assert_string_equal(pci, "0000:14:00.0");
  CUdevice back;
  OK(cuDeviceGetByPCIBusId(&back, "0000:14:00.0"));
  assert_int_equal(back, 1);
  OK(cuDeviceGetByPCIBusId(&back, "0000:04:00.0")); /* any case, as the plugin lower-cases */
  assert_int_equal(back, 0);
  assert_int_equal(cuDeviceGetByPCIBusId(&back, "0000:99:00.0"), CUDA_ERROR_INVALID_DEVICE);
  assert_int_equal(cuInit(1), CUDA_ERROR_INVALID_VALUE);
}

static void t_errors(void **state) {
  (void)state;
  const char *s;
  OK(cuGetErrorName(CUDA_ERROR_INVALID_CONTEXT, &s));
  assert_string_equal(s, "CUDA_ERROR_INVALID_CONTEXT");
  OK(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
  assert_string_equal(s, "out of memory");
  assert_int_equal(cuGetErrorName((CUresult)12345, &s), CUDA_ERROR_INVALID_VALUE);
  assert_null(s);
}

static void t_contexts(void **state) {
  (void)state;
  CUdevice d;
  assert_int_equal(cuCtxGetDevice(&d), CUDA_ERROR_INVALID_CONTEXT);
  CUcontext p0, p0b, c1, popped;
  OK(cuDevicePrimaryCtxRetain(&p0, 0));
  OK(cuDevicePrimaryCtxRetain(&p0b, 0));
  assert_ptr_equal(p0, p0b);
  assert_int_equal(fake_cuda_primary_refs(0), 2);
  OK(cuCtxPushCurrent(p0));
  OK(cuCtxGetDevice(&d));
  assert_int_equal(d, 0);
  /* cuCtxCreate (cuCtxCreate_v4) makes the new context current on top. */
  OK(cuCtxCreate(&c1, NULL, CU_CTX_MAP_HOST, 1));
  OK(cuCtxGetDevice(&d));
  assert_int_equal(d, 1);
  OK(cuCtxPopCurrent(&popped));
  assert_ptr_equal(popped, c1);
  OK(cuCtxGetDevice(&d));
  assert_int_equal(d, 0);
  OK(cuCtxPopCurrent(&popped));
  assert_ptr_equal(popped, p0);
  assert_int_equal(cuCtxPopCurrent(&popped), CUDA_ERROR_INVALID_CONTEXT);
  OK(cuCtxDestroy(c1));
  OK(cuDevicePrimaryCtxRelease(0));
  OK(cuDevicePrimaryCtxRelease(0));
  assert_int_equal(fake_cuda_primary_refs(0), 0);
  assert_int_equal(cuDevicePrimaryCtxRelease(0), CUDA_ERROR_INVALID_CONTEXT);
}

static void t_alloc(void **state) {
  (void)state;
  CUdeviceptr p;
  assert_int_equal(cuMemAlloc(&p, 4096), CUDA_ERROR_INVALID_CONTEXT); /* no current context */
  CUcontext ctx, popped;
  OK(cuDevicePrimaryCtxRetain(&ctx, 0));
  OK(cuCtxPushCurrent(ctx));
  int before = fake_cuda_live_allocs();
  OK(cuMemAlloc(&p, 3 << 20));
  char src[64] = "bytes through the fake device";
  OK(cuMemcpyHtoD(p + 100, src, sizeof(src)));
  char dst[64];
  OK(cuMemcpyDtoH(dst, p + 100, sizeof(dst)));
  assert_memory_equal(src, dst, sizeof(src));
  /* A dma-buf of the allocation: the same bytes through the descriptor. */
  int dmabuf = -1;
  OK(cuMemGetHandleForAddressRange(&dmabuf, p, 3 << 20, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0));
  char via[64];
  assert_int_equal(pread(dmabuf, via, sizeof(via), 100), (ssize_t)sizeof(via));
  assert_memory_equal(via, src, sizeof(src));
  close(dmabuf);
  assert_int_equal(cuMemGetHandleForAddressRange(&dmabuf, p + 4096, 4096, CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD, 0),
                   CUDA_ERROR_NOT_SUPPORTED);
  void *h;
  OK(cuMemHostAlloc(&h, 8192, CU_MEMHOSTALLOC_DEVICEMAP));
  CUdeviceptr hd;
  OK(cuMemHostGetDevicePointer(&hd, h, 0));
  assert_ptr_equal((void *)(uintptr_t)hd, h);
  assert_int_equal(cuMemHostGetDevicePointer(&hd, src, 0), CUDA_ERROR_INVALID_VALUE);
  assert_int_equal(fake_cuda_live_allocs(), before + 2);
  /* What the engine asks of a pointer (src/cuda/gpu.c). */
  unsigned int mtype = 99;
  int ordinal = -1;
  CUdeviceptr base = 0;
  size_t size = 0;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void *data[] = {&mtype, &ordinal, &base, &size};
  OK(cuPointerGetAttributes(4, attrs, data, p + 5000));
  assert_int_equal(mtype, CU_MEMORYTYPE_DEVICE);
  assert_int_equal(ordinal, 0);
  assert_true(base == p && size == 3u << 20);
  OK(cuPointerGetAttributes(1, attrs, data, (CUdeviceptr)(uintptr_t)h));
  assert_int_equal(mtype, CU_MEMORYTYPE_HOST);
  OK(cuPointerGetAttributes(1, attrs, data, (CUdeviceptr)(uintptr_t)src));
  assert_int_equal(mtype, 0); /* plain host memory */
  assert_int_equal(cuMemFreeHost((void *)(uintptr_t)p), CUDA_ERROR_INVALID_VALUE); /* wrong kind */
  OK(cuMemFreeHost(h));
  OK(cuMemFree(p));
  assert_int_equal(cuMemFree(p), CUDA_ERROR_INVALID_VALUE); /* twice */
  assert_int_equal(fake_cuda_live_allocs(), before);
  OK(cuCtxPopCurrent(&popped));
  OK(cuDevicePrimaryCtxRelease(0));
}

/* RxDM's export and the plugin's import of the receive buffer (rx_pool.cu,
 * common.cu: import, reserve, map, set access; unmap, release, free). */
static void t_vmm_share(void **state) {
  (void)state;
  CUmemAllocationProp prop = {0};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 1;
  size_t g;
  OK(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  assert_int_equal(g, 2u << 20);
  CUmemGenericAllocationHandle h, imp;
  assert_int_equal(cuMemCreate(&h, g + 1, &prop, 0), CUDA_ERROR_INVALID_VALUE);
  OK(cuMemCreate(&h, 2 * g, &prop, 0));
  int fd = -1;
  OK(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  OK(cuMemRelease(h)); /* the exported descriptor keeps the memory */
  assert_int_equal(pwrite(fd, "rxdm", 4, g + 8), 4);
  OK(cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  close(fd); /* the caller's, as in the plugin */
  CUdeviceptr va;
  OK(cuMemAddressReserve(&va, 2 * g, g, 0, 0));
  assert_int_equal(va % g, 0);
  OK(cuMemMap(va, 2 * g, 0, imp, 0));
  /* Accessible only once cuMemSetAccess grants it, as on the driver. */
  CUmemAccessDesc acc = {{CU_MEM_LOCATION_TYPE_DEVICE, 1}, CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  OK(cuMemSetAccess(va, 2 * g, &acc, 1));
  assert_memory_equal((char *)(uintptr_t)va + g + 8, "rxdm", 4);
  OK(cuMemUnmap(va, 2 * g));
  OK(cuMemRelease(imp));
  OK(cuMemAddressFree(va, 2 * g));
  assert_int_equal(cuMemImportFromShareableHandle(&imp, (void *)(intptr_t)-1, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
                   CUDA_ERROR_INVALID_HANDLE);
  assert_int_equal(cuMemMap(va, g, 0, 0, 0), CUDA_ERROR_INVALID_VALUE);
}

static void t_ipc(void **state) {
  (void)state;
  CUcontext ctx, popped;
  OK(cuDevicePrimaryCtxRetain(&ctx, 0));
  OK(cuCtxPushCurrent(ctx));
  CUdeviceptr p, q;
  OK(cuMemAlloc(&p, 8192));
  OK(cuMemcpyHtoD(p, "ipc", 4));
  CUipcMemHandle h;
  OK(cuIpcGetMemHandle(&h, p));
  OK(cuIpcOpenMemHandle(&q, h, CU_IPC_MEM_LAZY_ENABLE_PEER_ACCESS));
  assert_true(q != p);
  assert_memory_equal((void *)(uintptr_t)q, "ipc", 4);
  OK(cuIpcCloseMemHandle(q));
  assert_int_equal(cuIpcCloseMemHandle(q), CUDA_ERROR_INVALID_VALUE);
  CUipcMemHandle junk;
  memset(&junk, 0x5a, sizeof(junk));
  assert_int_equal(cuIpcOpenMemHandle(&q, junk, 0), CUDA_ERROR_INVALID_HANDLE);
  OK(cuMemFree(p));
  OK(cuCtxPopCurrent(&popped));
  OK(cuDevicePrimaryCtxRelease(0));
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(t_devices), cmocka_unit_test(t_errors), cmocka_unit_test(t_contexts),
      cmocka_unit_test(t_alloc),   cmocka_unit_test(t_vmm_share), cmocka_unit_test(t_ipc),
  };
  return cmocka_run_group_tests(tests, setup, NULL);
}
