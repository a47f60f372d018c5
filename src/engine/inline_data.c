/* Inline data (inline_data.h). */
#include <string.h>

#include "cuda/gpu.h"
#include "engine/core.h"
#include "engine/inline_data.h"
#include "tpx/error.h"

int tpx__inline_iov(const struct tpx__xent *e, uint32_t n, struct iovec *iov) {
  int k = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (!e[i].len) continue;
    if (k == INLINE_MAX_IOV || e[i].mem->type != TPX_MEM_HOST) return TPX_ENOTSUP;
    iov[k].iov_base = e[i].mem->base + e[i].off;
    iov[k].iov_len = (size_t)e[i].len;
    k++;
  }
  return k;
}

int tpx__inline_ok(tpx_endpoint_t *ep, const struct tpx__xent *e, uint32_t n, uint64_t total, struct iovec *iov) {
  if (total > ep->cfg.inline_bytes || total > WIRE_MAX_INLINE) return TPX_ENOTSUP;
  return tpx__inline_iov(e, n, iov);
}

int tpx__inline_scatter(const struct tpx__xent *e, uint32_t n, const uint8_t *data) {
  for (uint32_t i = 0; i < n; i++) {
    if (!e[i].len) continue;
    uint8_t *dst = e[i].mem->base + e[i].off;
    /* A write's initiator inlines from its own host memory, not knowing that
     * the target's region is GPU memory, which the CPU cannot store to. */
    if (e[i].mem->type == TPX_MEM_CUDA) {
      int rc = tpx__gpu_memcpy(e[i].mem->device, dst, data, (size_t)e[i].len);
      if (rc) return rc;
    } else {
      memcpy(dst, data, (size_t)e[i].len);
    }
    data += e[i].len;
  }
  return 0;
}
