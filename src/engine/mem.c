/* Registrations: public descriptors, the id table peers' requests are checked
 * against, and the lazy per-comm transport registrations (split in pieces). */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/engine.h"

static uint32_t hash_id(uint64_t id) {
  id ^= id >> 33;
  id *= 0xff51afd7ed558ccdull;
  id ^= id >> 33;
  return (uint32_t)id;
}

static int tab_insert(tpx_endpoint_t *ep, struct tpx_mem *m);

static int tab_grow(tpx_endpoint_t *ep) {
  uint32_t ncap = ep->mem_tab_cap ? ep->mem_tab_cap * 2 : 64;
  struct tpx_mem **old = ep->mem_tab;
  uint32_t ocap = ep->mem_tab_cap;
  struct tpx_mem **t = calloc(ncap, sizeof(*t));
  if (!t) return TPX_ENOMEM;
  ep->mem_tab = t;
  ep->mem_tab_cap = ncap;
  ep->mem_tab_n = 0;
  for (uint32_t i = 0; i < ocap; i++)
    if (old[i]) tab_insert(ep, old[i]);
  free(old);
  return 0;
}

static int tab_insert(tpx_endpoint_t *ep, struct tpx_mem *m) {
  if ((ep->mem_tab_n + 1) * 2 > ep->mem_tab_cap) {
    int rc = tab_grow(ep);
    if (rc) return rc;
  }
  uint32_t mask = ep->mem_tab_cap - 1;
  for (uint32_t i = hash_id(m->id) & mask;; i = (i + 1) & mask) {
    if (!ep->mem_tab[i]) {
      ep->mem_tab[i] = m;
      ep->mem_tab_n++;
      return 0;
    }
  }
}

static void tab_remove(tpx_endpoint_t *ep, struct tpx_mem *m) {
  if (!ep->mem_tab_cap) return;
  uint32_t mask = ep->mem_tab_cap - 1;
  uint32_t i = hash_id(m->id) & mask;
  while (ep->mem_tab[i] && ep->mem_tab[i] != m) i = (i + 1) & mask;
  if (!ep->mem_tab[i]) return;
  ep->mem_tab[i] = NULL;
  ep->mem_tab_n--;
  /* Re-insert the rest of the probe run so lookups still find them. */
  for (uint32_t j = (i + 1) & mask; ep->mem_tab[j]; j = (j + 1) & mask) {
    struct tpx_mem *x = ep->mem_tab[j];
    ep->mem_tab[j] = NULL;
    ep->mem_tab_n--;
    tab_insert(ep, x);
  }
}

struct tpx_mem *mem_lookup(tpx_endpoint_t *ep, uint64_t id) {
  if (!ep->mem_tab_cap) return NULL;
  uint32_t mask = ep->mem_tab_cap - 1;
  for (uint32_t i = hash_id(id) & mask; ep->mem_tab[i]; i = (i + 1) & mask)
    if (ep->mem_tab[i]->id == id) return ep->mem_tab[i];
  return NULL;
}

static int mem_add(tpx_endpoint_t *ep, const tpx_mem_desc_t *d, int internal, struct tpx_mem **out) {
  struct tpx_mem *m = calloc(1, sizeof(*m));
  if (!m) return tpx_err(TPX_ENOMEM, "register: out of memory");
  m->ep = ep;
  /* A region's id is the capability a peer's one-sided request must name
   * (with an address range inside it): random, so it cannot be guessed from
   * another descriptor, as an rkey. */
  do
    m->id = tpx_random_u64();
  while (mem_lookup(ep, m->id) != NULL);
  m->base = d->addr;
  m->len = d->len;
  m->type = d->type;
  m->device = d->device;
  m->access = internal ? 0 : d->access;
  m->internal = internal;
  m->npieces = (uint32_t)((d->len + PIECE_STRIDE - 1) / PIECE_STRIDE);
  if (!internal) {
    int rc = tab_insert(ep, m);
    if (rc) {
      free(m);
      return tpx_err(rc, "register: out of memory");
    }
  }
  m->next = ep->mems;
  if (ep->mems) ep->mems->prev = m;
  ep->mems = m;
  *out = m;
  return 0;
}

int mem_register_internal(tpx_endpoint_t *ep, void *addr, size_t len, struct tpx_mem **out) {
  tpx_mem_desc_t d = {addr, len, TPX_MEM_HOST, 0, 0};
  return mem_add(ep, &d, 1, out);
}

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
  int rc = d->type == TPX_MEM_CUDA ? gpu_mem_check(ep, &cd, &pre, &post) : 0;
  if (rc == 0) rc = mem_add(ep, &cd, 0, out);
  if (rc == 0) {
    (*out)->reg_pre = pre;
    (*out)->reg_post = post;
  }
  pthread_mutex_unlock(&ep->lock);
  if (rc == 0)
    TPX_DEBUG("endpoint %s: registered region %llu [%p, +%zu) access %s%s", ep->name,
              (unsigned long long)(*out)->id, d->addr, d->len, d->access & TPX_ACCESS_READ ? "r" : "-",
              d->access & TPX_ACCESS_WRITE ? "w" : "-");
  return rc;
}

/* Drop every transport registration of m. Lock held. */
static void mem_dereg_all(struct tpx_mem *m) {
  tpx_endpoint_t *ep = m->ep;
  for (int s = 0; s < m->mh_cap; s++) {
    if (!m->mh[s]) continue;
    for (uint32_t k = 0; k < m->npieces; k++) {
      if (m->mh[s][k] && s < ep->nslots && ep->slots[s]) {
        int rc = ep->net->ops->dereg_mr(ep->net, ep->slots[s], m->mh[s][k]);
        if (rc) TPX_WARN("endpoint %s: deregMr of region %llu piece %u failed: %s", ep->name,
                         (unsigned long long)m->id, k, tpx_strerror(rc));
      }
    }
    free(m->mh[s]);
    m->mh[s] = NULL;
  }
  free(m->mh);
  m->mh = NULL;
  m->mh_cap = 0;
}

void mem_unregister(struct tpx_mem *m) {
  tpx_endpoint_t *ep = m->ep;
  mem_dereg_all(m);
  if (!m->internal) tab_remove(ep, m);
  if (m->prev) m->prev->next = m->next;
  else ep->mems = m->next;
  if (m->next) m->next->prev = m->prev;
  free(m);
}

static int no_irefs(tpx_endpoint_t *ep, void *arg) {
  (void)ep;
  return ((struct tpx_mem *)arg)->irefs == 0;
}

int tpx_mem_deregister(tpx_mem_t *m) {
  if (!m) return tpx_err(TPX_EINVAL, "tpx_mem_deregister: NULL");
  tpx_endpoint_t *ep = m->ep;
  pthread_mutex_lock(&ep->lock);
  /* A peer's write or read may still be finishing on it (the initiator can
   * see completion before our last send request is reaped): wait for those. */
  if (m->refs == 0 && m->irefs > 0)
    ep_wait_until(ep, no_irefs, m, tpx_now_ns() + ms_to_ns(ep->cfg.timeout_ms));
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
  mem_unregister(m);
  pthread_mutex_unlock(&ep->lock);
  return 0;
}

void mem_free_all(tpx_endpoint_t *ep) {
  while (ep->mems) mem_unregister(ep->mems);
  free(ep->mem_tab);
  ep->mem_tab = NULL;
  ep->mem_tab_cap = ep->mem_tab_n = 0;
}

/* Slow path of mem_mhandle: register piece k with the comm in `slot`. */
static int mem_reg_piece(struct tpx_mem *m, int slot, void *comm, uint32_t k, void **mh) {
  tpx_endpoint_t *ep = m->ep;
  if (slot >= m->mh_cap) {
    int ncap = ep->nslots > slot + 1 ? ep->nslots : slot + 1;
    void ***t = realloc(m->mh, (size_t)ncap * sizeof(*t));
    if (!t) return tpx_err(TPX_ENOMEM, "registration cache: out of memory");
    for (int i = m->mh_cap; i < ncap; i++) t[i] = NULL;
    m->mh = t;
    m->mh_cap = ncap;
  }
  if (!m->mh[slot]) {
    m->mh[slot] = calloc(m->npieces, sizeof(void *));
    if (!m->mh[slot]) return tpx_err(TPX_ENOMEM, "registration cache: out of memory");
  }
  uint64_t start = (uint64_t)k * PIECE_STRIDE;
  uint64_t len = m->len - start < PIECE_SPAN ? m->len - start : PIECE_SPAN;
  int type = m->type == TPX_MEM_CUDA ? TPX_PTR_CUDA : TPX_PTR_HOST;
  /* CUDA regions are registered widened to whole 4 KiB pages (gpu_mem.c). */
  uint64_t pre = k == 0 ? m->reg_pre : 0, post = start + len == m->len ? m->reg_post : 0;
  void *h = NULL;
  int rc = ep->net->ops->reg_mr(ep->net, comm, m->base + start - pre, len + pre + post, type, &h);
  if (rc) return tpx_err(rc, "regMr of region %llu piece %u (%llu bytes) failed",
                         (unsigned long long)m->id, k, (unsigned long long)len);
  if ((rc = gpu_mem_after_reg(m, comm, h)) != 0) {
    ep->net->ops->dereg_mr(ep->net, comm, h);
    return rc;
  }
  m->mh[slot][k] = h;
  *mh = h;
  return 0;
}

int mem_mhandle(struct tpx_mem *m, int slot, void *comm, uint64_t off, void **mh) {
  uint32_t k = (uint32_t)(off / PIECE_STRIDE);
  if (slot < m->mh_cap && m->mh[slot] && m->mh[slot][k]) {
    *mh = m->mh[slot][k];
    return 0;
  }
  return mem_reg_piece(m, slot, comm, k, mh);
}

/* A comm is going away: deregister everything registered with it. */
void mem_release_slot(tpx_endpoint_t *ep, int slot) {
  for (struct tpx_mem *m = ep->mems; m; m = m->next) {
    if (slot >= m->mh_cap || !m->mh[slot]) continue;
    for (uint32_t k = 0; k < m->npieces; k++) {
      if (!m->mh[slot][k]) continue;
      int rc = ep->net->ops->dereg_mr(ep->net, ep->slots[slot], m->mh[slot][k]);
      if (rc) TPX_WARN("endpoint %s: deregMr of region %llu failed: %s", ep->name,
                       (unsigned long long)m->id, tpx_strerror(rc));
    }
    free(m->mh[slot]);
    m->mh[slot] = NULL;
  }
}

void *tpx_mem_addr(const tpx_mem_t *m) { return m ? m->base : NULL; }
size_t tpx_mem_len(const tpx_mem_t *m) { return m ? m->len : 0; }

int tpx_mem_get_public_data(const tpx_mem_t *m, void *buf, size_t cap, size_t *len) {
  if (!m || !buf || !len) return tpx_err(TPX_EINVAL, "tpx_mem_get_public_data: NULL argument");
  struct md_info md = {m->ep->uuid, m->id, (uint64_t)(uintptr_t)m->base, m->len, m->access,
                       (uint8_t)m->type, m->device};
  return md_encode(&md, buf, cap, len);
}

int tpx_load_remote_md(const void *blob, size_t len, tpx_rmem_t **out) {
  if (!blob || !out) return tpx_err(TPX_EINVAL, "tpx_load_remote_md: NULL argument");
  *out = NULL;
  struct md_info md;
  int rc = md_decode(blob, len, &md);
  if (rc) return rc;
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
