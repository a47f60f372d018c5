/* The GPU path's ground (gpu_path.h has the design): binding a thread to
 * a GPU around transport calls (gpu_bind.c) and the checks of a CUDA
 * registration (gpu_mem.c), which registrations (mem.c) call below the
 * rest of the path. */
#ifndef TPX_ENGINE_GPU_MEM_H
#define TPX_ENGINE_GPU_MEM_H

#include <stdint.h>

#include "cuda/gpu.h"
#include "tpx/endpoint.h"
#include "tpx/mem.h"

struct tpx_mem;

/* What the GPU path does with a chunk about to be posted (gpu_path.h's
 * tpx__gpu_post_prep, and staging.c's preparations under it): post its
 * memory as it is, post the staging slot set, or wait (back-pressure). */
enum { GPU_POST_DEFAULT = 0, GPU_POST_STAGED = 1, GPU_POST_WAIT = 2 };

/* Device binding (gpu_bind.c). Around every transport listen, connect,
 * accept and regMr: make `dev` the calling thread's current CUDA device (dev
 * < 0: the endpoint's GPU) and restore the caller's context after, as NCCL
 * does with cudaSetDevice before calling a plugin. A no-op without a usable
 * GPU, except for the test hook, which sees every enter (the device) and
 * leave (-1). */
struct tpx__gpu_bind {
  tpx_gpu_guard_t guard;
  int changed;
};
extern void (*tpx__gpu_bind_hook)(int dev);
int tpx__gpu_bind_enter(tpx_endpoint_t *ep, int dev, struct tpx__gpu_bind *b);
void tpx__gpu_bind_leave(struct tpx__gpu_bind *b);

/* tpx_mem_register of TPX_MEM_CUDA, lock held: checks the pointer (device
 * memory of the named GPU, or device -1: the pointer's own GPU), sets up that
 * GPU's resources, and computes how far the transport registration must
 * extend before / after the region to be 4 KiB aligned inside the allocation
 * (only needed where the transport registers CUDA memory; refused with a
 * clear error when the allocation does not allow it). d->device is updated. */
int tpx__gpu_mem_check(tpx_endpoint_t *ep, tpx_mem_desc_t *d, uint32_t *reg_pre, uint32_t *reg_post);
/* After a regMr of a CUDA region on an UNPACK transport: getDeviceMr, as
 * NCCL does. */
int tpx__gpu_mem_after_reg(struct tpx_mem *m, void *comm, void *mhandle);
/* Before a CUDA registration with the transport: 0, or TPX_ENOTSUP where the
 * transport would crash on it (GPUDirect-TCPX on a device without a PCI
 * path: tpx__net_cuda_reg_needs_pci). */
int tpx__gpu_mem_before_reg(tpx_endpoint_t *ep, const struct tpx_mem *m);

#endif
