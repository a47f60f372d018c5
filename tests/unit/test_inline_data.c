/* Inline bytes landing (engine/inline_data.h, tpx__inline_scatter): host
 * entries get them by memcpy, empty entries are skipped, and GPU-memory
 * entries only through a CUDA copy, never a CPU store: a write's initiator
 * inlines from its host memory without knowing the target's region is GPU
 * memory, and the target's memcpy killed a GPU-memory server over the real
 * TCPX plugin (docs/A3HIGH.md, "Verified against the plugin's code"). Without
 * a GPU a PROT_NONE page stands for GPU memory (a CPU store into it is
 * SIGSEGV, as into device memory) and the CUDA copy fails cleanly; with one,
 * the bytes must arrive in real device memory. */
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "cuda/gpu.h"
#include "engine/inline_data.h"
#include "engine/mem.h"
#include "testutil.h"

static void test_host_entries(void **state) {
  (void)state;
  uint8_t a[8] = {0}, b[8] = {0};
  struct tpx_mem ma = {.base = a, .len = sizeof(a), .type = TPX_MEM_HOST};
  struct tpx_mem mb = {.base = b, .len = sizeof(b), .type = TPX_MEM_HOST};
  struct tpx__xent e[3] = {{&ma, 2, 3}, {&mb, 0, 0}, {&mb, 4, 4}};
  assert_int_equal(tpx__inline_scatter(e, 3, (const uint8_t *)"abcdefg"), 0);
  assert_memory_equal(a, "\0\0abc\0\0\0", 8);
  assert_memory_equal(b, "\0\0\0\0defg", 8);
}

static void test_gpu_entry_never_stored_by_the_cpu(void **state) {
  (void)state;
  const uint8_t data[16] = "0123456789abcdef";
  int n = 0;
  if (tpx__gpu_device_count(&n) == 0 && n > 0) {
    void *d = NULL;
    uint8_t back[16] = {0};
    assert_int_equal(tpx__gpu_malloc(0, 4096, &d), 0);
    struct tpx_mem m = {.base = d, .len = 4096, .type = TPX_MEM_CUDA, .device = 0};
    struct tpx__xent e = {&m, 100, sizeof(data)};
    assert_int_equal(tpx__inline_scatter(&e, 1, data), 0);
    assert_int_equal(tpx__gpu_memcpy(0, back, (uint8_t *)d + 100, sizeof(back)), 0);
    assert_memory_equal(back, data, sizeof(data));
    assert_int_equal(tpx__gpu_free(0, d), 0);
    return;
  }
  long pg = sysconf(_SC_PAGESIZE);
  uint8_t *p = mmap(NULL, (size_t)pg, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  assert_true(p != MAP_FAILED);
  struct tpx_mem m = {.base = p, .len = (size_t)pg, .type = TPX_MEM_CUDA, .device = 0};
  struct tpx__xent e = {&m, 0, sizeof(data)};
  /* No GPU: the copy's error, and no crash. */
  assert_int_not_equal(tpx__inline_scatter(&e, 1, data), 0);
  munmap(p, (size_t)pg);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_host_entries),
      cmocka_unit_test(test_gpu_entry_never_stored_by_the_cpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
