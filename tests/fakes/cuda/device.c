/* Devices: FAKE_CUDA_DEVICES of them, device i at PCI 0000:(0x04 + 0x10 i):00.0,
 * written the way the driver writes bus ids (upper-case hex). */
#include "fake_cuda.h"

#include <stdio.h>
#include <strings.h>

static int valid(CUdevice dev) { return dev >= 0 && dev < fake_cuda_ndev(); }

CUresult cuDeviceGetCount(int *count) {
  FAKE_NEED_INIT();
  if (!count) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL count");
  *count = fake_cuda_ndev();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice *device, int ordinal) {
  FAKE_NEED_INIT();
  if (!device) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL device");
  if (!valid(ordinal)) return FAKE_FAIL(CUDA_ERROR_INVALID_DEVICE, "no such ordinal");
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetPCIBusId(char *pciBusId, int len, CUdevice dev) {
  FAKE_NEED_INIT();
  if (!pciBusId || len <= 0) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "no buffer");
  if (!valid(dev)) return FAKE_FAIL(CUDA_ERROR_INVALID_DEVICE, "no such device");
  snprintf(pciBusId, (size_t)len, "0000:%02X:00.0", 0x04 + 0x10 * dev);
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetByPCIBusId(CUdevice *dev, const char *pciBusId) {
  FAKE_NEED_INIT();
  if (!dev || !pciBusId) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL argument");
  for (int i = 0; i < fake_cuda_ndev(); i++) {
    char id[32];
    snprintf(id, sizeof(id), "0000:%02X:00.0", 0x04 + 0x10 * i);
    if (strcasecmp(id, pciBusId) == 0) return *dev = i, CUDA_SUCCESS;
  }
  return FAKE_FAIL(CUDA_ERROR_INVALID_DEVICE, "no device at that PCI id");
}
