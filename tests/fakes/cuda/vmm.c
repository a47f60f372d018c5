/* Virtual memory management: a physical allocation is a memfd, a reservation
 * an inaccessible anonymous mapping, cuMemMap maps the memfd into it (still
 * inaccessible, as on the driver, until cuMemSetAccess), and shareable
 * handles are file descriptors (CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
 * which is how RxDM hands its receive buffer to the TCPX plugin. */
#define _GNU_SOURCE
#include "fake_cuda.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

struct phys {
  int fd;
  size_t size;
};

static struct phys *phys_of(CUmemGenericAllocationHandle h) { return (struct phys *)(uintptr_t)h; }

static int aligned(size_t v) { return v % FAKE_CUDA_GRANULARITY == 0; }

CUresult cuMemGetAllocationGranularity(size_t *granularity, const CUmemAllocationProp *prop,
                                       CUmemAllocationGranularity_flags option) {
  (void)option;
  FAKE_NEED_INIT();
  if (!granularity || !prop) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL argument");
  *granularity = FAKE_CUDA_GRANULARITY;
  return CUDA_SUCCESS;
}

CUresult cuMemCreate(CUmemGenericAllocationHandle *handle, size_t size, const CUmemAllocationProp *prop,
                     unsigned long long flags) {
  FAKE_NEED_INIT();
  if (!handle || !prop || flags != 0) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL argument or flags");
  if (size == 0 || !aligned(size)) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "size not a multiple of the granularity");
  if (prop->location.type != CU_MEM_LOCATION_TYPE_DEVICE || prop->location.id < 0 ||
      prop->location.id >= fake_cuda_ndev())
    return FAKE_FAIL(CUDA_ERROR_INVALID_DEVICE, "location is not a device of this driver");
  struct phys *p = calloc(1, sizeof(*p));
  if (!p) return FAKE_FAIL(CUDA_ERROR_OUT_OF_MEMORY, "calloc");
  p->fd = memfd_create("fake-cuda-vmm", MFD_CLOEXEC);
  if (p->fd < 0 || ftruncate(p->fd, (off_t)size) != 0) {
    if (p->fd >= 0) close(p->fd);
    free(p);
    return FAKE_FAIL(CUDA_ERROR_OUT_OF_MEMORY, "memfd");
  }
  p->size = size;
  *handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  FAKE_NEED_INIT();
  struct phys *p = phys_of(handle);
  if (!p) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL handle");
  close(p->fd); /* mappings keep the memory, as on the driver */
  free(p);
  return CUDA_SUCCESS;
}

CUresult cuMemExportToShareableHandle(void *shareable, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType type, unsigned long long flags) {
  FAKE_NEED_INIT();
  struct phys *p = phys_of(handle);
  if (!shareable || !p || flags != 0) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL argument or flags");
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return FAKE_FAIL(CUDA_ERROR_NOT_SUPPORTED, "only POSIX file descriptors are faked");
  int fd = fcntl(p->fd, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return FAKE_FAIL(CUDA_ERROR_OPERATING_SYSTEM, "dup");
  *(int *)shareable = fd;
  return CUDA_SUCCESS;
}

/* The caller keeps (and closes) the descriptor it passes, as with the driver. */
CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle *handle, void *os_handle,
                                        CUmemAllocationHandleType type) {
  FAKE_NEED_INIT();
  if (!handle) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL handle");
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)
    return FAKE_FAIL(CUDA_ERROR_NOT_SUPPORTED, "only POSIX file descriptors are faked");
  int fd = (int)(intptr_t)os_handle;
  struct stat st;
  if (fd < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0)
    return FAKE_FAIL(CUDA_ERROR_INVALID_HANDLE, "not a descriptor of shareable memory");
  struct phys *p = calloc(1, sizeof(*p));
  if (!p) return FAKE_FAIL(CUDA_ERROR_OUT_OF_MEMORY, "calloc");
  p->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (p->fd < 0) {
    free(p);
    return FAKE_FAIL(CUDA_ERROR_OPERATING_SYSTEM, "dup");
  }
  p->size = (size_t)st.st_size;
  *handle = (CUmemGenericAllocationHandle)(uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressReserve(CUdeviceptr *ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  FAKE_NEED_INIT();
  if (!ptr || size == 0 || !aligned(size) || addr != 0 || flags != 0)
    return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "size not a multiple of the granularity, or a fixed address");
  size_t align = alignment ? alignment : FAKE_CUDA_GRANULARITY;
  if (align & (align - 1)) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "alignment not a power of two");
  /* Over-reserve, then trim to the alignment. */
  char *p = mmap(NULL, size + align, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (p == MAP_FAILED) return FAKE_FAIL(CUDA_ERROR_OUT_OF_MEMORY, "mmap");
  char *start = (char *)(((uintptr_t)p + align - 1) & ~(uintptr_t)(align - 1));
  if (start > p) munmap(p, (size_t)(start - p));
  if (start + size < p + size + align) munmap(start + size, (size_t)(p + size + align - (start + size)));
  *ptr = (CUdeviceptr)(uintptr_t)start;
  return CUDA_SUCCESS;
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  FAKE_NEED_INIT();
  if (!ptr || !aligned(size)) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL or unaligned");
  return munmap((void *)(uintptr_t)ptr, size) == 0 ? CUDA_SUCCESS
                                                   : FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "munmap");
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  FAKE_NEED_INIT();
  struct phys *p = phys_of(handle);
  if (!ptr || !p || flags != 0 || !aligned(size) || !aligned(offset) || offset > p->size ||
      size > p->size - offset)
    return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "range outside the allocation or unaligned");
  void *m = mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_SHARED | MAP_FIXED, p->fd, (off_t)offset);
  return m == MAP_FAILED ? FAKE_FAIL(CUDA_ERROR_MAP_FAILED, "mmap") : CUDA_SUCCESS;
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  FAKE_NEED_INIT();
  if (!ptr || !aligned(size)) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL or unaligned");
  /* Back to reserved, inaccessible address space. */
  void *m = mmap((void *)(uintptr_t)ptr, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED,
                 -1, 0);
  return m == MAP_FAILED ? FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "mmap") : CUDA_SUCCESS;
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc *desc, size_t count) {
  FAKE_NEED_INIT();
  if (!ptr || !desc || count == 0 || !aligned(size)) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "bad argument");
  int prot = PROT_NONE;
  for (size_t i = 0; i < count; i++) {
    if (desc[i].location.type != CU_MEM_LOCATION_TYPE_DEVICE || desc[i].location.id < 0 ||
        desc[i].location.id >= fake_cuda_ndev())
      return FAKE_FAIL(CUDA_ERROR_INVALID_DEVICE, "access for something other than a device of this driver");
    if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) prot = PROT_READ | PROT_WRITE;
    else if (desc[i].flags == CU_MEM_ACCESS_FLAGS_PROT_READ && prot == PROT_NONE) prot = PROT_READ;
  }
  return mprotect((void *)(uintptr_t)ptr, size, prot) == 0 ? CUDA_SUCCESS
                                                          : FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "not mapped");
}
