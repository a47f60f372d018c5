/* Thin CUDA layer: contexts, pointer queries, memory, streams, pooled events.
 * See gpu.h for the contract. */
#include "cuda/gpu.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"

bool tpx__gpu_built(void) {
#ifdef TPX_HAVE_CUDA
  return true;
#else
  return false;
#endif
}

#ifndef TPX_HAVE_CUDA
/* ---------------- builds without CUDA: host memory only ---------------- */

static int nosup(const char *what) {
  return tpx_err_quiet(TPX_ENOTSUP, "%s: built without CUDA support", what);
}

int tpx__gpu_device_count(int *n) {
  if (n) *n = 0;
  return nosup("tpx__gpu_device_count");
}
int tpx__gpu_pci_bus_id(int dev, char *buf, size_t len) {
  (void)dev;
  if (buf && len) buf[0] = '\0';
  return nosup("tpx__gpu_pci_bus_id");
}
int tpx__gpu_retain(int dev) { (void)dev; return nosup("tpx__gpu_retain"); }
int tpx__gpu_release(int dev) { (void)dev; return nosup("tpx__gpu_release"); }
int tpx__gpu_ctx_refs(int dev) { (void)dev; return 0; }
int tpx__gpu_ctx_retained(void) { return 0; }
int tpx__gpu_set_device(int dev) { (void)dev; return nosup("tpx__gpu_set_device"); }
int tpx__gpu_current_device(void) { return TPX_GPU_NONE; }
int tpx__gpu_guard_enter(int dev, tpx_gpu_guard_t *g) {
  (void)dev;
  if (g) {
    g->prev = NULL;
    g->changed = 0;
  }
  return nosup("tpx__gpu_guard_enter");
}
void tpx__gpu_guard_leave(tpx_gpu_guard_t *g) { (void)g; }
int tpx__gpu_ptr_query(const void *p, tpx_gpu_ptr_info_t *info) {
  (void)p;
  if (info) {
    info->mem = TPX_GPU_MEM_HOST;
    info->dev = -1;
    info->base = NULL;
    info->size = 0;
  }
  return TPX_ENOTSUP; /* expected on every host pointer: no log */
}
bool tpx__gpu_is_device_ptr(const void *p, int *dev) {
  (void)p;
  if (dev) *dev = -1;
  return false;
}
int tpx__gpu_malloc(int dev, size_t bytes, void **p) {
  (void)dev; (void)bytes;
  if (p) *p = NULL;
  return nosup("tpx__gpu_malloc");
}
int tpx__gpu_free(int dev, void *p) { (void)dev; return p ? nosup("tpx__gpu_free") : 0; }
int tpx__gpu_host_alloc(int dev, size_t bytes, void **host) {
  (void)dev; (void)bytes;
  if (host) *host = NULL;
  return nosup("tpx__gpu_host_alloc");
}
int tpx__gpu_host_free(int dev, void *host) { (void)dev; return host ? nosup("tpx__gpu_host_free") : 0; }
int tpx__gpu_host_register(int dev, void *host, size_t bytes) {
  (void)dev; (void)host; (void)bytes;
  return nosup("tpx__gpu_host_register");
}
int tpx__gpu_host_unregister(int dev, void *host) {
  (void)dev; (void)host;
  return nosup("tpx__gpu_host_unregister");
}
int tpx__gpu_host_dev_ptr(int dev, void *host, void **dptr) {
  (void)dev; (void)host;
  if (dptr) *dptr = NULL;
  return nosup("tpx__gpu_host_dev_ptr");
}
int tpx__gpu_stream_create(int dev, tpx_gpu_stream_t **s) {
  (void)dev;
  if (s) *s = NULL;
  return nosup("tpx__gpu_stream_create");
}
void tpx__gpu_stream_destroy(tpx_gpu_stream_t *s) { (void)s; }
int tpx__gpu_stream_sync(tpx_gpu_stream_t *s) { (void)s; return nosup("tpx__gpu_stream_sync"); }
int tpx__gpu_stream_dev(const tpx_gpu_stream_t *s) { (void)s; return TPX_GPU_NONE; }
void *tpx__gpu_stream_handle(const tpx_gpu_stream_t *s) { (void)s; return NULL; }
int tpx__gpu_memcpy_async(tpx_gpu_stream_t *s, void *dst, const void *src, size_t bytes) {
  (void)s; (void)dst; (void)src; (void)bytes;
  return nosup("tpx__gpu_memcpy_async");
}
int tpx__gpu_memcpy(int dev, void *dst, const void *src, size_t bytes) {
  (void)dev; (void)dst; (void)src; (void)bytes;
  return nosup("tpx__gpu_memcpy");
}
int tpx__gpu_memset(int dev, void *dst, int value, size_t bytes) {
  (void)dev; (void)dst; (void)value; (void)bytes;
  return nosup("tpx__gpu_memset");
}
int tpx__gpu_evpool_create(int dev, int prealloc, tpx_gpu_evpool_t **pool) {
  (void)dev; (void)prealloc;
  if (pool) *pool = NULL;
  return nosup("tpx__gpu_evpool_create");
}
void tpx__gpu_evpool_destroy(tpx_gpu_evpool_t *pool) { (void)pool; }
int tpx__gpu_event_get(tpx_gpu_evpool_t *pool, tpx_gpu_event_t **ev) {
  (void)pool;
  if (ev) *ev = NULL;
  return nosup("tpx__gpu_event_get");
}
void tpx__gpu_event_put(tpx_gpu_evpool_t *pool, tpx_gpu_event_t *ev) { (void)pool; (void)ev; }
int tpx__gpu_evpool_created(const tpx_gpu_evpool_t *pool) { (void)pool; return 0; }
int tpx__gpu_evpool_taken(const tpx_gpu_evpool_t *pool) { (void)pool; return 0; }
int tpx__gpu_event_record(tpx_gpu_event_t *ev, tpx_gpu_stream_t *s) {
  (void)ev; (void)s;
  return nosup("tpx__gpu_event_record");
}
int tpx__gpu_event_query(tpx_gpu_event_t *ev) { (void)ev; return nosup("tpx__gpu_event_query"); }
int tpx__gpu_event_sync(tpx_gpu_event_t *ev) { (void)ev; return nosup("tpx__gpu_event_sync"); }
void *tpx__gpu_event_handle(const tpx_gpu_event_t *ev) { (void)ev; return NULL; }

#else
/* ---------------- CUDA builds ---------------- */

#include <cuda.h>
#include <cuda_runtime_api.h>

/* Driver entry points, fetched through the runtime (see gpu.h). */
typedef CUresult (*pfn_cuInit)(unsigned int);
typedef CUresult (*pfn_cuDeviceGet)(CUdevice *, int);
typedef CUresult (*pfn_cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
typedef CUresult (*pfn_cuDevicePrimaryCtxRelease)(CUdevice);
typedef CUresult (*pfn_cuCtxGetCurrent)(CUcontext *);
typedef CUresult (*pfn_cuCtxSetCurrent)(CUcontext);
typedef CUresult (*pfn_cuPointerGetAttributes)(unsigned int, CUpointer_attribute *, void **,
                                               CUdeviceptr);
typedef CUresult (*pfn_cuGetErrorString)(CUresult, const char **);

static struct {
  pthread_once_t once;
  int ndev;            /* usable GPUs; 0 when there is no driver/device */
  char why[160];       /* why ndev is 0 */
  pfn_cuInit cuInit;
  pfn_cuDeviceGet cuDeviceGet;
  pfn_cuDevicePrimaryCtxRetain cuDevicePrimaryCtxRetain;
  pfn_cuDevicePrimaryCtxRelease cuDevicePrimaryCtxRelease;
  pfn_cuCtxGetCurrent cuCtxGetCurrent;
  pfn_cuCtxSetCurrent cuCtxSetCurrent;
  pfn_cuPointerGetAttributes cuPointerGetAttributes;
  pfn_cuGetErrorString cuGetErrorString;

  pthread_mutex_t mu;               /* guards refs/ctx transitions */
  int refs[TPX_GPU_MAX_DEVICES];
  CUcontext ctx[TPX_GPU_MAX_DEVICES]; /* read lock-free (atomic loads) */
  int retained;                     /* devices with refs > 0 */
} G = {.once = PTHREAD_ONCE_INIT, .mu = PTHREAD_MUTEX_INITIALIZER};

static const char *cu_str(CUresult r) {
  const char *s = NULL;
  if (G.cuGetErrorString && G.cuGetErrorString(r, &s) == CUDA_SUCCESS && s) return s;
  return "unknown driver error";
}

static int cuda_fail(cudaError_t e, const char *what, int dev) {
  int code = (e == cudaErrorMemoryAllocation) ? TPX_ENOMEM : TPX_ECUDA;
  return tpx_err_quiet(code, "%s on GPU %d: %s (%s)", what, dev, cudaGetErrorName(e), cudaGetErrorString(e));
}

static int cu_fail(CUresult r, const char *what, int dev) {
  return tpx_err_quiet(TPX_ECUDA, "%s on GPU %d: driver error %d (%s)", what, dev, (int)r, cu_str(r));
}

static int get_entry(const char *name, void **fn) {
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  /* 12000: the ABI of each symbol as of CUDA 12.0 (the _v2 release etc.). */
  cudaError_t e = cudaGetDriverEntryPointByVersion(name, fn, 12000, cudaEnableDefault, &q);
  if (e != cudaSuccess || q != cudaDriverEntryPointSuccess || !*fn) {
    snprintf(G.why, sizeof G.why, "driver entry point %s unavailable (%s)", name,
             e != cudaSuccess ? cudaGetErrorName(e) : "symbol not found");
    return TPX_ENOSYM;
  }
  return 0;
}

static void gpu_init_once(void) {
  int n = 0;
  cudaError_t e = cudaGetDeviceCount(&n);
  if (e != cudaSuccess || n <= 0) {
    snprintf(G.why, sizeof G.why, "no usable GPU (%s)",
             e != cudaSuccess ? cudaGetErrorString(e) : "zero devices");
    (void)cudaGetLastError(); /* not sticky; don't leave it for others */
    return;
  }
  if (get_entry("cuGetErrorString", (void **)&G.cuGetErrorString) ||
      get_entry("cuInit", (void **)&G.cuInit) ||
      get_entry("cuDeviceGet", (void **)&G.cuDeviceGet) ||
      get_entry("cuDevicePrimaryCtxRetain", (void **)&G.cuDevicePrimaryCtxRetain) ||
      get_entry("cuDevicePrimaryCtxRelease", (void **)&G.cuDevicePrimaryCtxRelease) ||
      get_entry("cuCtxGetCurrent", (void **)&G.cuCtxGetCurrent) ||
      get_entry("cuCtxSetCurrent", (void **)&G.cuCtxSetCurrent) ||
      get_entry("cuPointerGetAttributes", (void **)&G.cuPointerGetAttributes)) {
    (void)cudaGetLastError();
    return;
  }
  CUresult r = G.cuInit(0);
  if (r != CUDA_SUCCESS) {
    snprintf(G.why, sizeof G.why, "cuInit: %s", cu_str(r));
    return;
  }
  G.ndev = n > TPX_GPU_MAX_DEVICES ? TPX_GPU_MAX_DEVICES : n;
  TPX_DEBUG("gpu: %d device(s) usable", G.ndev);
}

static int gpu_ndev(void) {
  pthread_once(&G.once, gpu_init_once);
  return G.ndev;
}

static int check_dev(int dev) {
  int n = gpu_ndev();
  if (n == 0) return tpx_err_quiet(TPX_ENOTSUP, "GPU %d: %s", dev, G.why);
  if (dev < 0 || dev >= n) return tpx_err_quiet(TPX_EINVAL, "GPU %d: no such device (%d present)", dev, n);
  return 0;
}

static CUcontext ctx_of(int dev) { return __atomic_load_n(&G.ctx[dev], __ATOMIC_ACQUIRE); }

int tpx__gpu_device_count(int *n) {
  if (!n) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_device_count: NULL");
  *n = gpu_ndev();
  /* Not an error (a GPU-less host), but say why for tpx_last_error(). */
  if (*n == 0) (void)tpx_err_quiet(TPX_ENOTSUP, "%s", G.why);
  return 0;
}

int tpx__gpu_pci_bus_id(int dev, char *buf, size_t len) {
  if (!buf || len < 13) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_pci_bus_id: buffer too small");
  buf[0] = '\0';
  int rc = check_dev(dev);
  if (rc) return rc;
  cudaError_t e = cudaDeviceGetPCIBusId(buf, (int)(len > 4096 ? 4096 : len), dev);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaDeviceGetPCIBusId", dev);
}

/* ---- contexts ---- */

int tpx__gpu_retain(int dev) {
  int rc = check_dev(dev);
  if (rc) return rc;
  pthread_mutex_lock(&G.mu);
  if (G.refs[dev] == 0) {
    CUdevice d;
    CUcontext c = NULL;
    CUresult r = G.cuDeviceGet(&d, dev);
    if (r == CUDA_SUCCESS) r = G.cuDevicePrimaryCtxRetain(&c, d);
    if (r != CUDA_SUCCESS) {
      pthread_mutex_unlock(&G.mu);
      return cu_fail(r, "cuDevicePrimaryCtxRetain", dev);
    }
    __atomic_store_n(&G.ctx[dev], c, __ATOMIC_RELEASE);
    G.retained++;
    TPX_DEBUG("gpu %d: primary context retained", dev);
  }
  G.refs[dev]++;
  pthread_mutex_unlock(&G.mu);
  return 0;
}

int tpx__gpu_release(int dev) {
  int rc = check_dev(dev);
  if (rc) return rc;
  pthread_mutex_lock(&G.mu);
  if (G.refs[dev] <= 0) {
    pthread_mutex_unlock(&G.mu);
    return tpx_err_quiet(TPX_EUSAGE, "GPU %d: release without a matching retain", dev);
  }
  rc = 0;
  if (--G.refs[dev] == 0) {
    CUdevice d;
    CUresult r = G.cuDeviceGet(&d, dev);
    if (r == CUDA_SUCCESS) r = G.cuDevicePrimaryCtxRelease(d);
    __atomic_store_n(&G.ctx[dev], NULL, __ATOMIC_RELEASE);
    G.retained--;
    if (r != CUDA_SUCCESS) rc = cu_fail(r, "cuDevicePrimaryCtxRelease", dev);
    TPX_DEBUG("gpu %d: primary context released", dev);
  }
  pthread_mutex_unlock(&G.mu);
  return rc;
}

int tpx__gpu_ctx_refs(int dev) {
  if (dev < 0 || dev >= TPX_GPU_MAX_DEVICES) return 0;
  pthread_mutex_lock(&G.mu);
  int n = G.refs[dev];
  pthread_mutex_unlock(&G.mu);
  return n;
}

int tpx__gpu_ctx_retained(void) {
  pthread_mutex_lock(&G.mu);
  int n = G.retained;
  pthread_mutex_unlock(&G.mu);
  return n;
}

int tpx__gpu_guard_enter(int dev, tpx_gpu_guard_t *g) {
  g->prev = NULL;
  g->changed = 0;
  int rc = check_dev(dev);
  if (rc) return rc;
  CUcontext want = ctx_of(dev);
  if (!want) return tpx_err_quiet(TPX_EUSAGE, "GPU %d: context used before tpx__gpu_retain", dev);
  CUcontext cur = NULL;
  CUresult r = G.cuCtxGetCurrent(&cur);
  if (r != CUDA_SUCCESS) return cu_fail(r, "cuCtxGetCurrent", dev);
  if (cur == want) return 0;
  r = G.cuCtxSetCurrent(want);
  if (r != CUDA_SUCCESS) return cu_fail(r, "cuCtxSetCurrent", dev);
  g->prev = cur;
  g->changed = 1;
  return 0;
}

void tpx__gpu_guard_leave(tpx_gpu_guard_t *g) {
  if (!g->changed) return;
  CUresult r = G.cuCtxSetCurrent((CUcontext)g->prev);
  if (r != CUDA_SUCCESS) TPX_WARN("gpu: restoring the caller's context failed: %s", cu_str(r));
  g->changed = 0;
}

int tpx__gpu_current_device(void) {
  if (gpu_ndev() == 0) return TPX_GPU_NONE;
  int d = -1;
  return cudaGetDevice(&d) == cudaSuccess ? d : TPX_GPU_NONE;
}

int tpx__gpu_set_device(int dev) {
  tpx_gpu_guard_t g;
  return tpx__gpu_guard_enter(dev, &g); /* deliberately not left */
}

/* ---- pointers ---- */

int tpx__gpu_ptr_query(const void *p, tpx_gpu_ptr_info_t *info) {
  if (!info) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_ptr_query: NULL info");
  info->mem = TPX_GPU_MEM_HOST;
  info->dev = -1;
  info->base = NULL;
  info->size = 0;
  if (!p || gpu_ndev() == 0) return 0;
  unsigned int mtype = 0;
  uint64_t managed = 0; /* the driver writes a bool; keep room and zero */
  int ordinal = -1;
  CUdeviceptr base = 0;
  size_t size = 0;
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE, CU_POINTER_ATTRIBUTE_IS_MANAGED,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_RANGE_START_ADDR,
                                 CU_POINTER_ATTRIBUTE_RANGE_SIZE};
  void *data[] = {&mtype, &managed, &ordinal, &base, &size};
  /* Unlike the singular query, this one succeeds on unknown (host) pointers
   * and leaves the defaults, and needs no current context. */
  CUresult r = G.cuPointerGetAttributes(5, attrs, data, (CUdeviceptr)(uintptr_t)p);
  if (r != CUDA_SUCCESS) return cu_fail(r, "cuPointerGetAttributes", -1);
  if (managed) {
    info->mem = TPX_GPU_MEM_MANAGED;
  } else if (mtype == CU_MEMORYTYPE_DEVICE) {
    info->mem = TPX_GPU_MEM_DEVICE;
  } else if (mtype == CU_MEMORYTYPE_HOST) {
    info->mem = TPX_GPU_MEM_PINNED;
  } else {
    return 0;
  }
  info->dev = (info->mem == TPX_GPU_MEM_PINNED) ? -1 : ordinal;
  info->base = (void *)(uintptr_t)base;
  info->size = size;
  return 0;
}

bool tpx__gpu_is_device_ptr(const void *p, int *dev) {
  tpx_gpu_ptr_info_t info;
  if (dev) *dev = -1;
  if (tpx__gpu_ptr_query(p, &info) != 0) return false;
  if (info.mem != TPX_GPU_MEM_DEVICE && info.mem != TPX_GPU_MEM_MANAGED) return false;
  if (dev) *dev = info.dev;
  return true;
}

/* ---- memory ---- */

#define WITH_CTX(dev)                                                                              \
  tpx_gpu_guard_t g_;                                                                              \
  int rc_ = tpx__gpu_guard_enter((dev), &g_);                                                       \
  if (rc_) return rc_

int tpx__gpu_malloc(int dev, size_t bytes, void **p) {
  if (!p || bytes == 0) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_malloc: %zu bytes", bytes);
  *p = NULL;
  WITH_CTX(dev);
  cudaError_t e = cudaMalloc(p, bytes);
  tpx__gpu_guard_leave(&g_);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaMalloc", dev);
}

int tpx__gpu_free(int dev, void *p) {
  if (!p) return 0;
  WITH_CTX(dev);
  cudaError_t e = cudaFree(p);
  tpx__gpu_guard_leave(&g_);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaFree", dev);
}

int tpx__gpu_host_alloc(int dev, size_t bytes, void **host) {
  if (!host || bytes == 0) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_host_alloc: %zu bytes", bytes);
  *host = NULL;
  WITH_CTX(dev);
  cudaError_t e = cudaHostAlloc(host, bytes, cudaHostAllocMapped | cudaHostAllocPortable);
  tpx__gpu_guard_leave(&g_);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaHostAlloc", dev);
}

int tpx__gpu_host_free(int dev, void *host) {
  if (!host) return 0;
  WITH_CTX(dev);
  cudaError_t e = cudaFreeHost(host);
  tpx__gpu_guard_leave(&g_);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaFreeHost", dev);
}

int tpx__gpu_host_register(int dev, void *host, size_t bytes) {
  if (!host || bytes == 0) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_host_register: %zu bytes", bytes);
  WITH_CTX(dev);
  cudaError_t e = cudaHostRegister(host, bytes, cudaHostRegisterMapped | cudaHostRegisterPortable);
  tpx__gpu_guard_leave(&g_);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaHostRegister", dev);
}

int tpx__gpu_host_unregister(int dev, void *host) {
  if (!host) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_host_unregister: NULL");
  WITH_CTX(dev);
  cudaError_t e = cudaHostUnregister(host);
  tpx__gpu_guard_leave(&g_);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaHostUnregister", dev);
}

int tpx__gpu_host_dev_ptr(int dev, void *host, void **dptr) {
  if (!host || !dptr) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_host_dev_ptr: NULL");
  *dptr = NULL;
  WITH_CTX(dev);
  cudaError_t e = cudaHostGetDevicePointer(dptr, host, 0);
  tpx__gpu_guard_leave(&g_);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaHostGetDevicePointer", dev);
}

int tpx__gpu_memcpy(int dev, void *dst, const void *src, size_t bytes) {
  if (bytes == 0) return 0;
  if (!dst || !src) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_memcpy: NULL");
  WITH_CTX(dev);
  cudaError_t e = cudaMemcpy(dst, src, bytes, cudaMemcpyDefault);
  tpx__gpu_guard_leave(&g_);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaMemcpy", dev);
}

int tpx__gpu_memset(int dev, void *dst, int value, size_t bytes) {
  if (bytes == 0) return 0;
  if (!dst) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_memset: NULL");
  WITH_CTX(dev);
  cudaError_t e = cudaMemset(dst, value, bytes);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  tpx__gpu_guard_leave(&g_);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaMemset", dev);
}

/* ---- streams ---- */

struct tpx_gpu_stream {
  cudaStream_t s;
  int dev;
};

int tpx__gpu_stream_create(int dev, tpx_gpu_stream_t **out) {
  if (!out) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_stream_create: NULL");
  *out = NULL;
  int rc = tpx__gpu_retain(dev);
  if (rc) return rc;
  tpx_gpu_stream_t *s = calloc(1, sizeof *s);
  if (!s) {
    tpx__gpu_release(dev);
    return tpx_err_quiet(TPX_ENOMEM, "tpx__gpu_stream_create");
  }
  s->dev = dev;
  tpx_gpu_guard_t g;
  rc = tpx__gpu_guard_enter(dev, &g);
  if (rc == 0) {
    cudaError_t e = cudaStreamCreateWithFlags(&s->s, cudaStreamNonBlocking);
    tpx__gpu_guard_leave(&g);
    if (e != cudaSuccess) rc = cuda_fail(e, "cudaStreamCreate", dev);
  }
  if (rc) {
    free(s);
    tpx__gpu_release(dev);
    return rc;
  }
  *out = s;
  return 0;
}

void tpx__gpu_stream_destroy(tpx_gpu_stream_t *s) {
  if (!s) return;
  tpx_gpu_guard_t g;
  if (tpx__gpu_guard_enter(s->dev, &g) == 0) {
    cudaError_t e = cudaStreamSynchronize(s->s);
    if (e != cudaSuccess) TPX_WARN("gpu %d: stream teardown: %s", s->dev, cudaGetErrorString(e));
    e = cudaStreamDestroy(s->s);
    if (e != cudaSuccess) TPX_WARN("gpu %d: cudaStreamDestroy: %s", s->dev, cudaGetErrorString(e));
    tpx__gpu_guard_leave(&g);
  }
  tpx__gpu_release(s->dev);
  free(s);
}

int tpx__gpu_stream_sync(tpx_gpu_stream_t *s) {
  if (!s) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_stream_sync: NULL");
  WITH_CTX(s->dev);
  cudaError_t e = cudaStreamSynchronize(s->s);
  tpx__gpu_guard_leave(&g_);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaStreamSynchronize", s->dev);
}

int tpx__gpu_stream_dev(const tpx_gpu_stream_t *s) { return s ? s->dev : TPX_GPU_NONE; }
void *tpx__gpu_stream_handle(const tpx_gpu_stream_t *s) { return s ? (void *)s->s : NULL; }

int tpx__gpu_memcpy_async(tpx_gpu_stream_t *s, void *dst, const void *src, size_t bytes) {
  if (!s) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_memcpy_async: NULL stream");
  if (bytes == 0) return 0;
  if (!dst || !src) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_memcpy_async: NULL");
  WITH_CTX(s->dev);
  cudaError_t e = cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, s->s);
  tpx__gpu_guard_leave(&g_);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaMemcpyAsync", s->dev);
}

/* ---- pooled events ---- */

struct tpx_gpu_event {
  cudaEvent_t e;
  int dev;
  struct tpx_gpu_event *next;
};

struct tpx_gpu_evpool {
  int dev;
  pthread_mutex_t mu;
  tpx_gpu_event_t *free;
  int created;
  int taken;
};

static int event_new(tpx_gpu_evpool_t *p, tpx_gpu_event_t **out) {
  tpx_gpu_event_t *ev = calloc(1, sizeof *ev);
  if (!ev) return tpx_err_quiet(TPX_ENOMEM, "gpu %d: event", p->dev);
  ev->dev = p->dev;
  WITH_CTX(p->dev);
  cudaError_t e = cudaEventCreateWithFlags(&ev->e, cudaEventDisableTiming);
  tpx__gpu_guard_leave(&g_);
  if (e != cudaSuccess) {
    free(ev);
    return cuda_fail(e, "cudaEventCreate", p->dev);
  }
  *out = ev;
  return 0;
}

static void event_free(tpx_gpu_event_t *ev) {
  tpx_gpu_guard_t g;
  if (tpx__gpu_guard_enter(ev->dev, &g) == 0) {
    cudaError_t e = cudaEventDestroy(ev->e);
    if (e != cudaSuccess) TPX_WARN("gpu %d: cudaEventDestroy: %s", ev->dev, cudaGetErrorString(e));
    tpx__gpu_guard_leave(&g);
  }
  free(ev);
}

int tpx__gpu_evpool_create(int dev, int prealloc, tpx_gpu_evpool_t **out) {
  if (!out || prealloc < 0) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_evpool_create");
  *out = NULL;
  int rc = tpx__gpu_retain(dev);
  if (rc) return rc;
  tpx_gpu_evpool_t *p = calloc(1, sizeof *p);
  if (!p) {
    tpx__gpu_release(dev);
    return tpx_err_quiet(TPX_ENOMEM, "tpx__gpu_evpool_create");
  }
  p->dev = dev;
  pthread_mutex_init(&p->mu, NULL);
  for (int i = 0; i < prealloc; i++) {
    tpx_gpu_event_t *ev = NULL;
    rc = event_new(p, &ev);
    if (rc) {
      tpx__gpu_evpool_destroy(p);
      return rc;
    }
    ev->next = p->free;
    p->free = ev;
    p->created++;
  }
  *out = p;
  return 0;
}

void tpx__gpu_evpool_destroy(tpx_gpu_evpool_t *p) {
  if (!p) return;
  if (p->taken) TPX_WARN("gpu %d: event pool destroyed with %d event(s) still taken", p->dev, p->taken);
  while (p->free) {
    tpx_gpu_event_t *ev = p->free;
    p->free = ev->next;
    event_free(ev);
  }
  pthread_mutex_destroy(&p->mu);
  tpx__gpu_release(p->dev);
  free(p);
}

int tpx__gpu_event_get(tpx_gpu_evpool_t *p, tpx_gpu_event_t **out) {
  if (!p || !out) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_event_get: NULL");
  pthread_mutex_lock(&p->mu);
  tpx_gpu_event_t *ev = p->free;
  if (ev) {
    p->free = ev->next;
    p->taken++;
  }
  pthread_mutex_unlock(&p->mu);
  if (!ev) {
    int rc = event_new(p, &ev); /* outside the lock: creation can be slow */
    if (rc) return rc;
    pthread_mutex_lock(&p->mu);
    p->created++;
    p->taken++;
    pthread_mutex_unlock(&p->mu);
  }
  ev->next = NULL;
  *out = ev;
  return 0;
}

void tpx__gpu_event_put(tpx_gpu_evpool_t *p, tpx_gpu_event_t *ev) {
  if (!p || !ev) return;
  pthread_mutex_lock(&p->mu);
  ev->next = p->free;
  p->free = ev;
  p->taken--;
  pthread_mutex_unlock(&p->mu);
}

int tpx__gpu_evpool_created(const tpx_gpu_evpool_t *p) {
  if (!p) return 0;
  pthread_mutex_lock((pthread_mutex_t *)&p->mu);
  int n = p->created;
  pthread_mutex_unlock((pthread_mutex_t *)&p->mu);
  return n;
}

int tpx__gpu_evpool_taken(const tpx_gpu_evpool_t *p) {
  if (!p) return 0;
  pthread_mutex_lock((pthread_mutex_t *)&p->mu);
  int n = p->taken;
  pthread_mutex_unlock((pthread_mutex_t *)&p->mu);
  return n;
}

int tpx__gpu_event_record(tpx_gpu_event_t *ev, tpx_gpu_stream_t *s) {
  if (!ev || !s) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_event_record: NULL");
  if (ev->dev != s->dev)
    return tpx_err_quiet(TPX_EINVAL, "event of GPU %d recorded on a stream of GPU %d", ev->dev, s->dev);
  WITH_CTX(s->dev);
  cudaError_t e = cudaEventRecord(ev->e, s->s);
  tpx__gpu_guard_leave(&g_);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaEventRecord", s->dev);
}

int tpx__gpu_event_query(tpx_gpu_event_t *ev) {
  if (!ev) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_event_query: NULL");
  WITH_CTX(ev->dev);
  cudaError_t e = cudaEventQuery(ev->e);
  tpx__gpu_guard_leave(&g_);
  if (e == cudaSuccess) return 1;
  if (e == cudaErrorNotReady) return 0;
  return cuda_fail(e, "cudaEventQuery", ev->dev);
}

int tpx__gpu_event_sync(tpx_gpu_event_t *ev) {
  if (!ev) return tpx_err_quiet(TPX_EINVAL, "tpx__gpu_event_sync: NULL");
  WITH_CTX(ev->dev);
  cudaError_t e = cudaEventSynchronize(ev->e);
  tpx__gpu_guard_leave(&g_);
  return e == cudaSuccess ? 0 : cuda_fail(e, "cudaEventSynchronize", ev->dev);
}

void *tpx__gpu_event_handle(const tpx_gpu_event_t *ev) { return ev ? (void *)ev->e : NULL; }

#endif /* TPX_HAVE_CUDA */
