/* Registrations: pieces that fit the v7 int size, chunk-aware lookup, lazy
 * per-comm registration and release, descriptor blobs. A fake transport
 * records the regMr calls (it never touches the memory, so the regions can be
 * larger than RAM); a sparse mapping exercises offsets past 2 GiB end to end. */
#include <limits.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "eng.h"
#include "engine/core.h"
#include "engine/mem.h"

struct rec {
  void *comm;
  uint8_t *data;
  size_t size;
  int live;
};
static struct rec recs[256];
static int nrec;

static int f_reg(tpx_net_t *n, void *comm, void *data, size_t size, int type, void **mh) {
  (void)n;
  assert_int_equal(type, TPX_PTR_HOST);
  assert_true(nrec < 256);
  recs[nrec] = (struct rec){comm, data, size, 1};
  *mh = &recs[nrec++];
  return 0;
}
static int f_dereg(tpx_net_t *n, void *comm, void *mh) {
  (void)n;
  struct rec *r = mh;
  assert_ptr_equal(r->comm, comm);
  assert_int_equal(r->live, 1);
  r->live = 0;
  return 0;
}

static void test_pieces(void **state) {
  (void)state;
  tpx_net_ops_t ops;
  memset(&ops, 0, sizeof(ops));
  ops.reg_mr = f_reg;
  ops.dereg_mr = f_dereg;
  tpx_net_t net = {.ops = &ops, .name = "fake", .abi_version = 7};
  tpx_endpoint_t *ep = calloc(1, sizeof(*ep));
  pthread_mutex_init(&ep->lock, NULL);
  ep->net = &net;
  strcpy(ep->name, "unit");
  uint8_t *base = (uint8_t *)(uintptr_t)0x100000000000ull; /* never dereferenced */
  size_t len = (5ull << 30) + 12345;
  tpx_mem_desc_t d = {base, len, TPX_MEM_HOST, 0, TPX_ACCESS_WRITE};
  tpx_mem_t *m;
  assert_int_equal(tpx_mem_register(ep, &d, &m), 0);
  assert_int_equal(m->npieces, 6);
  int commA = tpx__mem_slot_alloc(ep, (void *)0x1), commB = tpx__mem_slot_alloc(ep, (void *)0x2);
  /* every chunk position, incl. straddling 1 GiB and 2 GiB boundaries and the end */
  uint64_t offs[] = {0, 4096, (1ull << 30) - 4096, (1ull << 30) - 1, (2ull << 30) - (1u << 20), (2ull << 30),
                     (4ull << 30) + 7, len - (4u << 20), len - 1};
  for (size_t i = 0; i < sizeof(offs) / sizeof(offs[0]); i++) {
    for (int c = 0; c < 2; c++) {
      int slot = c ? commB : commA;
      void *mh;
      assert_int_equal(tpx__mem_mhandle(m, slot, ep->slots[slot], offs[i], &mh), 0);
      struct rec *r = mh;
      assert_ptr_equal(r->comm, ep->slots[slot]);
      assert_true(r->size <= INT_MAX); /* v7 regMr takes an int */
      uint64_t clen = len - offs[i] < (4u << 20) ? len - offs[i] : (4u << 20);
      /* the largest chunk starting here lies inside the registered piece */
      assert_true(base + offs[i] >= r->data && base + offs[i] + clen <= r->data + r->size);
    }
  }
  /* lazily: each (comm, piece) registered once */
  int before = nrec;
  void *mh;
  assert_int_equal(tpx__mem_mhandle(m, commA, ep->slots[commA], 5, &mh), 0);
  assert_int_equal(nrec, before);
  /* a comm going away deregisters what was registered with it, and only that */
  pthread_mutex_lock(&ep->lock);
  tpx__mem_slot_release(ep, commA);
  int live = 0;
  for (int i = 0; i < nrec; i++) {
    if (recs[i].comm == (void *)0x1) assert_int_equal(recs[i].live, 0);
    live += recs[i].live;
  }
  assert_true(live > 0);
  pthread_mutex_unlock(&ep->lock);
  assert_int_equal(tpx_mem_deregister(m), 0);
  for (int i = 0; i < nrec; i++) assert_int_equal(recs[i].live, 0);
  free(ep->slots);
  free(ep->mem_tab);
  pthread_mutex_destroy(&ep->lock);
  free(ep);
}

/* End to end past 2 GiB: 3 GiB sparse mappings, a transfer straddling the
 * 2 GiB mark (and a 1 GiB piece boundary) each way. */
static void test_sparse_3g(void **state) {
  (void)state;
  size_t len = 3ull << 30;
  uint8_t *x = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  uint8_t *y = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  if (x == MAP_FAILED || y == MAP_FAILED) skip();
  tpx_config_t cfg;
  eng_cfg(&cfg);
  cfg.chunk_bytes = 4u << 20;
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  tpx_mem_desc_t dx = {x, len, TPX_MEM_HOST, 0, 0}, dy = {y, len, TPX_MEM_HOST, 0, TPX_ACCESS_WRITE | TPX_ACCESS_READ};
  tpx_mem_t *mx, *my;
  assert_int_equal(tpx_mem_register(P.a, &dx, &mx), 0);
  assert_int_equal(tpx_mem_register(P.b, &dy, &my), 0);
  uint8_t blob[TPX_MD_MAX];
  size_t bl;
  tpx_mem_get_public_data(my, blob, sizeof(blob), &bl);
  tpx_rmem_t *ry;
  assert_int_equal(tpx_load_remote_md(blob, bl, &ry), 0);
  size_t n = 24u << 20;
  uint64_t src = (2ull << 30) - (10u << 20) + 4096 + 3, dst = (2ull << 30) - (7u << 20) + 17;
  tu_fill(x + src, n, 5, 0);
  tpx_xfer_t *t;
  assert_int_equal(tpx_write(P.ab, mx, src, ry, dst, n, NULL, 0, &t), 0);
  eng_wait(t, 0);
  tpx_xfer_free(t);
  assert_int_equal(tu_check(y + dst, n, 5, 0), SIZE_MAX);
  uint64_t back = (1ull << 30) - (5u << 20) + 1; /* straddles the 1 GiB piece edge */
  assert_int_equal(tpx_read(P.ab, mx, back, ry, dst, n, &t), 0);
  eng_wait(t, 0);
  tpx_xfer_free(t);
  assert_int_equal(tu_check(x + back, n, 5, 0), SIZE_MAX);
  tpx_rmem_free(ry);
  assert_int_equal(tpx_mem_deregister(mx), 0);
  assert_int_equal(tpx_mem_deregister(my), 0);
  eng_pair_close(&P);
  munmap(x, len);
  munmap(y, len);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_pieces),
      cmocka_unit_test(test_sparse_3g),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
