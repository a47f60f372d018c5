/* Where the blocks of one transfer lie. One block: offset 0 on both sides (a
 * contiguous transfer). A batch (the KV-cache pattern): blocks BENCH_GAP
 * bytes apart, in reverse order on the server, so that no two blocks form one
 * range on either side and the engine moves each as its own entry. */
#include "bench.h"

void bench_layout_init(struct bench_layout *l, size_t block, int batch) {
  l->block = block;
  l->batch = batch;
  l->stride = batch > 1 ? block + BENCH_GAP : block;
  l->base = 0;
}

struct bench_layout bench_layout_at(const struct bench_layout *l, int k, uint64_t region) {
  struct bench_layout c = *l;
  c.base = (size_t)k * (size_t)region;
  return c;
}

size_t bench_layout_span(const struct bench_layout *l) { return (size_t)(l->batch - 1) * l->stride + l->block; }

size_t bench_layout_bytes(const struct bench_layout *l) { return (size_t)l->batch * l->block; }

size_t bench_layout_client_off(const struct bench_layout *l, int i) { return l->base + (size_t)i * l->stride; }

size_t bench_layout_server_off(const struct bench_layout *l, int i) {
  return l->base + (size_t)(l->batch - 1 - i) * l->stride;
}

size_t bench_layout_max_span(const struct bench_opts *o) {
  size_t max = 0;
  for (int i = 0; i < o->nbatch; i++) {
    unsigned long long b = (unsigned long long)o->batch[i], s = o->size_max;
    unsigned long long stride = b > 1 ? s + BENCH_GAP : s;
    if (s > BENCH_MAX_SPAN || stride > BENCH_MAX_SPAN / b) return 0; /* b * stride fits in 64 bits below */
    unsigned long long span = (b - 1) * stride + s;
    if (span > BENCH_MAX_SPAN) return 0;
    if (span > max) max = (size_t)span;
  }
  return max;
}

size_t bench_layout_buf_bytes(const struct bench_opts *o) {
  size_t span = bench_layout_max_span(o);
  return span > BENCH_MAX_SPAN / (size_t)o->regions ? 0 : span * (size_t)o->regions;
}
