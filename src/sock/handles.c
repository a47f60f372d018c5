/* The per-net handle table. Objects handed to the caller are tokens (index +
 * generation) instead of pointers, so a stale, foreign or wrong-kind handle is
 * detected by a bounds and generation check rather than dereferenced. Lookup
 * is lock-free (pages are never freed before the net is); add/del take a mutex
 * and are off the data path. Also a net's fresh ids (tpx__sock_random), the
 * check of a buffer against its registration (tpx__sock_mr_check), and the
 * check of the net itself (tpx__sock_net_of), the floor every entry point
 * starts on. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "sock/sock.h"

void tpx__sock_reg_init(tpx_sock_reg_t *r, uint32_t salt) {
  memset(r, 0, sizeof(*r));
  /* Generations start at a per-net value: handles are not small integers,
   * and a handle of another net rarely passes the check. */
  r->salt = salt & 0xffffu;
  pthread_mutex_init(&r->mu, NULL);
}

void tpx__sock_reg_fini(tpx_sock_reg_t *r) {
  for (size_t i = 0; i < sizeof(r->pages) / sizeof(r->pages[0]); i++)
    free(atomic_load(&r->pages[i]));
  pthread_mutex_destroy(&r->mu);
}

static struct tpx_sock_reg_entry *entry(tpx_sock_reg_t *r, uint32_t idx) {
  struct tpx_sock_reg_entry *page =
      atomic_load_explicit(&r->pages[idx / TPX_SOCK_REG_PAGE], memory_order_acquire);
  return page ? &page[idx % TPX_SOCK_REG_PAGE] : NULL;
}

uint64_t tpx__sock_reg_add(tpx_sock_reg_t *r, int kind, void *obj) {
  pthread_mutex_lock(&r->mu);
  uint32_t idx;
  if (r->free_head != 0) {
    idx = r->free_head - 1;
    r->free_head = entry(r, idx)->next_free;
  } else {
    idx = atomic_load(&r->hiwater);
    if (idx >= TPX_SOCK_MAX_OBJECTS) {
      pthread_mutex_unlock(&r->mu);
      return 0;
    }
    if (idx % TPX_SOCK_REG_PAGE == 0 && entry(r, idx) == NULL) {
      struct tpx_sock_reg_entry *page = calloc(TPX_SOCK_REG_PAGE, sizeof(*page));
      if (page == NULL) {
        pthread_mutex_unlock(&r->mu);
        return 0;
      }
      atomic_store_explicit(&r->pages[idx / TPX_SOCK_REG_PAGE], page, memory_order_release);
    }
    atomic_store(&entry(r, idx)->gen, r->salt);
    atomic_store(&r->hiwater, idx + 1);
  }
  struct tpx_sock_reg_entry *e = entry(r, idx);
  e->next_free = 0;
  atomic_store(&e->kind, kind);
  atomic_store_explicit(&e->obj, obj, memory_order_release);
  r->live++;
  uint64_t gen = atomic_load(&e->gen) & 0xffffu;
  pthread_mutex_unlock(&r->mu);
  return (gen << 32) | ((uint64_t)idx + 1);
}

void *tpx__sock_reg_get(tpx_sock_reg_t *r, uint64_t token, int kind, int *kind_out) {
  if (token == 0 || (token >> 48) != 0) return NULL;
  uint64_t idx1 = token & 0xffffffffu;
  if (idx1 == 0 || idx1 > atomic_load_explicit(&r->hiwater, memory_order_acquire)) return NULL;
  struct tpx_sock_reg_entry *e = entry(r, (uint32_t)(idx1 - 1));
  if (e == NULL) return NULL;
  void *obj = atomic_load_explicit(&e->obj, memory_order_acquire);
  if (obj == NULL) return NULL;
  if ((atomic_load(&e->gen) & 0xffffu) != ((token >> 32) & 0xffffu)) return NULL;
  int k = atomic_load(&e->kind);
  if (kind != TPX_SK_NONE && k != kind) {
    if (kind_out) *kind_out = k;
    return NULL;
  }
  if (kind_out) *kind_out = k;
  return obj;
}

void tpx__sock_reg_del(tpx_sock_reg_t *r, uint64_t token) {
  pthread_mutex_lock(&r->mu);
  uint64_t idx1 = token & 0xffffffffu;
  if (idx1 != 0 && idx1 <= atomic_load(&r->hiwater) && (token >> 48) == 0) {
    struct tpx_sock_reg_entry *e = entry(r, (uint32_t)(idx1 - 1));
    if (e && atomic_load(&e->obj) != NULL &&
        (atomic_load(&e->gen) & 0xffffu) == ((token >> 32) & 0xffffu)) {
      atomic_store(&e->obj, NULL);
      atomic_store(&e->kind, TPX_SK_NONE);
      atomic_fetch_add(&e->gen, 1);
      e->next_free = r->free_head;
      r->free_head = (uint32_t)idx1;
      r->live--;
    }
  }
  pthread_mutex_unlock(&r->mu);
}

uint64_t tpx__sock_reg_next(tpx_sock_reg_t *r, uint32_t *it) {
  uint32_t hw = atomic_load(&r->hiwater);
  while (*it < hw) {
    uint32_t idx = (*it)++;
    struct tpx_sock_reg_entry *e = entry(r, idx);
    if (e && atomic_load(&e->obj) != NULL)
      return ((uint64_t)(atomic_load(&e->gen) & 0xffffu) << 32) | ((uint64_t)idx + 1);
  }
  return 0;
}

/* ---- ids and registrations of a net ---- */

uint64_t tpx__sock_random(tpx_sock_net_t *sn) {
  /* splitmix64 over a counter seeded from getrandom: unique, unpredictable
   * enough to tell connections apart (not a security boundary). */
  uint64_t z = atomic_fetch_add(&sn->rng, 0x9E3779B97F4A7C15ull) + 0x9E3779B97F4A7C15ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

int tpx__sock_mr_check(tpx_sock_net_t *sn, void *mh, const void *data, size_t size, const char *fn) {
  if (mh == NULL) return 0;
  tpx_sock_mr_t *mr = tpx__sock_reg_get(&sn->reg, (uint64_t)(uintptr_t)mh, TPX_SK_MR, NULL);
  if (mr == NULL) return tpx_err_quiet(TPX_EINVAL, "%s: %p is not a registered memory handle", fn, mh);
  if (size == 0) return 0;
  uintptr_t b = (uintptr_t)mr->base, p = (uintptr_t)data;
  if (p < b || p - b > mr->size || size > mr->size - (p - b))
    return tpx_err_quiet(TPX_EINVAL, "%s: buffer %p + %zu lies outside its registration %p + %zu", fn,
                   data, size, (void *)mr->base, mr->size);
  return 0;
}

/* Every ops table of ours (net.c's, the top: plain and unpack mode) has this
 * devices entry and no other transport's has: the net's identity, checked
 * here at the floor so that no file below net.c calls it. */
int tpx__sock_devices(tpx_net_t *net, int *ndev) {
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "devices");
  if (sn == NULL) return TPX_EINVAL;
  if (ndev == NULL) return tpx_err_quiet(TPX_EINVAL, "devices: ndev is NULL");
  *ndev = sn->ndev;
  return 0;
}

tpx_sock_net_t *tpx__sock_net_of(tpx_net_t *net, const char *fn) {
  if (net == NULL || net->ops == NULL || net->ops->devices != tpx__sock_devices || net->impl == NULL) {
    tpx_err_quiet(TPX_EINVAL, "%s: %p is not a tpx built-in transport", fn, (void *)net);
    return NULL;
  }
  return net->impl;
}
