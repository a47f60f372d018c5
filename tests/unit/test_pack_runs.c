/* Packed chunks in GPU memory (src/engine/gpu/pack_runs.c): the pieces of a
 * packed chunk as the unpacker's entries, one launch per run, host pieces
 * copied by the CPU. Pure planning: GPU addresses are never touched, so
 * this runs without a GPU; tests/gpu/test_engine_gpu.c moves the bytes. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "engine/gpu/pack_runs.h"
#include "engine/mem.h"
#include "testutil.h"

#define GPU_BASE 0x7f0000000000ull

static struct tpx_mem gpu_mem(uint64_t base, int dev) {
  struct tpx_mem m;
  memset(&m, 0, sizeof(m));
  m.base = (uint8_t *)(uintptr_t)base;
  m.len = 64ull << 30;
  m.type = TPX_MEM_CUDA;
  m.device = dev;
  return m;
}

static struct tpx_mem host_mem(uint8_t *p, size_t len) {
  struct tpx_mem m;
  memset(&m, 0, sizeof(m));
  m.base = p;
  m.len = len;
  m.type = TPX_MEM_HOST;
  return m;
}

/* Every run of the chunk at c, checked: each entry inside the chunk's
 * arena bytes and the run's span, the GPU side of each entry the piece of
 * its entry, runs within max entries and (gather) 4 GiB of source, and
 * every byte of the chunk covered exactly once by an entry or a host copy.
 * Returns the runs. */
static int walk_chunk(const struct tpx__xent *e, const struct tpx__cursor *c, int gather, uint32_t max, uint64_t aoff,
                      uint8_t *buf, uint64_t *gpu_bytes) {
  uint8_t *cover = calloc(c->len, 1);
  assert_non_null(cover);
  tpx_unpack_meta_t *meta = calloc(max, sizeof(*meta));
  assert_non_null(meta);
  struct tpx__pack_walk w;
  tpx__pack_walk_init(&w, e, c);
  struct tpx__pack_run r;
  int runs = 0, rc;
  while ((rc = tpx__pack_next_run(&w, gather, buf, aoff, meta, max, &r)) == 1) {
    runs++;
    assert_true(r.n >= 1 && r.n <= max);
    if (gather) assert_true(r.span <= PACK_RUN_SRC_SPAN);
    uint64_t bytes = 0;
    for (uint32_t k = 0; k < r.n; k++) {
      uint64_t len = meta[k].len, gpu_off = gather ? meta[k].src_off : meta[k].dst_off;
      uint64_t at = (gather ? meta[k].dst_off : meta[k].src_off) - aoff;
      assert_true(len >= 1);
      assert_true(gpu_off + len <= r.span);
      assert_true(at + len <= c->len);
      /* the GPU side is the piece of an entry at the same chunk offset */
      const uint8_t *g = r.lo + gpu_off;
      uint64_t done = 0;
      int found = 0;
      for (uint32_t i = c->e; i < c->end && done < c->len; i++) {
        uint64_t o = i == c->e ? c->off : 0, l = e[i].len - o;
        if (l > c->len - done) l = c->len - done;
        if (l && done == at) {
          assert_int_equal(e[i].mem->type, TPX_MEM_CUDA);
          assert_int_equal(e[i].mem->device, r.dev);
          assert_ptr_equal(g, e[i].mem->base + e[i].off + o);
          assert_int_equal(len, l);
          found = 1;
        }
        done += l;
      }
      assert_true(found);
      for (uint64_t b = at; b < at + len; b++) assert_int_equal(cover[b]++, 0);
      bytes += len;
    }
    assert_int_equal(bytes, r.bytes);
    *gpu_bytes += bytes;
  }
  assert_int_equal(rc, 0);
  /* host pieces: their bytes, the rest of the chunk */
  uint64_t done = 0;
  for (uint32_t i = c->e; i < c->end && done < c->len; i++) {
    uint64_t o = i == c->e ? c->off : 0, l = e[i].len - o;
    if (l > c->len - done) l = c->len - done;
    if (e[i].mem->type == TPX_MEM_HOST) {
      for (uint64_t b = done; b < done + l; b++) assert_int_equal(cover[b]++, 0);
      if (buf) {
        const uint8_t *h = e[i].mem->base + e[i].off + o;
        assert_memory_equal(buf + done, h, (size_t)l); /* copied the right way */
      }
    }
    done += l;
  }
  for (uint64_t b = 0; b < c->len; b++) assert_int_equal(cover[b], 1);
  free(meta);
  free(cover);
  return runs;
}

/* One chunk by hand: host and GPU pieces mixed, the first from the middle
 * of its entry; gather copies host bytes in, scatter copies them out. */
static void test_mixed_chunk(void **state) {
  (void)state;
  static uint8_t host[4096];
  for (size_t i = 0; i < sizeof(host); i++) host[i] = (uint8_t)(i * 7 + 1);
  struct tpx_mem g = gpu_mem(GPU_BASE, 1), h = host_mem(host, sizeof(host));
  struct tpx__xent e[5] = {{&g, 1000, 300}, {&h, 10, 50}, {&g, 0, 0}, {&g, 8192, 100}, {&h, 2000, 40}};
  struct tpx__cursor c = {.e = 0, .end = 5, .off = 100, .idx = 0, .len = 200 + 50 + 100 + 40, .pmax = 512};
  assert_ptr_equal(tpx__pack_gpu_mem(e, &c), &g);
  uint8_t buf[512];
  memset(buf, 0, sizeof(buf));
  uint64_t gb = 0;
  assert_int_equal(walk_chunk(e, &c, 1, 16, 4096, buf, &gb), 1);
  assert_int_equal(gb, 300);
  /* gather: entries relative to the lowest GPU piece, into the arena at 4096 + chunk offset */
  tpx_unpack_meta_t m[4];
  struct tpx__pack_walk w;
  struct tpx__pack_run r;
  tpx__pack_walk_init(&w, e, &c);
  assert_int_equal(tpx__pack_next_run(&w, 1, NULL, 4096, m, 4, &r), 1);
  assert_int_equal(r.n, 2);
  assert_ptr_equal(r.lo, g.base + 1100);
  assert_int_equal(r.span, 8192 + 100 - 1100);
  assert_int_equal(m[0].src_off, 0);
  assert_int_equal(m[0].len, 200);
  assert_int_equal(m[0].dst_off, 4096);
  assert_int_equal(m[1].src_off, 8192 - 1100);
  assert_int_equal(m[1].dst_off, 4096 + 250);
  assert_int_equal(tpx__pack_next_run(&w, 1, NULL, 4096, m, 4, &r), 0);
  /* scatter: the host pieces land in their memory */
  memset(buf, 0xee, sizeof(buf));
  memset(host + 10, 0, 50);
  memset(host + 2000, 0, 40);
  tpx__pack_walk_init(&w, e, &c);
  assert_int_equal(tpx__pack_next_run(&w, 0, buf, 64, m, 4, &r), 1);
  assert_int_equal(m[0].src_off, 64);
  assert_int_equal(m[0].dst_off, 0);
  assert_int_equal(m[1].src_off, 64 + 250);
  assert_int_equal(m[1].dst_off, 8192 - 1100);
  for (int i = 0; i < 50; i++) assert_int_equal(host[10 + i], 0xee);
  for (int i = 0; i < 40; i++) assert_int_equal(host[2000 + i], 0xee);
  /* a chunk of host pieces only has no GPU memory */
  struct tpx__cursor hc = {.e = 1, .end = 2, .off = 0, .idx = 0, .len = 50, .pmax = 512};
  assert_null(tpx__pack_gpu_mem(e, &hc));
}

/* Sources more than 4 GiB apart: a gather run ends before the piece that
 * would stretch it past 4 GiB (runs keep the chunk's order), a scatter run
 * does not; max entries cut runs too. */
static void test_run_limits(void **state) {
  (void)state;
  struct tpx_mem a = gpu_mem(GPU_BASE, 0);
  struct tpx__xent e[4] = {{&a, 0, 64}, {&a, 128, 64}, {&a, 5ull << 30, 64}, {&a, (5ull << 30) + 128, 64}};
  struct tpx__cursor c = {.e = 0, .end = 4, .off = 0, .idx = 0, .len = 256, .pmax = 64};
  uint64_t gb = 0;
  assert_int_equal(walk_chunk(e, &c, 1, 16, 0, NULL, &gb), 2);
  assert_int_equal(walk_chunk(e, &c, 0, 16, 0, NULL, &gb), 1);
  assert_int_equal(walk_chunk(e, &c, 0, 1, 0, NULL, &gb), 4);
  assert_int_equal(walk_chunk(e, &c, 1, 3, 0, NULL, &gb), 2);
  assert_int_equal(walk_chunk(e, &c, 0, 3, 0, NULL, &gb), 2);
  struct tpx__xent alt[4] = {e[0], e[2], e[1], e[3]}; /* near, far, near, far */
  assert_int_equal(walk_chunk(alt, &c, 1, 16, 0, NULL, &gb), 4);
  assert_int_equal(walk_chunk(alt, &c, 0, 16, 0, NULL, &gb), 1);
  assert_int_equal(gb, 7 * 256);
}

static void test_two_gpus_refused(void **state) {
  (void)state;
  static uint8_t host[64];
  struct tpx_mem a = gpu_mem(GPU_BASE, 0), b = gpu_mem(GPU_BASE + (1ull << 40), 1), h = host_mem(host, 64);
  struct tpx__xent e[3] = {{&a, 0, 16}, {&h, 0, 16}, {&b, 0, 16}};
  struct tpx__cursor c = {.e = 0, .end = 3, .off = 0, .idx = 0, .len = 48, .pmax = 16};
  tpx_unpack_meta_t m[4];
  struct tpx__pack_walk w;
  struct tpx__pack_run r;
  tpx__pack_walk_init(&w, e, &c);
  assert_int_equal(tpx__pack_next_run(&w, 1, NULL, 0, m, 4, &r), TPX_EINTERNAL);
  /* the plan never asks it: entries on two GPUs do not pack */
  assert_int_equal(tpx__pack_mem_ok(e, 3, 1), 0);
  assert_int_equal(tpx__pack_mem_ok(e, 2, 1), 1);
  assert_int_equal(tpx__pack_mem_ok(e, 2, 0), 0);   /* GPU memory where this side does not stage it */
  assert_int_equal(tpx__pack_mem_ok(e + 1, 1, 0), 1); /* host memory always */
  struct tpx__xent refused[2] = {{NULL, 0, 16}, {NULL, 16, 16}}; /* a refused write's entries */
  assert_int_equal(tpx__pack_mem_ok(refused, 2, 0), 1);
}

/* Random transfers cut by the packed plan: over all chunks, every byte of
 * every entry moved exactly once (by a launch entry or a host copy), in
 * both directions, whatever the run limit. */
static void test_plan_accounting(void **state) {
  (void)state;
  srand(34);
  static uint8_t host[1 << 18];
  struct tpx_mem g0 = gpu_mem(GPU_BASE, 0), g1 = gpu_mem(GPU_BASE + (6ull << 30), 0), h = host_mem(host, sizeof(host));
  for (int iter = 0; iter < 300; iter++) {
    uint32_t n = 1 + (uint32_t)(rand() % 60);
    uint32_t chunk = 1 + (uint32_t)(rand() % 4096);
    uint64_t pmax = 1 + (uint64_t)(rand() % chunk);
    struct tpx__xent e[60];
    uint64_t total = 0, hoff = 0;
    for (uint32_t i = 0; i < n; i++) {
      int k = rand() % 4;
      e[i].mem = k == 0 ? &h : k == 1 ? &g1 : &g0;
      e[i].len = rand() % 8 == 0 ? 0 : (uint64_t)(1 + rand() % 3000);
      e[i].off = k == 0 ? hoff : ((uint64_t)rand() << 12) % (1ull << 32); /* host entries apart: scatters compared */
      if (k == 0) hoff += e[i].len;
      total += e[i].len;
    }
    uint64_t nch = tpx__plan_nchunks_packed(e, n, chunk, pmax);
    if (nch == 0) continue;
    uint64_t gpu_bytes = 0, moved = 0;
    uint8_t *buf = malloc(chunk);
    assert_non_null(buf);
    struct tpx__cursor c;
    tpx__plan_seek_packed(e, n, chunk, pmax, 0, &c);
    for (uint64_t k = 0;; k++) {
      if (tpx__plan_gathered(e, &c)) {
        uint32_t max = 1 + (uint32_t)(rand() % 8);
        walk_chunk(e, &c, rand() % 2, max, (uint64_t)(rand() % 1024) * 4096, buf, &gpu_bytes);
      } else if (e[c.e].mem->type == TPX_MEM_CUDA) {
        gpu_bytes += c.len;
      }
      moved += c.len;
      if (!tpx__plan_advance(e, n, chunk, &c, 1)) {
        assert_int_equal(k + 1, nch);
        break;
      }
    }
    free(buf);
    uint64_t want_gpu = 0;
    for (uint32_t i = 0; i < n; i++)
      if (e[i].mem->type == TPX_MEM_CUDA) want_gpu += e[i].len;
    assert_int_equal(moved, total);
    assert_int_equal(gpu_bytes, want_gpu);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_mixed_chunk),
      cmocka_unit_test(test_run_limits),
      cmocka_unit_test(test_two_gpus_refused),
      cmocka_unit_test(test_plan_accounting),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
