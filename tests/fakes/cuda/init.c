/* cuInit, the driver version, and error names and strings. */
#include "fake_cuda.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

static pthread_once_t once = PTHREAD_ONCE_INIT;
static int ndev = -1;
static int log_failures;

static void init_once(void) {
  const char *s = getenv("FAKE_CUDA_DEVICES");
  char *end = NULL;
  long n = s ? strtol(s, &end, 10) : 1;
  if (s && (*s == '\0' || *end != '\0' || n < 0 || n > FAKE_CUDA_MAX_DEVICES)) {
    fprintf(stderr, "fake libcuda: FAKE_CUDA_DEVICES='%s' is not 0..%d; using 1\n", s,
            FAKE_CUDA_MAX_DEVICES);
    n = 1;
  }
  const char *l = getenv("FAKE_CUDA_LOG");
  log_failures = l && *l == '1';
  ndev = (int)n;
}

int fake_cuda_ndev(void) { return __atomic_load_n(&ndev, __ATOMIC_ACQUIRE); }

CUresult fake_cuda_fail(CUresult rc, const char *fn, const char *why) {
  if (log_failures) fprintf(stderr, "fake libcuda: %s: %s (%d)\n", fn, why, (int)rc);
  return rc;
}

CUresult cuInit(unsigned int flags) {
  if (flags != 0) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "flags must be 0");
  pthread_once(&once, init_once);
  return fake_cuda_ndev() > 0 ? CUDA_SUCCESS : FAKE_FAIL(CUDA_ERROR_NO_DEVICE, "FAKE_CUDA_DEVICES=0");
}

CUresult cuDriverGetVersion(int *version) {
  if (!version) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL version");
  *version = CUDA_VERSION;
  return CUDA_SUCCESS;
}

/* The codes this driver returns, with the driver's own names. */
static const struct {
  CUresult rc;
  const char *name, *text;
} errors[] = {
    {CUDA_SUCCESS, "CUDA_SUCCESS", "no error"},
    {CUDA_ERROR_INVALID_VALUE, "CUDA_ERROR_INVALID_VALUE", "invalid argument"},
    {CUDA_ERROR_OUT_OF_MEMORY, "CUDA_ERROR_OUT_OF_MEMORY", "out of memory"},
    {CUDA_ERROR_NOT_INITIALIZED, "CUDA_ERROR_NOT_INITIALIZED", "initialization error"},
    {CUDA_ERROR_NO_DEVICE, "CUDA_ERROR_NO_DEVICE", "no CUDA-capable device is detected"},
    {CUDA_ERROR_INVALID_DEVICE, "CUDA_ERROR_INVALID_DEVICE", "invalid device ordinal"},
    {CUDA_ERROR_INVALID_CONTEXT, "CUDA_ERROR_INVALID_CONTEXT", "invalid device context"},
    {CUDA_ERROR_MAP_FAILED, "CUDA_ERROR_MAP_FAILED", "mapping of buffer object failed"},
    {CUDA_ERROR_INVALID_HANDLE, "CUDA_ERROR_INVALID_HANDLE", "invalid resource handle"},
    {CUDA_ERROR_NOT_FOUND, "CUDA_ERROR_NOT_FOUND", "named symbol not found"},
    {CUDA_ERROR_NOT_SUPPORTED, "CUDA_ERROR_NOT_SUPPORTED", "operation not supported"},
    {CUDA_ERROR_OPERATING_SYSTEM, "CUDA_ERROR_OPERATING_SYSTEM", "OS call failed or operation not supported on this OS"},
};

CUresult cuGetErrorName(CUresult error, const char **str) {
  if (!str) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
    if (errors[i].rc == error) return *str = errors[i].name, CUDA_SUCCESS;
  *str = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}

CUresult cuGetErrorString(CUresult error, const char **str) {
  if (!str) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < sizeof(errors) / sizeof(errors[0]); i++)
    if (errors[i].rc == error) return *str = errors[i].text, CUDA_SUCCESS;
  *str = NULL;
  return CUDA_ERROR_INVALID_VALUE;
}
