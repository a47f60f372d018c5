/* The per-GPU receive buffer RxDM hands to the plugin: a CUDA allocation
 * (cuMemCreate) exported as a POSIX file descriptor, with its size and
 * alignment, as RxDM's cuda/cu_dmabuf_gpu_page_allocator.cu makes it. Made
 * through whatever libcuda.so.1 the loader finds (dlopen): the real driver on
 * a GPU machine, tests/fakes/cuda elsewhere. */
#ifndef RXDM_GPUMEM_H
#define RXDM_GPUMEM_H

#include <stddef.h>

#define RXDM_MAX_GPUS 16

struct rxdm_gpu {
  char pci[32]; /* lower case, as the plugin asks for it */
  int fd;       /* the exported allocation */
  size_t size, align;
};

/* Fills gpus[0..*n) for up to max GPUs (all the driver has when max is 0),
 * each with a buffer of at least pool_bytes. 0, or -1 with a message in err. */
int rxdm_gpumem_open(struct rxdm_gpu *gpus, int *n, int max, size_t pool_bytes, char *err, size_t errlen);
void rxdm_gpumem_close(struct rxdm_gpu *gpus, int n);

#endif
