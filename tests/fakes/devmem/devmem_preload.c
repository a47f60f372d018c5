/* libtpx-devmem-standin.so: a stand-in for the kernel's devmem TCP receive
 * path and the NIC, preloaded (LD_PRELOAD) into a process running Google's
 * GPUDirect-TCPX plugin on a machine without them (docs/A3HIGH.md). It acts
 * only on what only the plugin asks for:
 *
 * - recvmsg(..., MSG_SOCK_DEVMEM): the bytes read go into free pages of the
 *   receive buffer RxDM handed out for the GPU the socket's flow-steering
 *   rule names (asked of the RxDM stand-in's standin_flow_gpu socket, as the
 *   NIC would look the flow up; the buffer fetched from get_gpu_fd_<pci> and
 *   get_gpu_metadata_<pci> as the plugin fetches it), and the reply is one
 *   SCM_DEVMEM_OFFSET control message per page (devmem_pages.h has the
 *   rules). No free page: EAGAIN, as if nothing had arrived.
 * - setsockopt(SOL_SOCKET, SO_DEVMEM_DONTNEED): the tokens come back; 0, or
 *   EINVAL for a token given back twice or never handed out (counted).
 * - cuMemGetHandleForAddressRange (the plugin's dma-buf of GPU memory for
 *   sends): the driver's answer, and which GPU range the descriptor stands
 *   for is noted; where the driver has no dma-buf support, a placeholder
 *   descriptor (an eventfd) stands for the range instead.
 * - ioctl(DMA_BUF_CREATE_PAGES) on a dma-buf: accepted (a new descriptor of
 *   the same memory), as the devmem kernel binds it to the NIC.
 * - sendmsg(..., SCM_DEVMEM_OFFSET {dma-buf fd, offset}): the bytes are sent
 *   from the dma-buf itself, MSG_ZEROCOPY kept, so the kernel's own
 *   completions arrive on the error queue as the plugin expects.
 * - realpath("/sys/class/net/lo/device"): a PCI-looking path, since the
 *   plugin reads the NIC's PCI address unchecked for CUDA registrations.
 *
 * Two kinds of memory, told apart by the descriptors: the CUDA test doubles'
 * (tests/fakes/cuda: memfds, mapped and used as they are) and a real GPU's
 * (NVIDIA's shareable handles and dma-bufs cannot be mapped): the receive
 * buffer is imported with the driver's VMM calls (when the plugin asks RxDM
 * for it) and written with cuMemcpyHtoDAsync on a non-blocking stream in a
 * CUDA context of the stand-in's own (copy_ctx); a send reads the
 * registered range with cuMemcpyDtoHAsync into a host shadow of the range,
 * whose pages stay put until the zero-copy completion, as the GPU memory
 * would. The driver is found with dlopen, only when real GPU memory shows
 * up.
 * DEVMEM_STANDIN_LOG=1: one line per refusal or buffer on stderr, and the
 * copies' totals (=2: a line per receive, send and token return too).
 * DEVMEM_STANDIN_COPY_CTX=owner: copies in the memory's own context. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/time.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cuda.h>

#include "devmem_pages.h"
#include "rxdm_proto.h"

/* The plugin's constants (its src/sock/tcpx.h, src/devcomm/unpack_defs1.h, src/gpu/tx_pool.cu). */
#define MSG_SOCK_DEVMEM 0x2000000
#define SO_DEVMEM_DONTNEED 97
#define SCM_DEVMEM_OFFSET 99
struct dma_buf_create_pages_info {
  uint64_t pci_bdf[3];
  int32_t dma_buf_fd;
  int32_t create_page_pool;
};
#define DMA_BUF_CREATE_PAGES _IOW('b', 2, struct dma_buf_create_pages_info)
#define LO_PCI_PATH "/sys/devices/pci0000:00/0000:00:00.0"
#define READ_MAX (512u << 10) /* bytes read per recvmsg at most */
#define MAX_BUFS 16           /* GPUs */
#define MAX_SOCK_FD 65536     /* sockets known by descriptor below this */
#define MAX_TX 256            /* GPU ranges registered for sends */

/* DEVMEM_STANDIN_LOG: 1 notes, 2 also a line per devmem receive, send and
 * token return. */
static int log_level(void) {
  static int on = -1;
  if (on < 0) on = getenv("DEVMEM_STANDIN_LOG") ? atoi(getenv("DEVMEM_STANDIN_LOG")) : 0;
  return on;
}

#define trace(...) (log_level() >= 2 ? note(__VA_ARGS__) : (void)0)

static void note(const char *fmt, ...) {
  if (log_level() < 1) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("devmem-standin: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* DEVMEM_STANDIN_LOG=1: a crash prints its stack first (GPU machines have
 * no debugger). */
static void on_crash(int sig) {
  void *frames[48];
  int n = backtrace(frames, 48);
  static const char msg[] = "devmem-standin: fatal signal, stack:\n";
  if (write(2, msg, sizeof(msg) - 1) < 0) n = 0;
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void crash_stacks(void) {
  const char *v = getenv("DEVMEM_STANDIN_LOG");
  if (v && v[0] == '1') {
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
  }
}

#define REAL(name, ...)                                                        \
  static __typeof__(name) *real_##name;                                        \
  if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

/* close() is ours too, and takes the locks: their holders close with this. */
static int sys_close(int fd) {
  REAL(close);
  return real_close(fd);
}

/* ---- a watch on our own driver calls ---- */
/* With DEVMEM_STANDIN_LOG set, a driver call of ours still running after
 * 3 s is named once, with its thread: a call that waits for the device
 * while a kernel waits for the network (NCCL's does) stalls the plugin. */
#define WATCH_SLOTS 64
static struct {
  _Atomic int used;
  const char *what;
  size_t bytes;
  pid_t tid;
  uint64_t since_ns;
  int said;
} watch[WATCH_SLOTS];

static uint64_t mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What the copies cost, said with DEVMEM_STANDIN_LOG every 20 s while it
 * changes and at exit: [0] out of GPU memory (sends), [1] into it
 * (receives). */
static _Atomic uint64_t copy_calls[2], copy_runs[2], copy_bytes[2], copy_ns[2];

static void copy_totals(void) {
  for (int to_gpu = 1; to_gpu >= 0; to_gpu--)
    if (copy_calls[to_gpu])
      note("pid %d: copies %s GPU memory: %llu calls, %llu runs, %llu bytes, %.3f s (%.1f us a call)",
           (int)getpid(), to_gpu ? "into" : "out of", (unsigned long long)copy_calls[to_gpu],
           (unsigned long long)copy_runs[to_gpu], (unsigned long long)copy_bytes[to_gpu],
           (double)copy_ns[to_gpu] / 1e9, (double)copy_ns[to_gpu] / 1e3 / (double)copy_calls[to_gpu]);
}

__attribute__((destructor)) static void copy_totals_at_exit(void) { copy_totals(); }

static void *watch_main(void *arg) {
  (void)arg;
  uint64_t said_calls = 0;
  for (unsigned tick = 1;; tick++) {
    sleep(1);
    uint64_t now = mono_ns(), calls = copy_calls[0] + copy_calls[1];
    if (tick % 20 == 0 && calls != said_calls) {
      said_calls = calls;
      copy_totals();
    }
    for (int i = 0; i < WATCH_SLOTS; i++)
      if (atomic_load(&watch[i].used) == 2 && !watch[i].said && now - watch[i].since_ns > 3000000000ull) {
        watch[i].said = 1;
        note("thread %d: %s (%zu bytes) still running after %.1f s", (int)watch[i].tid, watch[i].what,
             watch[i].bytes, (double)(now - watch[i].since_ns) / 1e9);
      }
  }
  return NULL;
}

/* A thread nobody joins (it runs until the process ends, or ends itself). 0 or -1. */
static int spawn_detached(void *(*fn)(void *), void *arg) {
  pthread_t t;
  pthread_attr_t at;
  if (pthread_attr_init(&at) != 0) return -1;
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &at, fn, arg);
  pthread_attr_destroy(&at);
  return rc == 0 ? 0 : -1;
}

static int watch_on;
static void watch_start(void) { watch_on = spawn_detached(watch_main, NULL) == 0; }

/* A slot for a call about to be made; -1 when not watching. */
static int watch_begin(const char *what, size_t bytes) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  if (log_level() < 1) return -1;
  pthread_once(&once, watch_start);
  if (!watch_on) return -1;
  for (int i = 0; i < WATCH_SLOTS; i++) {
    int free_ = 0;
    if (atomic_compare_exchange_strong(&watch[i].used, &free_, 1)) {
      watch[i].what = what;
      watch[i].bytes = bytes;
      watch[i].tid = (pid_t)syscall(SYS_gettid);
      watch[i].since_ns = mono_ns();
      watch[i].said = 0;
      atomic_store(&watch[i].used, 2);
      return i;
    }
  }
  return -1;
}

static void watch_end(int slot) {
  if (slot >= 0) atomic_store(&watch[slot].used, 0);
}

/* ---- the CUDA driver, for real GPU memory ---- */
static struct {
  int tried, ok;
  CUresult (*by_pci)(CUdevice *, const char *);
  CUresult (*retain)(CUcontext *, CUdevice);
  CUresult (*push)(CUcontext);
  CUresult (*pop)(CUcontext *);
  CUresult (*get_ctx)(CUcontext *);
  CUresult (*ctx_dev)(CUdevice *);
  CUresult (*attr)(int *, CUdevice_attribute, CUdevice);
  CUresult (*ptr_attr)(void *, CUpointer_attribute, CUdeviceptr);
  CUresult (*import)(CUmemGenericAllocationHandle *, void *, CUmemAllocationHandleType);
  CUresult (*reserve)(CUdeviceptr *, size_t, size_t, CUdeviceptr, unsigned long long);
  CUresult (*map)(CUdeviceptr, size_t, size_t, CUmemGenericAllocationHandle, unsigned long long);
  CUresult (*access)(CUdeviceptr, size_t, const CUmemAccessDesc *, size_t);
  CUresult (*release)(CUmemGenericAllocationHandle);
  CUresult (*htod)(CUdeviceptr, const void *, size_t, CUstream);
  CUresult (*dtoh)(void *, CUdeviceptr, size_t, CUstream);
  CUresult (*stream_create)(CUstream *, unsigned int);
  CUresult (*stream_sync)(CUstream);
  CUresult (*host_alloc)(void **, size_t, unsigned int);
  CUresult (*ctx_create)(CUcontext *, unsigned int, CUdevice);
  CUresult (*retain_handle)(CUmemGenericAllocationHandle *, void *);
  /* One non-blocking stream per context for the copies (see cu_copy). */
  struct { CUcontext ctx; CUstream stream; } streams[32];
  int nstreams;
  /* The copy context of each GPU (see copy_ctx). */
  struct { CUdevice dev; CUcontext ctx; } copy[MAX_BUFS];
  int ncopy;
} cu;
static pthread_mutex_t cu_lock = PTHREAD_MUTEX_INITIALIZER;

static int cu_load(void) {
  pthread_mutex_lock(&cu_lock);
  if (!cu.tried) {
    cu.tried = 1;
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (!lib) lib = dlopen("libcuda.so.1", RTLD_NOW);
    struct { const char *name; void **fn; } syms[] = {
        {"cuDeviceGetByPCIBusId", (void **)&cu.by_pci}, {"cuDevicePrimaryCtxRetain", (void **)&cu.retain},
        {"cuCtxPushCurrent_v2", (void **)&cu.push}, {"cuCtxPopCurrent_v2", (void **)&cu.pop},
        {"cuCtxGetCurrent", (void **)&cu.get_ctx}, {"cuCtxGetDevice", (void **)&cu.ctx_dev},
        {"cuDeviceGetAttribute", (void **)&cu.attr}, {"cuPointerGetAttribute", (void **)&cu.ptr_attr},
        {"cuMemImportFromShareableHandle", (void **)&cu.import}, {"cuMemAddressReserve", (void **)&cu.reserve},
        {"cuMemMap", (void **)&cu.map}, {"cuMemSetAccess", (void **)&cu.access},
        {"cuMemRelease", (void **)&cu.release}, {"cuMemcpyHtoDAsync_v2", (void **)&cu.htod},
        {"cuMemcpyDtoHAsync_v2", (void **)&cu.dtoh}, {"cuStreamCreate", (void **)&cu.stream_create},
        {"cuStreamSynchronize", (void **)&cu.stream_sync}, {"cuMemHostAlloc", (void **)&cu.host_alloc},
    };
    cu.ok = lib != NULL;
    for (size_t i = 0; cu.ok && i < sizeof(syms) / sizeof(syms[0]); i++)
      if (!(*syms[i].fn = dlsym(lib, syms[i].name))) {
        note("libcuda.so.1 has no %s", syms[i].name);
        cu.ok = 0;
      }
    if (!lib) note("no CUDA driver: %s", dlerror());
    /* Optional (copy_ctx): without them, copies run in the memory's context. */
    if (cu.ok) {
      cu.ctx_create = (__typeof__(cu.ctx_create))dlsym(lib, "cuCtxCreate_v2");
      cu.retain_handle = (__typeof__(cu.retain_handle))dlsym(lib, "cuMemRetainAllocationHandle");
    }
  }
  pthread_mutex_unlock(&cu_lock);
  return cu.ok;
}

/* 1 when the loaded libcuda.so.1 is NVIDIA's driver; 0 when it is the CUDA
 * test doubles' (tests/fakes/cuda, whose memory this library maps itself)
 * or none is loaded yet. */
static int driver_is_real(void) {
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
static CUstream cu_stream(CUcontext ctx) {
  CUstream st = NULL;
  pthread_mutex_lock(&cu_lock);
  for (int i = 0; i < cu.nstreams; i++)
    if (cu.streams[i].ctx == ctx) st = cu.streams[i].stream;
  if (!st && cu.nstreams < (int)(sizeof(cu.streams) / sizeof(cu.streams[0]))) {
    int w = watch_begin("cuStreamCreate", 0);
    if (cu.stream_create(&st, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS) {
      cu.streams[cu.nstreams].ctx = ctx;
      cu.streams[cu.nstreams++].stream = st;
    }
    watch_end(w);
  }
  pthread_mutex_unlock(&cu_lock);
  return st;
}

/* ctx's copy stream made now, while the plugin sets up, rather than at the
 * first copy, when making it could wait behind a running kernel. */
static void cu_stream_now(CUcontext ctx) {
  CUcontext popped;
  if (cu.push(ctx) != CUDA_SUCCESS) return;
  (void)cu_stream(ctx);
  cu.pop(&popped);
}

/* Runs of bytes to or from GPU memory, copied in ctx (pushed for the call)
 * and waited for once. 0 or -EIO.
 * On a non-blocking stream of its own: the NIC's DMA waits for no kernel, and
 * a copy on the legacy default stream would wait for every kernel of the
 * context, among them NCCL's, which spins until these very bytes arrive. */
struct cu_run {
  CUdeviceptr d;
  void *h;
  size_t n;
};
static int cu_copy(CUcontext ctx, int to_gpu, const struct cu_run *runs, size_t nruns) {
  CUcontext popped;
  if (cu.push(ctx) != CUDA_SUCCESS) return -EIO;
  CUstream st = cu_stream(ctx);
  CUresult rc = st ? CUDA_SUCCESS : CUDA_ERROR_OUT_OF_MEMORY;
  size_t bytes = 0;
  for (size_t i = 0; i < nruns; i++) bytes += runs[i].n;
  uint64_t t0 = mono_ns();
  int w = watch_begin(to_gpu ? "cuMemcpyHtoDAsync + cuStreamSynchronize" : "cuMemcpyDtoHAsync + cuStreamSynchronize", bytes);
  for (size_t i = 0; rc == CUDA_SUCCESS && i < nruns; i++)
    rc = to_gpu ? cu.htod(runs[i].d, runs[i].h, runs[i].n, st) : cu.dtoh(runs[i].h, runs[i].d, runs[i].n, st);
  if (st) { /* what was queued is waited for, even after an error */
    CUresult sync = cu.stream_sync(st);
    if (rc == CUDA_SUCCESS) rc = sync;
  }
  watch_end(w);
  cu.pop(&popped);
  atomic_fetch_add(&copy_calls[to_gpu], 1);
  atomic_fetch_add(&copy_runs[to_gpu], nruns);
  atomic_fetch_add(&copy_bytes[to_gpu], bytes);
  atomic_fetch_add(&copy_ns[to_gpu], mono_ns() - t0);
  if (rc != CUDA_SUCCESS) note("cuMemcpy%s of %zu bytes failed: CUDA error %d", to_gpu ? "HtoD" : "DtoH", bytes, rc);
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
static CUcontext copy_ctx(CUdevice dev) {
  const char *mode = getenv("DEVMEM_STANDIN_COPY_CTX");
  if ((mode && strcmp(mode, "owner") == 0) || !cu.ctx_create) return NULL;
  CUcontext c = NULL, popped;
  pthread_mutex_lock(&cu_lock);
  for (int i = 0; i < cu.ncopy; i++)
    if (cu.copy[i].dev == dev) c = cu.copy[i].ctx;
  if (!c && cu.ncopy < MAX_BUFS) {
    int w = watch_begin("cuCtxCreate", 0);
    CUresult rc = cu.ctx_create(&c, 0, dev);
    watch_end(w);
    if (rc == CUDA_SUCCESS) {
      cu.pop(&popped); /* cuCtxCreate made it current */
      cu.copy[cu.ncopy].dev = dev;
      cu.copy[cu.ncopy++].ctx = c;
      note("GPU %d: copies in a context of the stand-in's own", (int)dev);
    } else {
      c = NULL;
      note("GPU %d: no context of our own (CUDA error %d): copies in the memory's context", (int)dev, rc);
    }
  }
  pthread_mutex_unlock(&cu_lock);
  if (c) cu_stream_now(c);
  return c;
}

/* Pinned read buffers, allocated where a buffer is imported (while the plugin
 * sets up, before any kernel runs): allocating pinned memory at the first
 * receive could wait for the device, whose NCCL kernel waits for that very
 * receive. A thread takes one on its first read; past them, malloc. */
#define READ_POOL 16
static void *read_pool[READ_POOL];
static int read_pool_n;

static void read_pool_fill(void) { /* a context current */
  pthread_mutex_lock(&cu_lock);
  int w = watch_begin("cuMemHostAlloc", READ_MAX);
  while (read_pool_n < READ_POOL &&
         cu.host_alloc(&read_pool[read_pool_n], READ_MAX, CU_MEMHOSTALLOC_PORTABLE) == CUDA_SUCCESS)
    read_pool_n++;
  watch_end(w);
  pthread_mutex_unlock(&cu_lock);
}

/* ---- the RxDM stand-in's sockets ---- */
static _Thread_local int in_ask; /* our own requests are not the plugin's (connect below) */
static const char *prefix(void) {
  const char *p = getenv("NCCL_GPUDIRECTTCPX_UNIX_CLIENT_PREFIX");
  return p ? p : "/tmp";
}

/* One request (raw bytes) to <prefix>/<name>; the answer's frame decoded into
 * *m, or the descriptor it carried into *fd (fd != NULL). 0 or -1. */
static int ask(const char *name, const char *text, struct rxdm_msg *m, int *fd) {
  struct sockaddr_un sa = {.sun_family = AF_UNIX};
  if (snprintf(sa.sun_path, sizeof(sa.sun_path), "%s/%s", prefix(), name) >= (int)sizeof(sa.sun_path)) return -1;
  int s = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (s < 0) return -1;
  struct timeval tv = {2, 0}; /* the stand-in answers at once; never hang on it */
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  uint8_t req[256], ans[2 + 512];
  int n = rxdm_encode_request_raw(req, sizeof(req), text);
  int rc = -1;
  in_ask = 1;
  int c = connect(s, (struct sockaddr *)&sa, sizeof(sa));
  in_ask = 0;
  if (c != 0 || n < 0 || send(s, req, (size_t)n, MSG_NOSIGNAL) != n) goto out;
  if (fd) {
    char byte, ctl[CMSG_SPACE(sizeof(int))];
    struct iovec iov = {&byte, 1};
    struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1, .msg_control = ctl, .msg_controllen = sizeof(ctl)};
    if (recvmsg(s, &mh, MSG_CMSG_CLOEXEC) == 1 && CMSG_FIRSTHDR(&mh) &&
        CMSG_FIRSTHDR(&mh)->cmsg_type == SCM_RIGHTS) {
      memcpy(fd, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(int));
      rc = 0;
    }
    goto out;
  }
  size_t have = 0, want = 2;
  while (have < want) {
    ssize_t r = recv(s, ans + have, want - have, 0);
    if (r <= 0) goto out;
    have += (size_t)r;
    if (have == 2) {
      want = 2 + ((size_t)ans[0] << 8 | ans[1]);
      if (want > sizeof(ans)) goto out;
    }
  }
  rc = rxdm_decode(ans + 2, want - 2, m) == 0 && m->kind == RXDM_RAW ? 0 : -1;
out:
  sys_close(s);
  return rc;
}

/* ---- the receive buffers, one per GPU ---- */
struct rxbuf {
  char pci[RXDM_STR_MAX];
  pthread_mutex_t lock;
  struct devmem_pages pages; /* base: the mapping (test doubles), or NULL (GPU) */
  CUdeviceptr dptr;          /* GPU: the buffer, in ctx */
  CUcontext ctx;
};
static struct rxbuf bufs[MAX_BUFS];
static int nbufs;
static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER; /* nbufs, sock_buf, tx */
/* Fetching a buffer (RxDM and CUDA calls) holds this one, not lock, which
 * close() takes: the driver may close descriptors inside its calls. */
static pthread_mutex_t fetch_lock = PTHREAD_MUTEX_INITIALIZER;
static int8_t sock_buf[MAX_SOCK_FD];                     /* socket -> 1 + its buffer; 0 unknown */

/* The contexts of the GPU named pci: its primary one (retained; RxDM's
 * buffer is imported there) and copy_ctx's (*copy, NULL when none), with
 * their streams. Made where the plugin asks RxDM for the buffer
 * (early_contexts), and found again by the import. The CUDA error. */
static CUresult gpu_contexts(const char *pci, CUdevice *dev, CUcontext *primary, CUcontext *copy) {
  CUresult rc = cu.by_pci(dev, pci);
  if (rc == CUDA_SUCCESS) rc = cu.retain(primary, *dev);
  if (rc != CUDA_SUCCESS) return rc;
  cu_stream_now(*primary);
  *copy = copy_ctx(*dev);
  return CUDA_SUCCESS;
}

/* The real GPU's buffer: imported as the plugin imports it (its
 * src/gpu/common.cu), in the GPU's primary context. */
static int import_gpu(struct rxbuf *b, int fd) {
  struct rxdm_msg m;
  char meta[64];
  snprintf(meta, sizeof(meta), "get_gpu_metadata_%.32s", b->pci);
  struct { int fd; size_t size, align; } md;
  if (ask(meta, b->pci, &m, NULL) != 0 || m.raw_len != sizeof(md)) return note("no metadata from %s", meta), -1;
  memcpy(&md, m.raw, sizeof(md));
  if (!cu_load()) return -1;
  CUdevice dev;
  CUmemGenericAllocationHandle h;
  CUcontext copy, popped;
  CUresult rc = gpu_contexts(b->pci, &dev, &b->ctx, &copy);
  if (rc != CUDA_SUCCESS || cu.push(b->ctx) != CUDA_SUCCESS) return note("GPU %s: CUDA error %d", b->pci, rc), -1;
  int w = watch_begin("importing RxDM's buffer (cuMemImportFromShareableHandle, cuMemMap, cuMemSetAccess)", md.size);
  rc = cu.import(&h, (void *)(intptr_t)fd, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
  if (rc == CUDA_SUCCESS) {
    rc = cu.reserve(&b->dptr, md.size, md.align, 0, 0);
    if (rc == CUDA_SUCCESS) rc = cu.map(b->dptr, md.size, 0, h, 0);
    cu.release(h); /* the mapping keeps the memory */
  }
  CUmemAccessDesc desc = {.location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = dev},
                          .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  if (rc == CUDA_SUCCESS) rc = cu.access(b->dptr, md.size, &desc, 1);
  watch_end(w);
  if (rc == CUDA_SUCCESS) {
    read_pool_fill();
    if (copy) b->ctx = copy;
  }
  cu.pop(&popped);
  if (rc != CUDA_SUCCESS) return note("importing the buffer of GPU %s: CUDA error %d", b->pci, rc), -1;
  if (devmem_pages_init(&b->pages, NULL, md.size) != 0) return -1;
  note("buffer of GPU %s: %zu bytes of GPU memory", b->pci, md.size);
  return 0;
}

/* The buffer of GPU pci (fetch_lock held), fetched from RxDM on first use. */
static struct rxbuf *buffer_of(const char *pci) {
  for (int i = 0; i < nbufs; i++)
    if (!strcmp(bufs[i].pci, pci)) return &bufs[i];
  if (nbufs == MAX_BUFS) return NULL;
  struct rxbuf *b = &bufs[nbufs];
  memset(b, 0, sizeof(*b));
  snprintf(b->pci, sizeof(b->pci), "%.32s", pci);
  char name[64];
  snprintf(name, sizeof(name), "get_gpu_fd_%.32s", b->pci);
  int fd = -1, ok = -1;
  struct stat st;
  if (ask(name, pci, NULL, &fd) != 0 || fstat(fd, &st) != 0) {
    note("no buffer from %s/%s", prefix(), name);
  } else if (S_ISREG(st.st_mode) && st.st_size > 0) { /* the test doubles' memfd */
    void *base = mmap(NULL, (size_t)st.st_size, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    if (base == MAP_FAILED) note("cannot map the buffer of GPU %s", pci);
    else if ((ok = devmem_pages_init(&b->pages, base, (size_t)st.st_size)) == 0)
      note("buffer of GPU %s: %lld bytes (mapped)", pci, (long long)st.st_size);
  } else {
    ok = import_gpu(b, fd);
  }
  if (fd >= 0) sys_close(fd);
  if (ok != 0) return NULL;
  pthread_mutex_init(&b->lock, NULL);
  pthread_mutex_lock(&lock);
  nbufs++;
  pthread_mutex_unlock(&lock);
  return b;
}

/* The buffer socket fd receives into: its flow-steering rule's GPU, as the
 * RxDM stand-in has it (a NIC steers by the rule). NULL when there is none. */
static struct rxbuf *socket_buffer(int fd) {
  if (fd < 0 || fd >= MAX_SOCK_FD) return NULL;
  pthread_mutex_lock(&lock);
  int k = sock_buf[fd];
  pthread_mutex_unlock(&lock);
  if (k) return &bufs[k - 1];
  struct sockaddr_storage peer, self;
  socklen_t pl = sizeof(peer), sl = sizeof(self);
  char pip[INET6_ADDRSTRLEN], sip[INET6_ADDRSTRLEN], q[160];
  if (getpeername(fd, (struct sockaddr *)&peer, &pl) != 0 || getsockname(fd, (struct sockaddr *)&self, &sl) != 0)
    return NULL;
  int v4 = peer.ss_family == AF_INET;
  const void *pa = v4 ? (void *)&((struct sockaddr_in *)&peer)->sin_addr : (void *)&((struct sockaddr_in6 *)&peer)->sin6_addr;
  const void *sa = v4 ? (void *)&((struct sockaddr_in *)&self)->sin_addr : (void *)&((struct sockaddr_in6 *)&self)->sin6_addr;
  int pp = ntohs(v4 ? ((struct sockaddr_in *)&peer)->sin_port : ((struct sockaddr_in6 *)&peer)->sin6_port);
  int sp = ntohs(v4 ? ((struct sockaddr_in *)&self)->sin_port : ((struct sockaddr_in6 *)&self)->sin6_port);
  if (!inet_ntop(peer.ss_family, pa, pip, sizeof(pip)) || !inet_ntop(peer.ss_family, sa, sip, sizeof(sip)))
    return NULL;
  snprintf(q, sizeof(q), "%s %d %s %d", pip, pp, sip, sp);
  struct rxdm_msg m = {.kind = RXDM_EMPTY};
  if (ask("standin_flow_gpu", q, &m, NULL) != 0 || strncmp(m.raw, "gpu ", 4) != 0) {
    note("flow %s:%d -> %s:%d: no flow-steering rule (%s)", pip, pp, sip, sp, m.kind == RXDM_RAW ? m.raw : "no answer");
    return NULL;
  }
  pthread_mutex_lock(&fetch_lock);
  struct rxbuf *b = buffer_of(m.raw + 4);
  pthread_mutex_unlock(&fetch_lock);
  pthread_mutex_lock(&lock);
  if (b) sock_buf[fd] = (int8_t)(1 + (b - bufs));
  pthread_mutex_unlock(&lock);
  return b;
}

/* The thread's read buffer: pinned when the driver is there. */
static uint8_t *read_buffer(struct rxbuf *b) {
  static _Thread_local uint8_t *tmp;
  if (tmp) return tmp;
  if (!b->pages.base) { /* no CUDA call here: see read_pool */
    pthread_mutex_lock(&cu_lock);
    if (read_pool_n > 0) tmp = read_pool[--read_pool_n];
    pthread_mutex_unlock(&cu_lock);
    if (tmp) return tmp;
  }
  return tmp = malloc(READ_MAX);
}

ssize_t recvmsg(int fd, struct msghdr *msg, int flags) {
  REAL(recvmsg);
  if (!(flags & MSG_SOCK_DEVMEM)) return real_recvmsg(fd, msg, flags);
  flags &= ~MSG_SOCK_DEVMEM;
  struct rxbuf *b = socket_buffer(fd);
  if (!b) {
    errno = ENODEV;
    return -1;
  }
  uint8_t *tmp = read_buffer(b);
  if (!tmp) {
    errno = ENOMEM;
    return -1;
  }
  pthread_mutex_lock(&b->lock);
  struct devmem_pages *dp = &b->pages;
  /* As much as fits: the caller's first iovec, its control room, free pages. */
  size_t room = msg->msg_controllen / CMSG_SPACE(sizeof(struct devmemvec));
  size_t want = msg->msg_iovlen ? msg->msg_iov[0].iov_len : 0;
  if (want > room * DEVMEM_PAGE) want = room * DEVMEM_PAGE;
  if (want > (size_t)dp->nfree * DEVMEM_PAGE) want = (size_t)dp->nfree * DEVMEM_PAGE;
  if (want == 0) { /* the buffer is full: nothing arrives until tokens come back */
    pthread_mutex_unlock(&b->lock);
    errno = EAGAIN;
    return -1;
  }
  if (want > READ_MAX) want = READ_MAX;
  ssize_t r = recv(fd, tmp, want, flags);
  if (r <= 0) {
    pthread_mutex_unlock(&b->lock);
    return r;
  }
  struct devmemvec frags[READ_MAX / DEVMEM_PAGE];
  size_t nf;
  devmem_pages_rx(dp, fd, tmp, (size_t)r, frags, READ_MAX / DEVMEM_PAGE, &nf);
  pthread_mutex_unlock(&b->lock);
  /* GPU memory: the pages are this socket's now; copy them in, a run of
   * consecutive pages at a time. */
  if (!dp->base) {
    struct cu_run runs[READ_MAX / DEVMEM_PAGE];
    size_t done = 0, nruns = 0;
    for (size_t i = 0; i < nf;) {
      size_t j = i + 1, len = frags[i].frag_size;
      while (j < nf && frags[j].frag_offset == frags[j - 1].frag_offset + DEVMEM_PAGE &&
             frags[j - 1].frag_size == DEVMEM_PAGE)
        len += frags[j++].frag_size;
      runs[nruns++] = (struct cu_run){b->dptr + frags[i].frag_offset, tmp + done, len};
      done += len;
      i = j;
    }
    if (cu_copy(b->ctx, 1, runs, nruns) != 0) {
      errno = EIO;
      return -1;
    }
  }
  struct cmsghdr *cm = CMSG_FIRSTHDR(msg);
  for (size_t i = 0; i < nf; i++) {
    cm->cmsg_level = SOL_SOCKET;
    cm->cmsg_type = SCM_DEVMEM_OFFSET;
    cm->cmsg_len = CMSG_LEN(sizeof(struct devmemvec));
    memcpy(CMSG_DATA(cm), &frags[i], sizeof(frags[i]));
    cm = (struct cmsghdr *)((char *)cm + CMSG_SPACE(sizeof(struct devmemvec)));
  }
  msg->msg_controllen = nf * CMSG_SPACE(sizeof(struct devmemvec));
  msg->msg_flags = 0;
  trace("recvmsg fd %d: %zd bytes in %zu fragments, %u pages free", fd, r, nf, dp->nfree);
  return r;
}

/* ---- sends from GPU memory ---- */
/* A descriptor standing for GPU memory: the test doubles' dma-buf (mapped
 * on first use) or a real GPU range (read into a host shadow). */
static struct {
  int fd;
  uint8_t *base; /* the mapping, or the shadow (made on first use) */
  size_t size;
  CUdeviceptr dptr; /* 0: the test doubles' */
  CUcontext ctx;
} tx[MAX_TX];

static int tx_slot(void) {
  for (int i = 0; i < MAX_TX; i++)
    if (!tx[i].base && !tx[i].dptr) return i;
  return -1;
}

/* The plugin's dma-buf of a GPU range (gpu_tx_reg_mr, its src/gpu/tx_pool.cu),
 * with its context current. */
CUresult cuMemGetHandleForAddressRange(void *handle, CUdeviceptr dptr, size_t size, CUmemRangeHandleType type,
                                       unsigned long long flags) {
  REAL(cuMemGetHandleForAddressRange);
  /* The driver loaded for the plugin alone (dlopen'ed, not in the global
   * scope RTLD_NEXT searches) is found by name. */
  if (!real_cuMemGetHandleForAddressRange) {
    void *lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
    if (lib) real_cuMemGetHandleForAddressRange = (__typeof__(real_cuMemGetHandleForAddressRange))dlsym(lib, "cuMemGetHandleForAddressRange");
  }
  if (!real_cuMemGetHandleForAddressRange) {
    /* The plugin tests the descriptor, not the result, and its own starts at
     * 0 (stdin): a failure must say -1. */
    if (handle) *(int *)handle = -1;
    return note("no driver's cuMemGetHandleForAddressRange"), CUDA_ERROR_NOT_FOUND;
  }
  CUresult rc = real_cuMemGetHandleForAddressRange(handle, dptr, size, type, flags);
  /* The test doubles' dma-buf is a memfd that sendmsg maps. */
  if (!driver_is_real()) return rc;
  int fd = rc == CUDA_SUCCESS ? *(int *)handle : -1;
  if (type != CU_MEM_RANGE_HANDLE_TYPE_DMA_BUF_FD || !cu_load()) return note("dma-buf of 0x%llx: not noted", (unsigned long long)dptr), rc;
  CUcontext ctx = NULL;
  CUdevice dev = 0;
  int dmabuf = 1;
  cu.get_ctx(&ctx);
  if (ctx) cu.ctx_dev(&dev);
  /* Copies from the range run in the context that owns it, where it has one
   * (the plugin calls this in a context of its own). */
  CUcontext owner = NULL;
  if (cu.ptr_attr(&owner, CU_POINTER_ATTRIBUTE_CONTEXT, dptr) == CUDA_SUCCESS && owner) ctx = owner;
  if (!ctx) return note("dma-buf of 0x%llx: no CUDA context", (unsigned long long)dptr), rc;
  CUcontext popped;
  if (cu.push(ctx) == CUDA_SUCCESS) { /* the copy stream now, while the plugin sets up */
    (void)cu_stream(ctx);
    CUmemGenericAllocationHandle h; /* VMM memory: copies in the stand-in's context */
    CUdevice owner_dev;
    if (cu.retain_handle && cu.retain_handle(&h, (void *)dptr) == CUDA_SUCCESS) {
      cu.release(h);
      CUcontext own = cu.ctx_dev(&owner_dev) == CUDA_SUCCESS ? copy_ctx(owner_dev) : NULL;
      if (own) ctx = own;
    }
    cu.pop(&popped);
  }
  if (rc != CUDA_SUCCESS) {
    /* A driver without dma-buf support: a placeholder descriptor stands for
     * the range (only this library reads it). */
    if (cu.attr(&dmabuf, CU_DEVICE_ATTRIBUTE_DMA_BUF_SUPPORTED, dev) != CUDA_SUCCESS || dmabuf) return rc;
    if ((fd = eventfd(0, EFD_CLOEXEC)) < 0) return rc;
  }
  pthread_mutex_lock(&lock);
  int i = tx_slot();
  if (i >= 0) tx[i] = (__typeof__(tx[0])){fd, NULL, size, dptr, ctx};
  pthread_mutex_unlock(&lock);
  if (i < 0) {
    note("more than %d GPU ranges registered for sends", MAX_TX);
    if (rc != CUDA_SUCCESS) sys_close(fd);
    return rc == CUDA_SUCCESS ? CUDA_ERROR_OUT_OF_MEMORY : rc;
  }
  if (rc != CUDA_SUCCESS) {
    static int said;
    if (!said++) note("the driver has no dma-buf support (CUDA error %d): placeholder descriptors stand for GPU ranges", rc);
    *(int *)handle = fd;
  }
  note("dma-buf fd %d: GPU range 0x%llx, %zu bytes", fd, (unsigned long long)dptr, size);
  return CUDA_SUCCESS;
}

/* Where the bytes of descriptor fd at [off, off + len) are (lock held): the
 * host address, and for a real GPU range the device address to read them
 * from first (*dptr, in *ctx; else 0). NULL when fd stands for no memory. */
static uint8_t *tx_bytes(int fd, size_t off, size_t len, CUdeviceptr *dptr, CUcontext *ctx) {
  int free_slot = -1;
  *dptr = 0;
  for (int i = 0; i < MAX_TX; i++) {
    if ((tx[i].base || tx[i].dptr) && tx[i].fd == fd) {
      if (off > tx[i].size || len > tx[i].size - off) return NULL;
      if (tx[i].dptr && !tx[i].base) { /* the shadow: pages only where bytes are sent from */
        void *m = mmap(NULL, tx[i].size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
        if (m == MAP_FAILED) return NULL;
        tx[i].base = m;
      }
      if (tx[i].dptr) *dptr = tx[i].dptr + off, *ctx = tx[i].ctx;
      return tx[i].base + off;
    }
    if (!tx[i].base && !tx[i].dptr && free_slot < 0) free_slot = i;
  }
  struct stat st; /* the test doubles' dma-buf: mapped */
  if (free_slot < 0 || fstat(fd, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size <= 0) return NULL;
  void *m = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_SHARED, fd, 0);
  if (m == MAP_FAILED) return NULL;
  tx[free_slot] = (__typeof__(tx[0])){fd, m, (size_t)st.st_size, 0, NULL};
  return off <= (size_t)st.st_size && len <= (size_t)st.st_size - off ? (uint8_t *)m + off : NULL;
}

ssize_t sendmsg(int fd, const struct msghdr *msg, int flags) {
  REAL(sendmsg);
  struct cmsghdr *cm = msg->msg_controllen ? CMSG_FIRSTHDR((struct msghdr *)msg) : NULL;
  if (!cm || cm->cmsg_level != SOL_SOCKET || cm->cmsg_type != SCM_DEVMEM_OFFSET ||
      cm->cmsg_len < CMSG_LEN(2 * sizeof(int)))
    return real_sendmsg(fd, msg, flags);
  int v[2]; /* {dma-buf descriptor, offset}: gpudirectTCPXPostSend */
  memcpy(v, CMSG_DATA(cm), sizeof(v));
  size_t len = msg->msg_iovlen ? msg->msg_iov[0].iov_len : 0;
  CUdeviceptr dptr = 0;
  CUcontext ctx = NULL;
  pthread_mutex_lock(&lock);
  uint8_t *p = v[1] < 0 ? NULL : tx_bytes(v[0], (size_t)v[1], len, &dptr, &ctx);
  pthread_mutex_unlock(&lock);
  if (!p) {
    note("sendmsg: offset %d + %zu bytes not in dma-buf fd %d", v[1], len, v[0]);
    errno = EFAULT;
    return -1;
  }
  /* A real GPU range: its bytes into the shadow first. Sends of the same
   * bytes at once copy the same values; the range is not closed while a
   * send from it is under way. */
  if (dptr && cu_copy(ctx, 0, &(struct cu_run){dptr, p, len}, 1) != 0) {
    errno = EIO;
    return -1;
  }
  ssize_t n = send(fd, p, len, flags);
  trace("sendmsg fd %d: %zu bytes from dma-buf fd %d + %d: %zd", fd, len, v[0], v[1], n);
  return n;
}

int setsockopt(int fd, int level, int name, const void *val, socklen_t len) {
  REAL(setsockopt);
  if (level != SOL_SOCKET || name != SO_DEVMEM_DONTNEED) return real_setsockopt(fd, level, name, val, len);
  pthread_mutex_lock(&lock);
  int k = fd >= 0 && fd < MAX_SOCK_FD ? sock_buf[fd] : 0;
  pthread_mutex_unlock(&lock);
  long rc = -EINVAL;
  if (k) {
    pthread_mutex_lock(&bufs[k - 1].lock);
    rc = devmem_pages_dontneed(&bufs[k - 1].pages, fd, val, len / sizeof(struct devmemtoken));
    pthread_mutex_unlock(&bufs[k - 1].lock);
  }
  trace("SO_DEVMEM_DONTNEED fd %d: %zu tokens: %ld", fd, (size_t)(len / sizeof(struct devmemtoken)), rc);
  if (rc < 0) {
    note("SO_DEVMEM_DONTNEED on fd %d: a token given back twice or never handed out", fd);
    errno = EINVAL;
    return -1;
  }
  return 0; /* the plugin wants 0 (Google's kernel), not the count freed */
}

int close(int fd) {
  REAL(close);
  pthread_mutex_lock(&lock);
  int k = fd >= 0 && fd < MAX_SOCK_FD ? sock_buf[fd] : 0;
  if (k) {
    sock_buf[fd] = 0;
    pthread_mutex_lock(&bufs[k - 1].lock);
    devmem_pages_release_sock(&bufs[k - 1].pages, fd);
    pthread_mutex_unlock(&bufs[k - 1].lock);
  }
  for (int i = 0; i < MAX_TX; i++)
    if ((tx[i].base || tx[i].dptr) && tx[i].fd == fd) {
      if (tx[i].base) munmap(tx[i].base, tx[i].size);
      tx[i].base = NULL;
      tx[i].dptr = 0;
    }
  pthread_mutex_unlock(&lock);
  return real_close(fd);
}

int ioctl(int fd, unsigned long req, ...) {
  REAL(ioctl);
  va_list ap;
  va_start(ap, req);
  void *arg = va_arg(ap, void *);
  va_end(ap);
  if (req != DMA_BUF_CREATE_PAGES) return real_ioctl(fd, req, arg);
  int nfd = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (nfd < 0) return -1;
  /* The new descriptor stands for the same GPU range. */
  pthread_mutex_lock(&lock);
  for (int i = 0; i < MAX_TX; i++)
    if (tx[i].dptr && tx[i].fd == fd) {
      int j = tx_slot();
      if (j >= 0) tx[j] = (__typeof__(tx[0])){nfd, NULL, tx[i].size, tx[i].dptr, tx[i].ctx};
      break;
    }
  pthread_mutex_unlock(&lock);
  return nfd;
}

/* The contexts the import and the copies of the GPU named pci use (its
 * primary context, retained, and copy_ctx's), with their streams, made here,
 * in the plugin's own call, so that they exist when its accept returns: made
 * by the import's thread, their descriptors would appear some time after the
 * plugin set up, looking like a leak of whatever ran next. Real drivers
 * only; the import needs RxDM's answer, so it stays in that thread. */
static void early_contexts(const char *pci) {
  CUdevice dev;
  CUcontext primary, copy;
  if (driver_is_real() && cu_load()) (void)gpu_contexts(pci, &dev, &primary, &copy);
}

/* The plugin asks RxDM for a GPU's receive buffer while it sets up a receive
 * comm (its accept), before any kernel runs: the buffer is imported then, in
 * a thread of its own (RxDM answers the plugin first). Imported at the first
 * receive instead, the driver's mapping calls ran while NCCL's kernel spun
 * waiting for those very bytes. */
static void *prefetch_main(void *arg) {
  note("the plugin asked RxDM for the buffer of GPU %s: importing it now", (const char *)arg);
  pthread_mutex_lock(&fetch_lock);
  (void)buffer_of(arg);
  pthread_mutex_unlock(&fetch_lock);
  free(arg);
  return NULL;
}

int connect(int fd, const struct sockaddr *sa, socklen_t len) {
  REAL(connect);
  int rc = real_connect(fd, sa, len);
  if (in_ask || !sa || sa->sa_family != AF_UNIX || len <= offsetof(struct sockaddr_un, sun_path)) return rc;
  static const char key[] = "/get_gpu_fd_";
  char path[sizeof(((struct sockaddr_un *)0)->sun_path) + 1];
  size_t n = len - offsetof(struct sockaddr_un, sun_path);
  if (n > sizeof(path) - 1) n = sizeof(path) - 1;
  memcpy(path, ((const struct sockaddr_un *)sa)->sun_path, n);
  path[n] = '\0';
  const char *k = strstr(path, key);
  if (!k || strncmp(path, prefix(), strlen(prefix())) != 0) return rc;
  static char asked[MAX_BUFS][40];
  static int nasked;
  int fresh = 1;
  pthread_mutex_lock(&lock);
  for (int i = 0; i < nasked; i++) fresh &= strcmp(asked[i], k + sizeof(key) - 1) != 0;
  if (fresh && nasked < MAX_BUFS) snprintf(asked[nasked++], sizeof(asked[0]), "%.39s", k + sizeof(key) - 1);
  else fresh = 0;
  pthread_mutex_unlock(&lock);
  char *pci = fresh ? strdup(k + sizeof(key) - 1) : NULL;
  if (pci) early_contexts(pci);
  if (pci && spawn_detached(prefetch_main, pci) != 0) free(pci);
  return rc;
}

char *realpath(const char *path, char *resolved) {
  REAL(realpath);
  if (path && strcmp(path, "/sys/class/net/lo/device") == 0) {
    if (resolved) return strcpy(resolved, LO_PCI_PATH);
    return strdup(LO_PCI_PATH);
  }
  return real_realpath(path, resolved);
}
