/* A test double of the CUDA driver (libcuda.so.1) for running Google's
 * GPUDirect-TCPX plugin, and our code, on machines without a GPU. Written
 * from the toolkit's cuda.h: "device" memory is host memory (memfd-backed, so
 * it can be shared as a file descriptor the way the driver shares it), a
 * device is a number with a PCI id. Never installed, never shipped: tests put
 * its directory on LD_LIBRARY_PATH. docs/A3HIGH.md, "The real plugin on this
 * machine".
 *
 * Environment (read once, at cuInit):
 *   FAKE_CUDA_DEVICES  number of devices, 0..16 (default 1)
 *   FAKE_CUDA_LOG      1: one line on stderr per failed call, naming why */
#ifndef FAKE_CUDA_H
#define FAKE_CUDA_H

#include <cuda.h>
#include <stddef.h>

#define FAKE_CUDA_MAX_DEVICES 16
/* The VMM granularity A3-high's H100s report (RxDM aligns its buffer to it). */
#define FAKE_CUDA_GRANULARITY (2u << 20)

struct CUctx_st {
  int dev;
  int primary;
  int refs; /* primary: retain count */
};

/* init.c */
int fake_cuda_ndev(void);        /* -1 before cuInit */
CUresult fake_cuda_fail(CUresult rc, const char *fn, const char *why);
#define FAKE_FAIL(rc, why) fake_cuda_fail((rc), __func__, (why))
#define FAKE_NEED_INIT()                                                      \
  do {                                                                        \
    if (fake_cuda_ndev() < 0) return FAKE_FAIL(CUDA_ERROR_NOT_INITIALIZED, "cuInit not called"); \
  } while (0)

/* context.c: the calling thread's current context, or NULL. */
CUcontext fake_cuda_current(void);
/* Tests: outstanding retains of a device's primary context. */
int fake_cuda_primary_refs(int dev);

/* memory.c: every allocation made through this driver, for lookups by address. */
struct fake_alloc {
  char *base;
  size_t size;
  int fd;   /* memfd behind it; -1 for plain host memory */
  int host; /* cuMemHostAlloc */
  int dev;  /* the current context's device when it was made */
  struct fake_alloc *next;
};
/* The allocation holding [p, p+len), or NULL. */
struct fake_alloc *fake_cuda_find(const void *p, size_t len);
/* A shared mapping of a new memfd of `size` bytes; NULL and errno on failure. */
void *fake_cuda_memfd_map(size_t size, int *fd);
/* Tests: how many allocations are live (cuMemAlloc, cuMemHostAlloc). */
int fake_cuda_live_allocs(void);

#endif
