/* The ranges the engine registers a large region with, piece by piece
 * (src/engine/mem.h): every piece covers its 1 GiB stride plus the largest
 * chunk, and a CUDA piece starts on a 4 KiB boundary - the GPUDirect-TCPX
 * plugin refuses any other CUDA registration (docs/A3HIGH.md,
 * "Registrations"). Pure arithmetic on a region descriptor: the addresses
 * are never touched. */
#include <stdint.h>
#include <string.h>

#include "engine/mem.h"
#include "testutil.h"

static void check_region(int cuda, uintptr_t base_addr, uint64_t len) {
  struct tpx_mem m;
  memset(&m, 0, sizeof(m));
  m.base = (uint8_t *)base_addr;
  m.len = len;
  m.type = cuda ? TPX_MEM_CUDA : TPX_MEM_HOST;
  if (cuda) { /* what gpu_mem.c computes for an allocation that allows widening */
    m.reg_pre = (uint32_t)(base_addr & (MEM_CUDA_PAGE - 1));
    uint64_t end = base_addr + len;
    m.reg_post = (uint32_t)(((end + MEM_CUDA_PAGE - 1) & ~(uint64_t)(MEM_CUDA_PAGE - 1)) - end);
  }
  m.npieces = (uint32_t)((len + PIECE_STRIDE - 1) / PIECE_STRIDE);
  for (uint32_t k = 0; k < m.npieces; k++) {
    uint8_t *at;
    uint64_t n;
    tpx__mem_piece(&m, k, &at, &n);
    uint64_t start = (uint64_t)k * PIECE_STRIDE;
    uint64_t want_end = start + PIECE_SPAN < len ? start + PIECE_SPAN : len;
    assert_true((uintptr_t)at <= base_addr + start);        /* covers its stride */
    assert_true((uintptr_t)at + n >= base_addr + want_end); /* and the largest chunk */
    assert_true(n < (1ull << 31));                          /* v7's int size */
    if (cuda) {
      assert_int_equal((uintptr_t)at % MEM_CUDA_PAGE, 0);
      assert_true((uintptr_t)at >= base_addr - m.reg_pre); /* inside the widened region */
      assert_true((uintptr_t)at + n <= base_addr + len + m.reg_post);
    } else {
      assert_int_equal((uintptr_t)at, base_addr + start); /* host: exactly the region */
      assert_int_equal((uintptr_t)at + n, base_addr + want_end);
    }
  }
}

static void test_cuda_unaligned_large(void **state) {
  (void)state;
  check_region(1, 0x7f0000000000ull + 4096 + 100, (3ull << 30) + 5000);
  check_region(1, 0x7f0000000000ull + 8, (1ull << 30) + 1);
  check_region(1, 0x7f0000000000ull, 5ull << 30); /* aligned: unchanged */
}

static void test_host_exact(void **state) {
  (void)state;
  check_region(0, 0x7f0000000000ull + 100, (3ull << 30) + 5000);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_cuda_unaligned_large),
      cmocka_unit_test(test_host_exact),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
