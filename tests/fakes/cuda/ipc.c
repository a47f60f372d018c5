/* Legacy IPC handles: the 64-byte handle names the exporting process and the
 * allocation's memfd there; opening it maps /proc/<pid>/fd/<fd>. */
#define _GNU_SOURCE
#include "fake_cuda.h"

#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#define IPC_MAGIC 0x46414b45u /* "FAKE" */

struct ipc_wire {
  uint32_t magic;
  int32_t pid, fd;
  uint64_t size;
};
_Static_assert(sizeof(struct ipc_wire) <= CU_IPC_HANDLE_SIZE, "handle too small");

CUresult cuIpcGetMemHandle(CUipcMemHandle *handle, CUdeviceptr dptr) {
  FAKE_NEED_INIT();
  if (!handle) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL handle");
  struct fake_alloc *a = fake_cuda_find((void *)(uintptr_t)dptr, 1);
  if (!a || a->host || a->base != (char *)(uintptr_t)dptr)
    return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "not the start of a cuMemAlloc allocation");
  struct ipc_wire w = {IPC_MAGIC, (int32_t)getpid(), a->fd, a->size};
  memset(handle, 0, sizeof(*handle));
  memcpy(handle->reserved, &w, sizeof(w));
  return CUDA_SUCCESS;
}

CUresult cuIpcOpenMemHandle(CUdeviceptr *pdptr, CUipcMemHandle handle, unsigned int flags) {
  (void)flags;
  FAKE_NEED_INIT();
  if (!pdptr) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL pdptr");
  struct ipc_wire w;
  memcpy(&w, handle.reserved, sizeof(w));
  if (w.magic != IPC_MAGIC || w.size == 0) return FAKE_FAIL(CUDA_ERROR_INVALID_HANDLE, "not a handle of this driver");
  char path[64];
  snprintf(path, sizeof(path), "/proc/%d/fd/%d", (int)w.pid, (int)w.fd);
  int fd = open(path, O_RDWR | O_CLOEXEC);
  if (fd < 0) return FAKE_FAIL(CUDA_ERROR_INVALID_HANDLE, "exporting process or allocation gone");
  void *p = mmap(NULL, w.size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  if (p == MAP_FAILED) return FAKE_FAIL(CUDA_ERROR_MAP_FAILED, "mmap");
  *pdptr = (CUdeviceptr)(uintptr_t)p;
  return CUDA_SUCCESS;
}

CUresult cuIpcCloseMemHandle(CUdeviceptr dptr) {
  FAKE_NEED_INIT();
  /* The size is not known here: find the mapping's length from /proc. */
  FILE *f = fopen("/proc/self/maps", "r");
  if (!f) return FAKE_FAIL(CUDA_ERROR_OPERATING_SYSTEM, "/proc/self/maps");
  unsigned long lo, hi;
  char line[512];
  CUresult rc = CUDA_ERROR_NOT_FOUND;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo == dptr && strstr(line, "fake-cuda")) {
      rc = munmap((void *)(uintptr_t)lo, hi - lo) == 0 ? CUDA_SUCCESS : CUDA_ERROR_INVALID_VALUE;
      break;
    }
  fclose(f);
  return rc == CUDA_ERROR_NOT_FOUND ? FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "not an opened IPC mapping") : rc;
}
