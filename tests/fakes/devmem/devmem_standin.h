/* The devmem TCP stand-in's parts (libtpx-devmem-standin.so, preloaded into
 * a process running Google's GPUDirect-TCPX plugin; devmem_preload.c says
 * what it stands for). One library in six files by subject:
 *   devmem_preload.c  what it is; close() and realpath()
 *   devmem_watch.c    its log, crash stacks, and the watch on its driver calls
 *   devmem_cuda.c     the CUDA driver, for real GPU memory: contexts, streams, copies
 *   devmem_rxdm.c     asking the RxDM stand-in; connect() (a buffer fetched early)
 *   devmem_rx.c       the receive buffers; recvmsg(MSG_SOCK_DEVMEM), SO_DEVMEM_DONTNEED
 *   devmem_tx.c       sends from GPU memory: dma-bufs, sendmsg(SCM_DEVMEM_OFFSET), ioctl()
 * What the parts share is hidden (dm_*): only the interposed calls are the
 * library's symbols. */
#ifndef DEVMEM_STANDIN_H
#define DEVMEM_STANDIN_H

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

#define READ_POOL 16 /* pinned read buffers (dm_read_pool_fill) */

#define REAL(name, ...)                                                        \
  static __typeof__(name) *real_##name;                                        \
  if (!real_##name) real_##name = (__typeof__(name) *)dlsym(RTLD_NEXT, #name)

#pragma GCC visibility push(hidden)

/* devmem_watch.c. DEVMEM_STANDIN_LOG: 1 notes, 2 also a line per devmem
 * receive, send and token return. */
int dm_log_level(void);
void dm_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
#define trace(...) (dm_log_level() >= 2 ? dm_note(__VA_ARGS__) : (void)0)
uint64_t dm_mono_ns(void);
int dm_spawn_detached(void *(*fn)(void *), void *arg);
int dm_watch_begin(const char *what, size_t bytes);
void dm_watch_end(int slot);
/* [0] out of GPU memory (sends), [1] into it (receives). */
extern _Atomic uint64_t dm_copy_calls[2], dm_copy_runs[2], dm_copy_bytes[2], dm_copy_ns[2];

/* devmem_cuda.c */
struct dm_driver {
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
  /* One non-blocking stream per context for the copies (see dm_cu_copy). */
  struct { CUcontext ctx; CUstream stream; } streams[32];
  int nstreams;
  /* The copy context of each GPU (see dm_copy_ctx). */
  struct { CUdevice dev; CUcontext ctx; } copy[MAX_BUFS];
  int ncopy;
};
extern struct dm_driver dm_cu;
extern pthread_mutex_t dm_cu_lock;
struct cu_run {
  CUdeviceptr d;
  void *h;
  size_t n;
};
int dm_cu_load(void);
int dm_driver_is_real(void);
CUstream dm_cu_stream(CUcontext ctx);
int dm_cu_copy(CUcontext ctx, int to_gpu, const struct cu_run *runs, size_t nruns);
CUcontext dm_copy_ctx(CUdevice dev);
extern void *dm_read_pool[READ_POOL];
extern int dm_read_pool_n;
void dm_read_pool_fill(void);
CUresult dm_gpu_contexts(const char *pci, CUdevice *dev, CUcontext *primary, CUcontext *copy);

/* devmem_rxdm.c */
const char *dm_prefix(void);
int dm_ask(const char *name, const char *text, struct rxdm_msg *m, int *fd);

/* devmem_rx.c */
struct rxbuf {
  char pci[RXDM_STR_MAX];
  pthread_mutex_t lock;
  struct devmem_pages pages; /* base: the mapping (test doubles), or NULL (GPU) */
  CUdeviceptr dptr;          /* GPU: the buffer, in ctx */
  CUcontext ctx;
};
extern pthread_mutex_t dm_lock, dm_fetch_lock;
struct rxbuf *dm_buffer_of(const char *pci);
void dm_rx_forget(int fd);

/* devmem_tx.c */
void dm_tx_forget(int fd);

/* devmem_preload.c */
int dm_sys_close(int fd);

#pragma GCC visibility pop

#endif
