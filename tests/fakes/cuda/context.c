/* Contexts: one primary context per device (retained and released), contexts
 * made by cuCtxCreate, and a per-thread stack of current contexts. */
#include "fake_cuda.h"

#include <pthread.h>
#include <stdlib.h>

#define STACK_MAX 32

static struct CUctx_st primary[FAKE_CUDA_MAX_DEVICES];
static pthread_mutex_t primary_lock = PTHREAD_MUTEX_INITIALIZER;
static _Thread_local CUcontext stack[STACK_MAX];
static _Thread_local int depth;

CUcontext fake_cuda_current(void) { return depth > 0 ? stack[depth - 1] : NULL; }

CUresult cuDevicePrimaryCtxRetain(CUcontext *pctx, CUdevice dev) {
  FAKE_NEED_INIT();
  if (!pctx) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL pctx");
  if (dev < 0 || dev >= fake_cuda_ndev()) return FAKE_FAIL(CUDA_ERROR_INVALID_DEVICE, "no such device");
  pthread_mutex_lock(&primary_lock);
  primary[dev].dev = dev;
  primary[dev].primary = 1;
  primary[dev].refs++;
  pthread_mutex_unlock(&primary_lock);
  *pctx = &primary[dev];
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRelease(CUdevice dev) {
  FAKE_NEED_INIT();
  if (dev < 0 || dev >= fake_cuda_ndev()) return FAKE_FAIL(CUDA_ERROR_INVALID_DEVICE, "no such device");
  CUresult rc = CUDA_SUCCESS;
  pthread_mutex_lock(&primary_lock);
  if (primary[dev].refs > 0) primary[dev].refs--;
  else rc = FAKE_FAIL(CUDA_ERROR_INVALID_CONTEXT, "primary context not retained");
  pthread_mutex_unlock(&primary_lock);
  return rc;
}

/* Tests: how many retains of a device's primary context are outstanding. */
int fake_cuda_primary_refs(int dev) {
  if (dev < 0 || dev >= FAKE_CUDA_MAX_DEVICES) return -1;
  pthread_mutex_lock(&primary_lock);
  int refs = primary[dev].refs;
  pthread_mutex_unlock(&primary_lock);
  return refs;
}

CUresult cuCtxPushCurrent(CUcontext ctx) {
  FAKE_NEED_INIT();
  if (!ctx) return FAKE_FAIL(CUDA_ERROR_INVALID_CONTEXT, "NULL context");
  if (depth == STACK_MAX) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "context stack full");
  stack[depth++] = ctx;
  return CUDA_SUCCESS;
}

CUresult cuCtxPopCurrent(CUcontext *pctx) {
  FAKE_NEED_INIT();
  if (depth == 0) return FAKE_FAIL(CUDA_ERROR_INVALID_CONTEXT, "no current context");
  CUcontext c = stack[--depth];
  if (pctx) *pctx = c;
  return CUDA_SUCCESS;
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  FAKE_NEED_INIT();
  if (!ctx) {
    if (depth > 0) depth--;
    return CUDA_SUCCESS;
  }
  if (depth == 0) depth = 1;
  stack[depth - 1] = ctx;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetCurrent(CUcontext *pctx) {
  FAKE_NEED_INIT();
  if (!pctx) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL pctx");
  *pctx = fake_cuda_current();
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice(CUdevice *device) {
  FAKE_NEED_INIT();
  if (!device) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL device");
  CUcontext c = fake_cuda_current();
  if (!c) return FAKE_FAIL(CUDA_ERROR_INVALID_CONTEXT, "no current context");
  *device = c->dev;
  return CUDA_SUCCESS;
}

/* cuda.h maps cuCtxCreate to cuCtxCreate_v4 (CUDA 13: a CUctxCreateParams *
 * second). The new context becomes current, as the driver documents. */
CUresult cuCtxCreate(CUcontext *pctx, CUctxCreateParams *params, unsigned int flags, CUdevice dev) {
  (void)flags;
  FAKE_NEED_INIT();
  if (!pctx) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "NULL pctx");
  if (params && (params->execAffinityParams || params->cigParams))
    return FAKE_FAIL(CUDA_ERROR_NOT_SUPPORTED, "execution affinity and CIG are not faked");
  if (dev < 0 || dev >= fake_cuda_ndev()) return FAKE_FAIL(CUDA_ERROR_INVALID_DEVICE, "no such device");
  if (depth == STACK_MAX) return FAKE_FAIL(CUDA_ERROR_INVALID_VALUE, "context stack full");
  struct CUctx_st *c = calloc(1, sizeof(*c));
  if (!c) return FAKE_FAIL(CUDA_ERROR_OUT_OF_MEMORY, "calloc");
  c->dev = dev;
  stack[depth++] = c;
  *pctx = c;
  return CUDA_SUCCESS;
}

CUresult cuCtxDestroy(CUcontext ctx) {
  FAKE_NEED_INIT();
  if (!ctx || ctx->primary) return FAKE_FAIL(CUDA_ERROR_INVALID_CONTEXT, "not a created context");
  for (int i = 0; i < depth; i++)
    if (stack[i] == ctx) { /* drop it from this thread's stack */
      for (int j = i; j + 1 < depth; j++) stack[j] = stack[j + 1];
      depth--;
      i--;
    }
  free(ctx);
  return CUDA_SUCCESS;
}
