/* Registrations (mem.h): the id table peers' requests are checked against,
 * and the lazy per-comm transport registrations (split in pieces). */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/core.h"
#include "engine/gpu/gpu_mem.h"
#include "engine/mem.h"

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

struct tpx_mem *tpx__mem_lookup(tpx_endpoint_t *ep, uint64_t id) {
  if (!ep->mem_tab_cap) return NULL;
  uint32_t mask = ep->mem_tab_cap - 1;
  for (uint32_t i = hash_id(id) & mask; ep->mem_tab[i]; i = (i + 1) & mask)
    if (ep->mem_tab[i]->id == id) return ep->mem_tab[i];
  return NULL;
}

int tpx__mem_add(tpx_endpoint_t *ep, const tpx_mem_desc_t *d, int internal, struct tpx_mem **out) {
  struct tpx_mem *m = calloc(1, sizeof(*m));
  if (!m) return tpx_err(TPX_ENOMEM, "register: out of memory");
  m->ep = ep;
  /* A region's id is the capability a peer's one-sided request must name
   * (with an address range inside it): random, so it cannot be guessed from
   * another descriptor, as an rkey. */
  do
    m->id = tpx__random_u64();
  while (tpx__mem_lookup(ep, m->id) != NULL);
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

int tpx__mem_register_internal(tpx_endpoint_t *ep, void *addr, size_t len, struct tpx_mem **out) {
  tpx_mem_desc_t d = {addr, len, TPX_MEM_HOST, 0, 0};
  return tpx__mem_add(ep, &d, 1, out);
}

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

void tpx__mem_unregister(struct tpx_mem *m) {
  tpx_endpoint_t *ep = m->ep;
  mem_dereg_all(m);
  if (!m->internal) tab_remove(ep, m);
  if (m->prev) m->prev->next = m->next;
  else ep->mems = m->next;
  if (m->next) m->next->prev = m->prev;
  free(m);
}

void tpx__mem_free_all(tpx_endpoint_t *ep) {
  while (ep->mems) tpx__mem_unregister(ep->mems);
  free(ep->mem_tab);
  ep->mem_tab = NULL;
  ep->mem_tab_cap = ep->mem_tab_n = 0;
}

void tpx__mem_piece(const struct tpx_mem *m, uint32_t k, uint8_t **at, uint64_t *len) {
  uint64_t start = (uint64_t)k * PIECE_STRIDE;
  uint64_t n = m->len - start < PIECE_SPAN ? m->len - start : PIECE_SPAN;
  /* CUDA regions are registered widened to whole 4 KiB pages (gpu_mem.c):
   * the first piece from the region's widened start, every later one from
   * its own start rounded down to a page (inside the region), because the
   * TCPX plugin refuses a CUDA registration whose pointer is not 4 KiB
   * aligned (tcpxRegMr: "data not aligned"). */
  uint64_t pre = k == 0 ? m->reg_pre : 0, post = start + n == m->len ? m->reg_post : 0;
  if (k > 0 && m->type == TPX_MEM_CUDA) pre = (uintptr_t)(m->base + start) & (MEM_CUDA_PAGE - 1);
  *at = m->base + start - pre;
  *len = n + pre + post;
}

/* Slow path of tpx__mem_mhandle: register piece k with the comm in `slot`. */
static int mem_reg_piece(struct tpx_mem *m, int slot, void *comm, uint32_t k, void **mh) {
  tpx_endpoint_t *ep = m->ep;
  if (slot >= m->mh_cap) {
    int ncap = ep->nslots > slot + 1 ? ep->nslots : slot + 1;
    void ***t = realloc(m->mh, (size_t)ncap * sizeof(*t));
    if (!t) return tpx_err_quiet(TPX_ENOMEM, "registration cache: out of memory");
    for (int i = m->mh_cap; i < ncap; i++) t[i] = NULL;
    m->mh = t;
    m->mh_cap = ncap;
  }
  if (!m->mh[slot]) {
    m->mh[slot] = calloc(m->npieces, sizeof(void *));
    if (!m->mh[slot]) return tpx_err_quiet(TPX_ENOMEM, "registration cache: out of memory");
  }
  int type = m->type == TPX_MEM_CUDA ? TPX_PTR_CUDA : TPX_PTR_HOST;
  uint8_t *at;
  uint64_t len;
  tpx__mem_piece(m, k, &at, &len);
  void *h = NULL;
  int rc = tpx__gpu_mem_before_reg(ep, m);
  if (rc) return rc;
  struct tpx__gpu_bind b; /* the plugin reads the current GPU for CUDA registrations */
  rc = tpx__gpu_bind_enter(ep, m->type == TPX_MEM_CUDA ? m->device : -1, &b);
  if (rc == 0) rc = ep->net->ops->reg_mr(ep->net, comm, at, len, type, &h);
  tpx__gpu_bind_leave(&b);
  if (rc) return tpx_err_quiet(rc, "regMr of region %llu piece %u (%llu bytes) failed",
                         (unsigned long long)m->id, k, (unsigned long long)len);
  if ((rc = tpx__gpu_mem_after_reg(m, comm, h)) != 0) {
    ep->net->ops->dereg_mr(ep->net, comm, h);
    return rc;
  }
  m->mh[slot][k] = h;
  *mh = h;
  return 0;
}

int tpx__mem_mhandle(struct tpx_mem *m, int slot, void *comm, uint64_t off, void **mh) {
  uint32_t k = (uint32_t)(off / PIECE_STRIDE);
  if (slot < m->mh_cap && m->mh[slot] && m->mh[slot][k]) {
    *mh = m->mh[slot][k];
    return 0;
  }
  return mem_reg_piece(m, slot, comm, k, mh);
}

/* A comm is going away: deregister everything registered with it. */
static void mem_release_slot(tpx_endpoint_t *ep, int slot) {
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


int tpx__mem_slot_alloc(tpx_endpoint_t *ep, void *comm) {
  for (int i = 0; i < ep->nslots; i++)
    if (!ep->slots[i]) {
      ep->slots[i] = comm;
      return i;
    }
  int n = ep->nslots ? ep->nslots * 2 : 32;
  void **s = realloc(ep->slots, (size_t)n * sizeof(*s));
  if (!s) return TPX_ENOMEM;
  for (int i = ep->nslots; i < n; i++) s[i] = NULL;
  ep->slots = s;
  int i = ep->nslots;
  ep->nslots = n;
  ep->slots[i] = comm;
  return i;
}

void tpx__mem_slot_release(tpx_endpoint_t *ep, int slot) {
  if (slot < 0 || slot >= ep->nslots || !ep->slots[slot]) return;
  mem_release_slot(ep, slot); /* deregister before the comm closes */
  ep->slots[slot] = NULL;
}
