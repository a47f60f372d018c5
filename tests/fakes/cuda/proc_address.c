/* Entry points by name (cuGetProcAddress), which the CUDA runtime asks for
 * at initialisation: a name is looked up in this library with the newest
 * version suffix first, the way the driver maps "cuMemAlloc" to
 * cuMemAlloc_v2. The runtime's private tables (cuGetExportTable) are not
 * faked: see the note at cuGetExportTable. */
#define _GNU_SOURCE
#include "fake_cuda.h"

#include <dlfcn.h>
#include <stdio.h>

/* This library itself, for dlsym (RTLD_NOLOAD: it is loaded already). */
static void *self(void) {
  static void *handle;
  Dl_info info;
  if (!handle && dladdr((void *)cuInit, &info) && info.dli_fname)
    handle = dlopen(info.dli_fname, RTLD_NOW | RTLD_NOLOAD);
  return handle;
}

CUresult cuGetProcAddress(const char *symbol, void **pfn, int cudaVersion, cuuint64_t flags,
                          CUdriverProcAddressQueryResult *status) {
  (void)cudaVersion;
  (void)flags;
  if (!symbol || !pfn) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL symbol or pfn");
  static const char *suffixes[] = {"_v4", "_v3", "_v2", ""};
  void *h = self();
  *pfn = NULL;
  for (size_t i = 0; h && i < sizeof(suffixes) / sizeof(suffixes[0]) && !*pfn; i++) {
    char name[128];
    if (snprintf(name, sizeof(name), "%s%s", symbol, suffixes[i]) >= (int)sizeof(name)) break;
    *pfn = dlsym(h, name);
  }
  if (status) *status = *pfn ? CU_GET_PROC_ADDRESS_SUCCESS : CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND;
  return *pfn ? CUDA_SUCCESS : fake_cuda_fail(CUDA_ERROR_NOT_FOUND, symbol, "not faked");
}

/* The runtime's undocumented interfaces: not in cuda.h's documentation, so
 * not faked. */
CUresult cuGetExportTable(const void **table, const CUuuid *id) {
  (void)id;
  if (table) *table = NULL;
  return FAKE_FAIL(CUDA_ERROR_NOT_SUPPORTED, "private runtime interfaces are not faked");
}
