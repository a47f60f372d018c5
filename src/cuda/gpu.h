/* Thin internal layer over CUDA for the engine and the unpack module.
 *
 * Contexts: every object that touches a GPU holds a reference on that device
 * (tpx__gpu_retain / tpx__gpu_release). The first reference retains the
 * device's primary context in the driver, the last releases it, so the
 * driver-level retains are balanced by construction; tpx__gpu_ctx_refs and
 * tpx__gpu_ctx_retained expose the counts for tests. Operations enter the
 * owning device's context for their duration and restore whatever context the
 * calling thread had before (tpx_gpu_guard_*), so user threads are left as
 * they were; a progress thread can instead pin a device once with
 * tpx__gpu_set_device.
 *
 * The driver API is reached through the runtime's entry-point query rather
 * than by linking libcuda, so a CUDA build still loads and runs (host memory
 * only) on a machine with the toolkit but no driver, such as CI.
 *
 * Without TPX_HAVE_CUDA every function returns TPX_ENOTSUP (queries answer
 * "host memory"), so callers compile one way and take the host path at run
 * time.
 *
 * Streams and events are opaque here so that callers need no CUDA headers;
 * tpx__gpu_stream_handle / tpx__gpu_event_handle give the cudaStream_t /
 * cudaEvent_t for code that does use the runtime directly.
 */
#ifndef TPX_CUDA_GPU_H
#define TPX_CUDA_GPU_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define TPX_GPU_MAX_DEVICES 64
/* "No GPU": a device index the calls below return when there is none. */
#define TPX_GPU_NONE (-1)

/* ---- availability ---- */

/* 1 if this build has CUDA support at all (compile-time fact). */
bool tpx__gpu_built(void);

/* Number of usable GPUs. Returns 0 and *n = 0 on a CUDA build without a
 * driver or device (not an error: a GPU-less host); TPX_ENOTSUP without CUDA
 * support (and *n = 0). */
int tpx__gpu_device_count(int *n);

/* PCI bus id of the GPU ("0000:04:00.0"), for NIC affinity. */
int tpx__gpu_pci_bus_id(int dev, char *buf, size_t len);

/* ---- primary contexts ---- */

/* Take / drop a reference on dev's primary context. The first reference
 * retains it in the driver, the last releases it. Balanced calls required;
 * tpx__gpu_release of an unreferenced device is TPX_EUSAGE. */
int tpx__gpu_retain(int dev);
int tpx__gpu_release(int dev);

/* Our reference count on dev (0 when not retained). */
int tpx__gpu_ctx_refs(int dev);
/* Number of devices whose primary context we hold in the driver right now;
 * 0 once every object has been torn down. */
int tpx__gpu_ctx_retained(void);

/* Make dev's primary context current on the calling thread and leave it so
 * (for progress threads). dev must be retained. */
int tpx__gpu_set_device(int dev);

/* The calling thread's current device as the CUDA runtime reports it
 * (cudaGetDevice: 0 on a thread that never chose one; the device of the
 * current primary context otherwise). This is what GPUDirect-TCPX reads at
 * listen, connect, accept and regMr. -1 without CUDA or a driver. */
int tpx__gpu_current_device(void);

/* Scoped switch: enter makes dev's context current, leave restores the
 * previous one. dev must be retained. */
typedef struct tpx_gpu_guard {
  void *prev;
  int changed;
} tpx_gpu_guard_t;
int tpx__gpu_guard_enter(int dev, tpx_gpu_guard_t *g);
void tpx__gpu_guard_leave(tpx_gpu_guard_t *g);

/* ---- pointers ---- */

enum tpx_gpu_mem {
  TPX_GPU_MEM_HOST = 0,   /* ordinary host memory, unknown to CUDA */
  TPX_GPU_MEM_PINNED = 1, /* page-locked host memory (cudaHostAlloc / registered) */
  TPX_GPU_MEM_DEVICE = 2, /* GPU memory (cudaMalloc, VMM) */
  TPX_GPU_MEM_MANAGED = 3 /* unified (managed) memory */
};

typedef struct tpx_gpu_ptr_info {
  int mem;      /* enum tpx_gpu_mem */
  int dev;      /* owning GPU for DEVICE/MANAGED (-1 otherwise or unknown) */
  void *base;   /* start of the allocation holding the pointer (NULL for HOST) */
  size_t size;  /* size of that allocation (0 for HOST) */
} tpx_gpu_ptr_info_t;

/* Classify p. Never fails for ordinary host pointers: they come back as
 * TPX_GPU_MEM_HOST. Without CUDA (or without a driver) everything is HOST
 * and the call returns TPX_ENOTSUP / 0 respectively. */
int tpx__gpu_ptr_query(const void *p, tpx_gpu_ptr_info_t *info);

/* True if p is GPU memory (device or managed); *dev (may be NULL) gets its
 * GPU. False for host memory and in builds without CUDA. */
bool tpx__gpu_is_device_ptr(const void *p, int *dev);

/* ---- memory ---- */

int tpx__gpu_malloc(int dev, size_t bytes, void **p);
int tpx__gpu_free(int dev, void *p); /* NULL ok */

/* Pinned host memory, mapped into every GPU's address space and pinned for
 * every context (cudaHostAllocMapped | cudaHostAllocPortable). */
int tpx__gpu_host_alloc(int dev, size_t bytes, void **host);
int tpx__gpu_host_free(int dev, void *host); /* NULL ok */
/* Pin an existing host range (mapped, portable) / undo it. */
int tpx__gpu_host_register(int dev, void *host, size_t bytes);
int tpx__gpu_host_unregister(int dev, void *host);
/* The address dev's kernels use for pinned host memory `host`. */
int tpx__gpu_host_dev_ptr(int dev, void *host, void **dptr);

/* ---- streams ---- */

typedef struct tpx_gpu_stream tpx_gpu_stream_t;

/* A non-blocking stream on dev, created once and kept (holds a device ref). */
int tpx__gpu_stream_create(int dev, tpx_gpu_stream_t **s);
void tpx__gpu_stream_destroy(tpx_gpu_stream_t *s); /* NULL ok; waits for its work */
int tpx__gpu_stream_sync(tpx_gpu_stream_t *s);
int tpx__gpu_stream_dev(const tpx_gpu_stream_t *s);
void *tpx__gpu_stream_handle(const tpx_gpu_stream_t *s); /* cudaStream_t */

/* Asynchronous copy on s (any direction; UVA addresses). */
int tpx__gpu_memcpy_async(tpx_gpu_stream_t *s, void *dst, const void *src, size_t bytes);
/* Synchronous copy in dev's context (tests, setup). */
int tpx__gpu_memcpy(int dev, void *dst, const void *src, size_t bytes);
int tpx__gpu_memset(int dev, void *dst, int value, size_t bytes);

/* ---- pooled events ----
 * Events are created on demand, kept in a free list and reused, so a chunk
 * costs no cudaEventCreate/Destroy. Timing is disabled (cheaper record and
 * query). The pool is thread-safe. */

typedef struct tpx_gpu_evpool tpx_gpu_evpool_t;
typedef struct tpx_gpu_event tpx_gpu_event_t;

/* prealloc events are created up front (0 ok). */
int tpx__gpu_evpool_create(int dev, int prealloc, tpx_gpu_evpool_t **pool);
/* Destroys the pool's events; events still taken are reported and leaked. */
void tpx__gpu_evpool_destroy(tpx_gpu_evpool_t *pool); /* NULL ok */
int tpx__gpu_event_get(tpx_gpu_evpool_t *pool, tpx_gpu_event_t **ev);
void tpx__gpu_event_put(tpx_gpu_evpool_t *pool, tpx_gpu_event_t *ev); /* NULL ok */
/* Counters: events ever created by the pool, and currently taken. */
int tpx__gpu_evpool_created(const tpx_gpu_evpool_t *pool);
int tpx__gpu_evpool_taken(const tpx_gpu_evpool_t *pool);

int tpx__gpu_event_record(tpx_gpu_event_t *ev, tpx_gpu_stream_t *s);
/* 1: the work before the record finished; 0: not yet; < 0: error (a fault
 * in that work shows up here as TPX_ECUDA). Never blocks. */
int tpx__gpu_event_query(tpx_gpu_event_t *ev);
int tpx__gpu_event_sync(tpx_gpu_event_t *ev);
void *tpx__gpu_event_handle(const tpx_gpu_event_t *ev); /* cudaEvent_t */

#ifdef __cplusplus
}
#endif
#endif
