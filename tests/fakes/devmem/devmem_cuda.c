/* The devmem stand-in and the CUDA driver, for real GPU memory: loaded at
 * need, its contexts and streams for the copies, and the copies themselves. */
#include "devmem_standin.h"

struct dm_driver dm_cu;
pthread_mutex_t dm_cu_lock = PTHREAD_MUTEX_INITIALIZER;

int dm_cu_load(void) {
  pthread_mutex_lock(&dm_cu_lock);
  if (!dm_cu.tried) {
    dm_cu.tried = 1;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
    struct { const char *name; void **fn; } syms[] = {
        {"cuDeviceGetByPCIBusId", (void **)&dm_cu.by_pci}, {"cuDevicePrimaryCtxRetain", (void **)&dm_cu.retain},
        {"cuCtxPushCurrent_v2", (void **)&dm_cu.push}, {"cuCtxPopCurrent_v2", (void **)&dm_cu.pop},
        {"cuCtxGetCurrent", (void **)&dm_cu.get_ctx}, {"cuCtxGetDevice", (void **)&dm_cu.ctx_dev},
        {"cuDeviceGetAttribute", (void **)&dm_cu.attr}, {"cuPointerGetAttribute", (void **)&dm_cu.ptr_attr},
        {"cuMemImportFromShareableHandle", (void **)&dm_cu.import}, {"cuMemAddressReserve", (void **)&dm_cu.reserve},
        {"cuMemMap", (void **)&dm_cu.map}, {"cuMemSetAccess", (void **)&dm_cu.access},
        {"cuMemRelease", (void **)&dm_cu.release}, {"cuMemcpyHtoDAsync_v2", (void **)&dm_cu.htod},
        {"cuMemcpyDtoHAsync_v2", (void **)&dm_cu.dtoh}, {"cuStreamCreate", (void **)&dm_cu.stream_create},
        {"cuStreamSynchronize", (void **)&dm_cu.stream_sync}, {"cuMemHostAlloc", (void **)&dm_cu.host_alloc},
    };
    dm_cu.ok = lib != NULL;
    for (size_t i = 0; dm_cu.ok && i < sizeof(syms) / sizeof(syms[0]); i++)
      if (!(*syms[i].fn = dlsym(lib, syms[i].name))) {
        dm_note("libcuda.so.1 has no %s", syms[i].name);
        dm_cu.ok = 0;
      }
    if (!lib) dm_note("no CUDA driver: %s", dlerror());
    /* Optional (dm_copy_ctx): without them, copies run in the memory's context. */
    if (dm_cu.ok) {
      dm_cu.ctx_create = (__typeof__(dm_cu.ctx_create))dlsym(lib, "cuCtxCreate_v2");
      dm_cu.retain_handle = (__typeof__(dm_cu.retain_handle))dlsym(lib, "cuMemRetainAllocationHandle");
    }
  }
  pthread_mutex_unlock(&dm_cu_lock);
  return dm_cu.ok;
}

/* 1 when the loaded libcuda.so.1 is NVIDIA's driver; 0 when it is the CUDA
 * test doubles' (tests/fakes/cuda, whose memory this library maps itself)
 * or none is loaded yet. */
int dm_driver_is_real(void) {
  static _Atomic int known = -1; /* settled once a driver is loaded */
  int k = atomic_load(&known);
  if (k < 0) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) return 0;
    atomic_store(&known, k = !dlsym(lib, "fake_cuda_find"));
  }
  return k;
}

/* ctx's copy stream, made on first use (ctx current). NULL when none can be. */
CUstream dm_cu_stream(CUcontext ctx) {
  CUstream st = NULL;
  pthread_mutex_lock(&dm_cu_lock);
  for (int i = 0; i < dm_cu.nstreams; i++)
    if (dm_cu.streams[i].ctx == ctx) st = dm_cu.streams[i].stream;
  if (!st && dm_cu.nstreams < (int)(sizeof(dm_cu.streams) / sizeof(dm_cu.streams[0]))) {
    int w = dm_watch_begin("cuStreamCreate", 0);
    if (dm_cu.stream_create(&st, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS) {
      dm_cu.streams[dm_cu.nstreams].ctx = ctx;
      dm_cu.streams[dm_cu.nstreams++].stream = st;
    }
    dm_watch_end(w);
  }
  pthread_mutex_unlock(&dm_cu_lock);
  return st;
}

/* ctx's copy stream made now, while the plugin sets up, rather than at the
 * first copy, when making it could wait behind a running kernel. */
static void cu_stream_now(CUcontext ctx) {
  CUcontext popped;
  if (dm_cu.push(ctx) != CUDA_SUCCESS) return;
  (void)dm_cu_stream(ctx);
  dm_cu.pop(&popped);
}

/* Runs of bytes to or from GPU memory, copied in ctx (pushed for the call)
 * and waited for once. 0 or -EIO.
 * On a non-blocking stream of its own: the NIC's DMA waits for no kernel, and
 * a copy on the legacy default stream would wait for every kernel of the
 * context, among them NCCL's, which spins until these very bytes arrive. */
int dm_cu_copy(CUcontext ctx, int to_gpu, const struct cu_run *runs, size_t nruns) {
  CUcontext popped;
  if (dm_cu.push(ctx) != CUDA_SUCCESS) return -EIO;
  CUstream st = dm_cu_stream(ctx);
  CUresult rc = st ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  size_t bytes = 0;
  for (size_t i = 0; i < nruns; i++) bytes += runs[i].n;
  uint64_t t0 = dm_mono_ns();
  int w = dm_watch_begin(to_gpu ? "cuMemcpyHtoDAsync + cuStreamSynchronize" : "cuMemcpyDtoHAsync + cuStreamSynchronize", bytes);
  for (size_t i = 0; rc == CUDA_SUCCESS && i < nruns; i++)
    rc = to_gpu ? dm_cu.htod(runs[i].d, runs[i].h, runs[i].n, st) : dm_cu.dtoh(runs[i].h, runs[i].d, runs[i].n, st);
  if (st) { /* what was queued is waited for, even after an error */
    CUresult sync = dm_cu.stream_sync(st);
    if (rc == CUDA_SUCCESS) rc = sync;
  }
  dm_watch_end(w);
  dm_cu.pop(&popped);
  atomic_fetch_add(&dm_copy_calls[to_gpu], 1);
  atomic_fetch_add(&dm_copy_runs[to_gpu], nruns);
  atomic_fetch_add(&dm_copy_bytes[to_gpu], bytes);
  atomic_fetch_add(&dm_copy_ns[to_gpu], dm_mono_ns() - t0);
  if (rc != CUDA_SUCCESS) dm_note("cuMemcpy%s of %zu bytes failed: CUDA error %d", to_gpu ? "HtoD" : "DtoH", bytes, rc);
  return rc == CUDA_SUCCESS ? 0 : -EIO;
}

/* The context the copies of dev's VMM memory (cuMemMap'ed: RxDM's buffer,
 * NCCL's own buffers) run in: one of the stand-in's own, not the
 * application's. Streams of one context share the device's few hardware
 * queues, so a copy on a stream of the application's context can wait behind
 * a kernel that spins until that copy's bytes arrive (NCCL's receive kernel);
 * another context has queues of its own, as the NIC's DMA needs none. VMM
 * mappings are the process's, granted per device, so any context of the
 * device reaches them. DEVMEM_STANDIN_COPY_CTX=owner: the memory's own
 * context instead. Any thread: the caller's current context stays as it
 * was. NULL when none can be made. */
CUcontext dm_copy_ctx(CUdevice dev) {
  const char *mode = getenv("DEVMEM_STANDIN_COPY_CTX");
  if ((mode && strcmp(mode, "owner") == 0) || !dm_cu.ctx_create) return NULL;
  CUcontext c = NULL, popped;
  pthread_mutex_lock(&dm_cu_lock);
  for (int i = 0; i < dm_cu.ncopy; i++)
    if (dm_cu.copy[i].dev == dev) c = dm_cu.copy[i].ctx;
  if (!c && dm_cu.ncopy < MAX_BUFS) {
    int w = dm_watch_begin("cuCtxCreate", 0);
    CUresult rc = dm_cu.ctx_create(&c, 0, dev);
    dm_watch_end(w);
    if (rc == CUDA_SUCCESS) {
      dm_cu.pop(&popped); /* cuCtxCreate made it current */
      dm_cu.copy[dm_cu.ncopy].dev = dev;
      dm_cu.copy[dm_cu.ncopy++].ctx = c;
      dm_note("GPU %d: copies in a context of the stand-in's own", (int)dev);
    } else {
      c = NULL;
      dm_note("GPU %d: no context of our own (CUDA error %d): copies in the memory's context", (int)dev, rc);
    }
  }
  pthread_mutex_unlock(&dm_cu_lock);
  if (c) cu_stream_now(c);
  return c;
}

/* Pinned read buffers, allocated where a buffer is imported (while the plugin
 * sets up, before any kernel runs): allocating pinned memory at the first
 * receive could wait for the device, whose NCCL kernel waits for that very
 * receive. A thread takes one on its first read; past them, malloc. */
#define READ_POOL 16
void *dm_read_pool[READ_POOL];
int dm_read_pool_n;

void dm_read_pool_fill(void) { /* a context current */
  pthread_mutex_lock(&dm_cu_lock);
  int w = dm_watch_begin("cuMemHostAlloc", READ_MAX);
  while (dm_read_pool_n < READ_POOL &&
         dm_cu.host_alloc(&dm_read_pool[dm_read_pool_n], READ_MAX, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS)
    dm_read_pool_n++;
  dm_watch_end(w);
  pthread_mutex_unlock(&dm_cu_lock);
}

/* The contexts of the GPU named pci: its primary one (retained; RxDM's
 * buffer is imported there) and dm_copy_ctx's (*copy, NULL when none), with
 * their streams. Made where the plugin asks RxDM for the buffer
 * (early_contexts), and found again by the import. The CUDA error. */
CUresult dm_gpu_contexts(const char *pci, CUdevice *dev, CUcontext *primary, CUcontext *copy) {
  CUresult rc = dm_cu.by_pci(dev, pci);
  if (rc == CUDA_SUCCESS) rc = dm_cu.retain(primary, *dev);
  if (rc != CUDA_SUCCESS) return rc;
  cu_stream_now(*primary);
  *copy = dm_copy_ctx(*dev);
  return CUDA_SUCCESS;
}
