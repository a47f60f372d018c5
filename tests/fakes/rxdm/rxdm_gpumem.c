#include "rxdm_gpumem.h"

#include <ctype.h>
#include <dlfcn.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include <cuda.h>

#define prop_t CUmemAllocationProp

static struct {
  void *lib;
  CUresult (*init)(unsigned);
  CUresult (*count)(int *);
  CUresult (*get)(CUdevice *, int);
  CUresult (*pci)(char *, int, CUdevice);
  CUresult (*gran)(size_t *, const prop_t *, CUmemAllocationGranularity_flags);
  CUresult (*create)(CUmemGenericAllocationHandle *, size_t, const prop_t *, unsigned long long);
  CUresult (*export)(void *, CUmemGenericAllocationHandle, CUmemAllocationHandleType, unsigned long long);
  CUresult (*release)(CUmemGenericAllocationHandle);
} cu;

static int load(char *err, size_t errlen) {
  if (cu.lib) return 0;
  cu.lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!cu.lib) return snprintf(err, errlen, "no CUDA driver: %s", dlerror()), -1;
  struct { const char *name; void **fn; } syms[] = {
      {"cuInit", (void **)&cu.init}, {"cuDeviceGetCount", (void **)&cu.count},
      {"cuDeviceGet", (void **)&cu.get}, {"cuDeviceGetPCIBusId", (void **)&cu.pci},
      {"cuMemGetAllocationGranularity", (void **)&cu.gran}, {"cuMemCreate", (void **)&cu.create},
      {"cuMemExportToShareableHandle", (void **)&cu.export}, {"cuMemRelease", (void **)&cu.release},
  };
  for (size_t i = 0; i < sizeof(syms) / sizeof(syms[0]); i++)
    if (!(*syms[i].fn = dlsym(cu.lib, syms[i].name)))
      return snprintf(err, errlen, "libcuda.so.1 has no %s", syms[i].name), -1;
  return 0;
}

#define CU(call, what)                                                         \
  do {                                                                         \
    CUresult rc_ = (call);                                                     \
    if (rc_ != 0) return snprintf(err, errlen, "%s failed: CUDA error %d", what, rc_), -1; \
  } while (0)

int rxdm_gpumem_open(struct rxdm_gpu *gpus, int *n, int max, size_t pool_bytes, char *err, size_t errlen) {
  *n = 0;
  if (load(err, errlen)) return -1;
  int count;
  CU(cu.init(0), "cuInit");
  CU(cu.count(&count), "cuDeviceGetCount");
  if (max > 0 && count > max) count = max;
  if (count > RXDM_MAX_GPUS) count = RXDM_MAX_GPUS;
  for (int i = 0; i < count; i++) {
    struct rxdm_gpu *g = &gpus[i];
    CUdevice dev;
    CU(cu.get(&dev, i), "cuDeviceGet");
    CU(cu.pci(g->pci, (int)sizeof(g->pci), dev), "cuDeviceGetPCIBusId");
    for (char *c = g->pci; *c; c++) *c = (char)tolower((unsigned char)*c);
    prop_t prop = {0};
    prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
    prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
    prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    prop.location.id = dev;
    CU(cu.gran(&g->align, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM), "cuMemGetAllocationGranularity");
    g->size = (pool_bytes + g->align - 1) / g->align * g->align;
    CUmemGenericAllocationHandle h;
    CU(cu.create(&h, g->size, &prop, 0), "cuMemCreate");
    int fd = -1;
    CUresult rc = cu.export(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0);
    cu.release(h); /* the exported fd keeps the memory */
    if (rc != 0) return snprintf(err, errlen, "cuMemExportToShareableHandle failed: CUDA error %d", rc), -1;
    g->fd = fd;
    *n = i + 1;
  }
  return 0;
}

void rxdm_gpumem_close(struct rxdm_gpu *gpus, int n) {
  for (int i = 0; i < n; i++)
    if (gpus[i].fd >= 0) close(gpus[i].fd);
}
