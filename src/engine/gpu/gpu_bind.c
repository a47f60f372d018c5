/* The CUDA device a transport call runs under (gpu_path.h, "Device binding").
 *
 * GPUDirect-TCPX reads the calling thread's current device (cudaGetDevice)
 * at listen, connect, accept and regMr, and binds the comm's devmem bounce
 * pages, its flow-steering rules and its dma-buf registrations to it
 * (docs/A3HIGH.md cites where). NCCL's proxy calls cudaSetDevice first; the
 * engine's threads have no device of their own (a fresh thread's current
 * device is 0), so every such call is wrapped here: the device's primary
 * context is made current (which is what cudaGetDevice reports) and the
 * caller's context is restored afterwards. */
#include "common/error.h"
#include "common/log.h"
#include "engine/gpu/gpu_mem.h"
#include "engine/gpu/gpu_path_int.h"

void (*tpx__gpu_bind_hook)(int dev);

int tpx__gpu_bind_enter(tpx_endpoint_t *ep, int dev, struct tpx__gpu_bind *b) {
  b->changed = 0;
  b->guard.prev = NULL;
  b->guard.changed = 0;
  if (dev < 0) dev = ep->gpu > 0 ? ep->gpu : 0;
  if (tpx__gpu_bind_hook) tpx__gpu_bind_hook(dev);
  b->changed = 1; /* the hook is told about the leave too */
  struct tpx__gpu_ep *g = ep->gpath;
  int n = 0;
  /* Only transports that read the device (UNPACK, or taking CUDA pointers);
   * no GPU: nothing to bind. */
  if (!g || !(g->unpack || g->cuda_ptr) || tpx__gpu_device_count(&n) != 0 || dev >= n) return 0;
  struct tpx__gpu_dev *gd = NULL;
  int rc = tpx__gpu_dev_get(g, dev, &gd); /* holds the context reference the guard needs */
  if (rc == 0) rc = tpx__gpu_guard_enter(dev, &b->guard);
  if (rc) {
    tpx__gpu_bind_leave(b);
    return tpx_err_quiet(rc, "endpoint %s: binding GPU %d for a transport call: %s", ep->name, dev,
                         tpx_last_error());
  }
  return 0;
}

void tpx__gpu_bind_leave(struct tpx__gpu_bind *b) {
  if (!b->changed) return;
  tpx__gpu_guard_leave(&b->guard);
  b->changed = 0;
  if (tpx__gpu_bind_hook) tpx__gpu_bind_hook(-1);
}
