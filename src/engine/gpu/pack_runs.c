/* Packed chunks in GPU memory as unpacker runs (pack_runs.h). */
#include <string.h>

#include "common/error.h"
#include "engine/gpu/pack_runs.h"
#include "engine/mem.h"

void tpx__pack_walk_init(struct tpx__pack_walk *w, const struct tpx__xent *ents, const struct tpx__cursor *c) {
  w->ents = ents;
  w->c = *c;
  w->i = c->e;
  w->done = 0;
}

/* The next piece: 1 with its entry *e, offset in the entry *from, length
 * *len and offset in the chunk *at; 0 past the chunk's last byte. */
static int next_piece(struct tpx__pack_walk *w, const struct tpx__xent **e, uint64_t *from, uint64_t *len,
                      uint64_t *at) {
  while (w->i < w->c.end && w->done < w->c.len) {
    const struct tpx__xent *x = &w->ents[w->i];
    uint64_t o = w->i == w->c.e ? w->c.off : 0;
    uint64_t l = x->len - o;
    if (l > w->c.len - w->done) l = w->c.len - w->done;
    w->i++;
    if (l == 0) continue; /* zero-length entries give no bytes */
    *e = x;
    *from = o;
    *len = l;
    *at = w->done;
    w->done += l;
    return 1;
  }
  return 0;
}

static int on_gpu(const struct tpx__xent *e) { return e->mem && e->mem->type == TPX_MEM_CUDA; }

struct tpx_mem *tpx__pack_gpu_mem(const struct tpx__xent *ents, const struct tpx__cursor *c) {
  struct tpx__pack_walk w;
  tpx__pack_walk_init(&w, ents, c);
  const struct tpx__xent *e;
  uint64_t from, len, at;
  while (next_piece(&w, &e, &from, &len, &at))
    if (on_gpu(e)) return e->mem;
  return NULL;
}

int tpx__pack_mem_ok(const struct tpx__xent *ents, uint32_t n, int gpu_ok) {
  int dev = -1;
  for (uint32_t i = 0; i < n; i++) {
    if (!on_gpu(&ents[i])) continue;
    if (!gpu_ok || (dev >= 0 && ents[i].mem->device != dev)) return 0;
    dev = ents[i].mem->device;
  }
  return 1;
}

int tpx__pack_next_run(struct tpx__pack_walk *w, int gather, uint8_t *buf, uint64_t buf_off, tpx_unpack_meta_t *meta,
                       uint32_t max, struct tpx__pack_run *r) {
  const struct tpx__xent *e;
  uint64_t from, len, at;
  /* First pass, on a copy: which pieces the run takes (it ends before the
   * first GPU piece that would break its rules, or after max of them). */
  struct tpx__pack_walk look = *w, end = *w;
  uint8_t *lo = NULL, *hi = NULL;
  uint32_t n = 0;
  int dev = -1;
  while (n < max && next_piece(&look, &e, &from, &len, &at)) {
    if (on_gpu(e)) {
      uint8_t *p = e->mem->base + e->off + from;
      if (n && e->mem->device != dev)
        return tpx_err_quiet(TPX_EINTERNAL, "a packed chunk's pieces lie on GPUs %d and %d", dev, e->mem->device);
      uint8_t *nlo = n && lo < p ? lo : p, *nhi = n && hi > p + len ? hi : p + len;
      if (n && gather && (uint64_t)(nhi - nlo) > PACK_RUN_SRC_SPAN) break;
      lo = nlo;
      hi = nhi;
      dev = e->mem->device;
      n++;
    }
    end = look; /* host pieces up to the next GPU one go with this run */
  }
  /* Second pass: the entries, and the host pieces copied. */
  r->dev = dev;
  r->lo = lo;
  r->span = n ? (uint64_t)(hi - lo) : 0;
  r->n = n;
  r->bytes = 0;
  uint32_t k = 0;
  while (w->i < end.i && next_piece(w, &e, &from, &len, &at)) {
    uint8_t *p = e->mem ? e->mem->base + e->off + from : NULL;
    if (!on_gpu(e)) {
      if (buf && p) {
        if (gather) memcpy(buf + at, p, (size_t)len);
        else memcpy(p, buf + at, (size_t)len);
      }
      continue;
    }
    if (buf_off + at + len > UINT32_MAX && !gather)
      return tpx_err_quiet(TPX_EINTERNAL, "a packed chunk at arena offset %llu: past 4 GiB",
                           (unsigned long long)buf_off);
    meta[k].len = (uint32_t)len;
    if (gather) {
      meta[k].src_off = (uint32_t)(p - lo);
      meta[k].dst_off = buf_off + at;
    } else {
      meta[k].src_off = (uint32_t)(buf_off + at);
      meta[k].dst_off = (uint64_t)(p - lo);
    }
    r->bytes += len;
    k++;
  }
  return n ? 1 : 0;
}
