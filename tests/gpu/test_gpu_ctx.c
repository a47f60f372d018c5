/* GPU layer on a real GPU: primary-context balance, context switching on
 * any thread (the caller's context restored), pointer classification,
 * pinned mapped memory, streams and the pooled event allocator.
 * Exit 0: all passed; 1: a failure; 77: no GPU (skipped). */
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>

#include "cuda/gpu.h"
#include "cuda/unpack.h"
#include "gpu_check.h"

typedef CUresult (*pfn_ctx_get)(CUcontext *);
typedef CUresult (*pfn_ctx_set)(CUcontext);
static pfn_ctx_get ctx_get;
static pfn_ctx_set ctx_set;

static CUcontext current(void) {
  CUcontext c = NULL;
  if (ctx_get(&c) != CUDA_SUCCESS) return (CUcontext)(uintptr_t)-1;
  return c;
}

static void test_refcount(int ndev) {
  CHECK(tpx__gpu_ctx_retained() == 0, "nothing retained at start");
  MUST(tpx__gpu_retain(0));
  MUST(tpx__gpu_retain(0));
  CHECK(tpx__gpu_ctx_refs(0) == 2, "refs %d", tpx__gpu_ctx_refs(0));
  CHECK(tpx__gpu_ctx_retained() == 1, "one device retained, got %d", tpx__gpu_ctx_retained());
  MUST(tpx__gpu_release(0));
  CHECK(tpx__gpu_ctx_retained() == 1, "still held after one release");
  MUST(tpx__gpu_release(0));
  CHECK(tpx__gpu_ctx_refs(0) == 0 && tpx__gpu_ctx_retained() == 0, "balanced");
  CHECK(tpx__gpu_release(0) == TPX_EUSAGE, "release without retain is a usage error");
  CHECK(tpx__gpu_retain(ndev) == TPX_EINVAL, "no such device");
  CHECK(tpx__gpu_retain(-1) == TPX_EINVAL, "negative device");
  tpx_gpu_guard_t g;
  CHECK(tpx__gpu_guard_enter(0, &g) == TPX_EUSAGE, "context used before retain");
}

/* Objects hold their own references; create/destroy cycles leave nothing. */
static void test_object_balance(int ndev) {
  for (int round = 0; round < 20; round++) {
    int dev = round % ndev;
    tpx_gpu_stream_t *s = NULL;
    tpx_gpu_evpool_t *p = NULL;
    tpx_unpacker_t *u = NULL;
    MUST(tpx__gpu_stream_create(dev, &s));
    MUST(tpx__gpu_evpool_create(dev, 2, &p));
    tpx_unpack_opts_t o;
    tpx__unpacker_opts_default(&o);
    o.mode = round % 3;
    MUST(tpx__unpacker_create(dev, &o, &u));
    CHECK(tpx__gpu_ctx_refs(dev) >= 3, "objects hold refs (%d)", tpx__gpu_ctx_refs(dev));
    CHECK(tpx__gpu_ctx_retained() == 1, "one driver retain per device, got %d", tpx__gpu_ctx_retained());
    tpx__unpacker_destroy(u);
    tpx__gpu_evpool_destroy(p);
    tpx__gpu_stream_destroy(s);
    CHECK(tpx__gpu_ctx_refs(dev) == 0, "round %d: refs back to 0 (%d)", round, tpx__gpu_ctx_refs(dev));
  }
  CHECK(tpx__gpu_ctx_retained() == 0, "all released after teardown (%d)", tpx__gpu_ctx_retained());
}

struct thr_arg {
  int dev;
  CUcontext want;
  int ok;
};

static void *progress_thread(void *a) {
  struct thr_arg *t = a;
  t->ok = 0;
  if (current() != NULL) return NULL; /* new threads start with no context */
  if (tpx__gpu_set_device(t->dev) != 0) return NULL;
  if (current() != t->want) return NULL;
  void *p = NULL;
  if (tpx__gpu_malloc(t->dev, 1 << 20, &p) != 0) return NULL;
  int dev = -1;
  bool isdev = tpx__gpu_is_device_ptr(p, &dev);
  if (tpx__gpu_free(t->dev, p) != 0) return NULL;
  t->ok = isdev && dev == t->dev && current() == t->want;
  return NULL;
}

static void test_contexts(int ndev) {
  for (int d = 0; d < ndev; d++) MUST(tpx__gpu_retain(d));
  /* Guard: switches in, restores the caller's (here: no) context. */
  CUcontext before = current();
  tpx_gpu_guard_t g;
  MUST(tpx__gpu_guard_enter(0, &g));
  CUcontext c0 = current();
  CHECK(c0 != NULL, "a context is current inside the guard");
  tpx__gpu_guard_leave(&g);
  CHECK(current() == before, "caller's context restored");
  /* A user context that is not ours is restored too. */
  if (ndev > 1) {
    MUST(tpx__gpu_guard_enter(1, &g));
    CUcontext c1 = current();
    tpx__gpu_guard_leave(&g);
    CHECK(c1 != c0, "each GPU has its own primary context");
    CHECK(ctx_set(c1) == CUDA_SUCCESS, "set");
    MUST(tpx__gpu_guard_enter(0, &g));
    CHECK(current() == c0, "switched to GPU 0");
    tpx__gpu_guard_leave(&g);
    CHECK(current() == c1, "GPU 1 context restored");
    ctx_set(before);
  }
  /* Progress threads: pin a device once, work in it. */
  pthread_t th[4];
  struct thr_arg args[4];
  for (int i = 0; i < 4; i++) {
    args[i].dev = i % ndev;
    MUST(tpx__gpu_guard_enter(args[i].dev, &g));
    args[i].want = current();
    tpx__gpu_guard_leave(&g);
    CHECK(pthread_create(&th[i], NULL, progress_thread, &args[i]) == 0, "thread");
  }
  for (int i = 0; i < 4; i++) {
    pthread_join(th[i], NULL);
    CHECK(args[i].ok, "thread %d on GPU %d worked in the right context", i, args[i].dev);
  }
  for (int d = 0; d < ndev; d++) MUST(tpx__gpu_release(d));
  CHECK(tpx__gpu_ctx_retained() == 0, "released");
}

static void test_pointers(int ndev) {
  for (int d = 0; d < ndev; d++) MUST(tpx__gpu_retain(d));
  for (int d = 0; d < ndev; d++) {
    void *p = NULL;
    MUST(tpx__gpu_malloc(d, 3 << 20, &p));
    tpx_gpu_ptr_info_t info;
    MUST(tpx__gpu_ptr_query((char *)p + 12345, &info));
    CHECK(info.mem == TPX_GPU_MEM_DEVICE, "device memory, got %d", info.mem);
    CHECK(info.dev == d, "on GPU %d, got %d", d, info.dev);
    CHECK(info.base == p, "allocation base %p, got %p", p, info.base);
    CHECK(info.size >= (3u << 20), "allocation size %zu", info.size);
    int dev = -1;
    CHECK(tpx__gpu_is_device_ptr(p, &dev) && dev == d, "is device ptr of GPU %d (%d)", d, dev);
    MUST(tpx__gpu_free(d, p));
  }
  void *h = NULL, *hd = NULL;
  MUST(tpx__gpu_host_alloc(0, 1 << 20, &h));
  tpx_gpu_ptr_info_t info;
  MUST(tpx__gpu_ptr_query(h, &info));
  CHECK(info.mem == TPX_GPU_MEM_PINNED, "pinned host memory, got %d", info.mem);
  CHECK(!tpx__gpu_is_device_ptr(h, NULL), "pinned host is not device memory");
  MUST(tpx__gpu_host_dev_ptr(0, h, &hd));
  CHECK(hd != NULL, "mapped device address");
  /* Data written by the CPU is visible through the mapping. */
  memset(h, 0x5C, 1 << 20);
  void *d = NULL;
  unsigned char back[4096];
  MUST(tpx__gpu_malloc(0, 1 << 20, &d));
  MUST(tpx__gpu_memcpy(0, d, hd, 1 << 20));
  MUST(tpx__gpu_memcpy(0, back, (char *)d + 4096, sizeof back));
  int same = 1;
  for (size_t i = 0; i < sizeof back; i++) same &= back[i] == 0x5C;
  CHECK(same, "bytes through the mapping");
  MUST(tpx__gpu_free(0, d));
  MUST(tpx__gpu_host_free(0, h));
  /* Registered host memory. */
  void *r = aligned_alloc(4096, 1 << 16);
  CHECK(r != NULL, "alloc");
  MUST(tpx__gpu_host_register(0, r, 1 << 16));
  MUST(tpx__gpu_ptr_query(r, &info));
  CHECK(info.mem == TPX_GPU_MEM_PINNED, "registered host memory is pinned, got %d", info.mem);
  MUST(tpx__gpu_host_unregister(0, r));
  free(r);
  /* Ordinary host memory. */
  char stack_buf[64];
  MUST(tpx__gpu_ptr_query(stack_buf, &info));
  CHECK(info.mem == TPX_GPU_MEM_HOST && info.dev == -1, "plain host memory");
  /* Managed memory (small: never ask for much of it). */
  tpx_gpu_guard_t g;
  MUST(tpx__gpu_guard_enter(0, &g));
  void *m = NULL;
  cudaError_t e = cudaMallocManaged(&m, 4096, cudaMemAttachGlobal);
  tpx__gpu_guard_leave(&g);
  if (e == cudaSuccess) {
    MUST(tpx__gpu_ptr_query(m, &info));
    CHECK(info.mem == TPX_GPU_MEM_MANAGED, "managed, got %d", info.mem);
    CHECK(tpx__gpu_is_device_ptr(m, NULL), "managed counts as GPU memory");
    MUST(tpx__gpu_guard_enter(0, &g));
    cudaFree(m);
    tpx__gpu_guard_leave(&g);
  } else {
    printf("note: cudaMallocManaged unavailable (%s); managed check skipped\n", cudaGetErrorString(e));
  }
  char bus[32];
  MUST(tpx__gpu_pci_bus_id(0, bus, sizeof bus));
  CHECK(strlen(bus) >= 12, "pci bus id '%s'", bus);
  printf("GPU 0 at %s\n", bus);
  for (int dd = 0; dd < ndev; dd++) MUST(tpx__gpu_release(dd));
}

static void test_event_pool(void) {
  tpx_gpu_stream_t *s = NULL;
  tpx_gpu_evpool_t *p = NULL;
  MUST(tpx__gpu_stream_create(0, &s));
  MUST(tpx__gpu_evpool_create(0, 2, &p));
  CHECK(tpx__gpu_evpool_created(p) == 2, "preallocated");
  void *a = NULL, *b = NULL;
  MUST(tpx__gpu_malloc(0, 8 << 20, &a));
  MUST(tpx__gpu_malloc(0, 8 << 20, &b));
  for (int i = 0; i < 2000; i++) { /* one per chunk, like the engine */
    tpx_gpu_event_t *ev = NULL;
    MUST(tpx__gpu_event_get(p, &ev));
    MUST(tpx__gpu_memcpy_async(s, b, a, 64 << 10));
    MUST(tpx__gpu_event_record(ev, s));
    int q;
    for (int spin = 0; (q = tpx__gpu_event_query(ev)) == 0 && spin < 10000000; spin++) {
    }
    CHECK(q == 1, "event completes (%d)", q);
    tpx__gpu_event_put(p, ev);
  }
  CHECK(tpx__gpu_evpool_created(p) == 2, "no event created per chunk (%d)", tpx__gpu_evpool_created(p));
  tpx_gpu_event_t *evs[6];
  for (int i = 0; i < 6; i++) MUST(tpx__gpu_event_get(p, &evs[i]));
  CHECK(tpx__gpu_evpool_created(p) == 6 && tpx__gpu_evpool_taken(p) == 6, "grows on demand");
  for (int i = 0; i < 6; i++) tpx__gpu_event_put(p, evs[i]);
  CHECK(tpx__gpu_evpool_taken(p) == 0, "all returned");
  MUST(tpx__gpu_stream_sync(s));
  MUST(tpx__gpu_free(0, a));
  MUST(tpx__gpu_free(0, b));
  /* the frees above need the context: the objects still hold it */
  tpx__gpu_evpool_destroy(p);
  tpx__gpu_stream_destroy(s);
  CHECK(tpx__gpu_ctx_retained() == 0, "released");
}

int main(void) {
  int ndev = 0;
  if (tpx__gpu_device_count(&ndev) != 0 || ndev == 0) {
    printf("test_gpu_ctx: no GPU (%s); skipped\n", tpx_last_error());
    return 77;
  }
  if (cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", (void **)&ctx_get, 12000, cudaEnableDefault,
                                       NULL) != cudaSuccess ||
      cudaGetDriverEntryPointByVersion("cuCtxSetCurrent", (void **)&ctx_set, 12000, cudaEnableDefault,
                                       NULL) != cudaSuccess) {
    fprintf(stderr, "driver entry points unavailable\n");
    return 1;
  }
  printf("test_gpu_ctx: %d GPU(s)\n", ndev);
  test_refcount(ndev);
  test_object_balance(ndev);
  test_contexts(ndev);
  test_pointers(ndev);
  /* test_event_pool frees memory while the stream/pool hold GPU 0. */
  test_event_pool();
  CHECK(tpx__gpu_ctx_retained() == 0, "balanced at exit (%d)", tpx__gpu_ctx_retained());
  return gc_finish("test_gpu_ctx");
}
