/* Allocations: cuMemAlloc gives memfd-backed host memory (so it can be handed
 * out as a file descriptor, as the driver hands out dma-bufs), cuMemHostAlloc
 * the same, mapped for the "device" at the same address. Copies are memcpy. */
#define _GNU_SOURCE
#include "fake_cuda.h"

#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

static struct fake_alloc *allocs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;

void *fake_cuda_memfd_map(size_t size, int *fd) {
  int f = memfd_create("fake-cuda", MFD_CLOEXEC);
  if (f < 0) return NULL;
  if (ftruncate(f, (off_t)size) != 0) {
    int e = errno;
    close(f);
    errno = e;
    return NULL;
  }
  void *p = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_SHARED, f, 0);
  if (p == MAP_FAILED) {
    int e = errno;
    close(f);
    errno = e;
    return NULL;
  }
  *fd = f;
  return p;
}

struct fake_alloc *fake_cuda_find(const void *p, size_t len) {
  const char *c = p;
  struct fake_alloc *hit = NULL;
  pthread_mutex_lock(&lock);
  for (struct fake_alloc *a = allocs; a; a = a->next)
    if (c >= a->base && len <= a->size && (size_t)(c - a->base) <= a->size - len) {
      hit = a;
      break;
    }
  pthread_mutex_unlock(&lock);
  return hit;
}

int fake_cuda_live_allocs(void) {
  int n = 0;
  pthread_mutex_lock(&lock);
  for (struct fake_alloc *a = allocs; a; a = a->next) n++;
  pthread_mutex_unlock(&lock);
  return n;
}

static CUresult alloc(void **out, size_t size, int host) {
  struct fake_alloc *a = calloc(1, sizeof(*a));
  if (!a) return FAKE_FAIL(CUDA_ERROR_OUT_OF_MEMORY, "calloc");
  a->base = fake_cuda_memfd_map(size, &a->fd);
  if (!a->base) {
    free(a);
    return FAKE_FAIL(CUDA_ERROR_OUT_OF_MEMORY, "memfd mapping failed");
  }
  a->size = size;
  a->host = host;
  a->dev = fake_cuda_current() ? fake_cuda_current()->dev : 0;
  pthread_mutex_lock(&lock);
  a->next = allocs;
  allocs = a;
  pthread_mutex_unlock(&lock);
  *out = a->base;
  return CUDA_SUCCESS;
}

static CUresult release(void *p, int host, const char *fn) {
  pthread_mutex_lock(&lock);
  struct fake_alloc **pp = &allocs;
  while (*pp && !((*pp)->base == (char *)p && (*pp)->host == host)) pp = &(*pp)->next;
  struct fake_alloc *a = *pp;
  if (a) *pp = a->next;
  pthread_mutex_unlock(&lock);
  if (!a) return fake_cuda_fail(CUDA_ERROR_INVALID_VALUE, fn, "not the start of an allocation of this kind");
  munmap(a->base, a->size);
  close(a->fd);
  free(a);
  return CUDA_SUCCESS;
}

CUresult cuMemAlloc(CUdeviceptr *dptr, size_t bytesize) {
  FAKE_NEED_INIT();
  if (!dptr || bytesize == 0) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL dptr or size 0");
  if (!fake_cuda_current()) return FAKE_FAIL(CUDA_ERROR_INVALID_CONTEXT, "no current context");
  void *p;
  CUresult rc = alloc(&p, bytesize, 0);
  if (rc == CUDA_SUCCESS) *dptr = (CUdeviceptr)(uintptr_t)p;
  return rc;
}

CUresult cuMemFree(CUdeviceptr dptr) {
  FAKE_NEED_INIT();
  if (dptr == 0) return CUDA_SUCCESS;
  return release((void *)(uintptr_t)dptr, 0, __func__);
}

CUresult cuMemHostAlloc(void **pp, size_t bytesize, unsigned int flags) {
  FAKE_NEED_INIT();
  if (!pp || bytesize == 0) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL pp or size 0");
  if (flags & ~(unsigned)(CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED))
    return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "unknown flags");
  if (!fake_cuda_current()) return FAKE_FAIL(CUDA_ERROR_INVALID_CONTEXT, "no current context");
  return alloc(pp, bytesize, 1);
}

CUresult cuMemFreeHost(void *p) {
  FAKE_NEED_INIT();
  return release(p, 1, __func__);
}

CUresult cuMemHostGetDevicePointer(CUdeviceptr *pdptr, void *p, unsigned int flags) {
  FAKE_NEED_INIT();
  if (!pdptr || flags != 0) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL pdptr or flags != 0");
  struct fake_alloc *a = fake_cuda_find(p, 1);
  if (!a || !a->host) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "not memory from cuMemHostAlloc");
  *pdptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult cuMemcpyHtoD(CUdeviceptr dst, const void *src, size_t n) {
  FAKE_NEED_INIT();
  if (n == 0) return CUDA_SUCCESS;
  if (!src || !dst) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL pointer");
  memcpy((void *)(uintptr_t)dst, src, n);
  return CUDA_SUCCESS;
}

CUresult cuMemcpyDtoH(void *dst, CUdeviceptr src, size_t n) {
  FAKE_NEED_INIT();
  if (n == 0) return CUDA_SUCCESS;
  if (!src || !dst) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL pointer");
  memcpy(dst, (const void *)(uintptr_t)src, n);
  return CUDA_SUCCESS;
}

/* A dma-buf of [dptr, dptr+size): here the allocation's memfd, which starts at
 * the allocation's base, so the range must start there too (what the TCPX
 * plugin asks for: a registered buffer, tx_pool.cu). */
CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size,
                                       CUmemRangeHandleType type, unsigned long long flags) {
  FAKE_NEED_INIT();
  if (!handle || type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || flags != 0)
    return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "only dma-buf fds, flags 0");
  struct fake_alloc *a = fake_cuda_find((void *)(uintptr_t)dptr, size);
  if (!a || a->host) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "not device memory of this driver");
  if ((char *)(uintptr_t)dptr != a->base)
    return FAKE_FAIL(CUDA_ERROR_NOT_SUPPORTED, "ranges not starting at an allocation's base are not faked");
  int fd = fcntl(a->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return FAKE_FAIL(CUDA_ERROR_OPERATING_SYSTEM, "dup");
  *(int *)handle = fd;
  return CUDA_SUCCESS;
}

/* As the driver's: unknown (plain host) pointers succeed with the defaults
 * left as they were, except a memory type of 0. */
CUresult cuPointerGetAttributes(unsigned int n, CUpointer_attribute *attrs, void **data, CUdeviceptr ptr) {
  FAKE_NEED_INIT();
  if (!attrs || !data) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL attrs or data");
  struct fake_alloc *a = fake_cuda_find((void *)(uintptr_t)ptr, 1);
  for (unsigned int i = 0; i < n; i++) {
    if (!data[i]) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL data entry");
    switch (attrs[i]) {
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
        *(unsigned int *)data[i] = !a ? 0 : a->host ? CU_MEMORYTYPE_HOST : CU_MEMORYTYPE_DEVICE;
        break;
      case CU_POINTER_ATTRIBUTE_IS_MANAGED: *(unsigned char *)data[i] = 0; break; /* a bool */
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        if (a) *(int *)data[i] = a->dev;
        break;
      case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
        if (a) *(CUdeviceptr *)data[i] = attrs[i] == CU_POINTER_ATTRIBUTE_DEVICE_POINTER ? ptr : (CUdeviceptr)(uintptr_t)a->base;
        break;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
        if (a) *(size_t *)data[i] = a->size;
        break;
      default: return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "attribute not faked");
    }
  }
  return CUDA_SUCCESS;
}
