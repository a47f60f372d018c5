/* The public memory API (include/tpx/mem.h): registration, deregistration
 * (which waits for peers' requests still using the region), descriptors. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/core.h"
#include "engine/gpu/gpu_path.h"
#include "engine/mem.h"
#include "engine/progress.h"

int tpx_mem_register(tpx_endpoint_t *ep, const tpx_mem_desc_t *d, tpx_mem_t **out) {
  if (!ep || !d || !out) return tpx_err(TPX_EINVAL, "tpx_mem_register: NULL argument");
  *out = NULL;
  if (!d->addr || d->len == 0) return tpx_err(TPX_EINVAL, "tpx_mem_register: empty region");
  if ((uintptr_t)d->addr + d->len < (uintptr_t)d->addr)
    return tpx_err(TPX_EINVAL, "tpx_mem_register: region wraps around");
  if (d->access & ~(unsigned)(TPX_ACCESS_READ | TPX_ACCESS_WRITE))
    return tpx_err(TPX_EINVAL, "tpx_mem_register: unknown access bits 0x%x", d->access);
  if (d->type != TPX_MEM_HOST && d->type != TPX_MEM_CUDA)
    return tpx_err(TPX_EINVAL, "tpx_mem_register: memory type %d", d->type);
  tpx_mem_desc_t cd = *d; /* CUDA: device -1 becomes the pointer's GPU */
  uint32_t pre = 0, post = 0;
  pthread_mutex_lock(&ep->lock);
  int rc = d->type == TPX_MEM_CUDA ? tpx__gpu_mem_check(ep, &cd, &pre, &post) : 0;
  if (rc == 0) rc = tpx__mem_add(ep, &cd, 0, out);
  if (rc == 0) {
    (*out)->reg_pre = pre;
    (*out)->reg_post = post;
  }
  pthread_mutex_unlock(&ep->lock);
  if (rc == 0)
    TPX_DEBUG("endpoint %s: registered region %llu [%p, +%zu) access %s%s", ep->name,
              (unsigned long long)(*out)->id, d->addr, d->len, d->access & TPX_ACCESS_READ ? "r" : "-",
              d->access & TPX_ACCESS_WRITE ? "w" : "-");
  return rc ? tpx_err_surface(rc) : 0; /* a GPU check's failure comes quiet */
}


#define DEREG_MARGIN_MS 500

static int no_irefs(tpx_endpoint_t *ep, void *arg) {
  (void)ep;
  return ((struct tpx_mem *)arg)->irefs == 0;
}

int tpx_mem_deregister(tpx_mem_t *m) {
  if (!m) return tpx_err(TPX_EINVAL, "tpx_mem_deregister: NULL");
  tpx_endpoint_t *ep = m->ep;
  pthread_mutex_lock(&ep->lock);
  /* A peer's write or read may still be finishing on it (the initiator can
   * see completion before our last send request is reaped), or stalled: wait
   * for those. Each request in the transport fails at its deadline, at most
   * TPX_TIMEOUT_MS after it was posted, so a stalled peer's requests (posted
   * before this call) are all gone a little after that; the margin covers
   * the progress pass that notices. A peer still sending keeps the region
   * busy: TPX_EAGAIN. */
  if (m->refs == 0 && m->irefs > 0)
    tpx__ep_wait(ep, no_irefs, m, tpx__now_ns() + tpx__ms_to_ns(ep->cfg.timeout_ms + DEREG_MARGIN_MS));
  if (m->irefs > 0) {
    int refs = m->irefs;
    pthread_mutex_unlock(&ep->lock);
    return tpx_err(TPX_EAGAIN, "tpx_mem_deregister: region %llu is still used by %d request(s) of peers",
                   (unsigned long long)m->id, refs);
  }
  if (m->refs > 0) {
    int refs = m->refs;
    pthread_mutex_unlock(&ep->lock);
    return tpx_err(TPX_EAGAIN, "tpx_mem_deregister: region %llu is used by %d transfer(s)",
                   (unsigned long long)m->id, refs);
  }
  tpx__mem_unregister(m);
  pthread_mutex_unlock(&ep->lock);
  return 0;
}


int tpx_mem_get_public_data(const tpx_mem_t *m, void *buf, size_t cap, size_t *len) {
  if (!m || !buf || !len) return tpx_err(TPX_EINVAL, "tpx_mem_get_public_data: NULL argument");
  struct tpx__md_info md = {m->ep->uuid,      m->id,    (uint64_t)(uintptr_t)m->base, m->len, m->access,
                            (uint8_t)m->type, m->device};
  return tpx_err_surface(tpx__md_encode(&md, buf, cap, len));
}

int tpx_load_remote_md(const void *blob, size_t len, tpx_rmem_t **out) {
  if (!blob || !out) return tpx_err(TPX_EINVAL, "tpx_load_remote_md: NULL argument");
  *out = NULL;
  struct tpx__md_info md;
  int rc = tpx__md_decode(blob, len, &md);
  if (rc) return tpx_err_surface(rc);
  tpx_rmem_t *r = calloc(1, sizeof(*r));
  if (!r) return tpx_err(TPX_ENOMEM, "tpx_load_remote_md: out of memory");
  r->md = md;
  *out = r;
  return 0;
}

void tpx_rmem_free(tpx_rmem_t *r) { free(r); }
uint64_t tpx_rmem_addr(const tpx_rmem_t *r) { return r ? r->md.addr : 0; }
size_t tpx_rmem_len(const tpx_rmem_t *r) { return r ? (size_t)r->md.len : 0; }
unsigned tpx_rmem_access(const tpx_rmem_t *r) { return r ? r->md.access : 0; }
