/* The TCPX receive contract (tcpx/contract.h, docs/UNPACK.md): limits and
 * layout as NCCL and the plugin define them, the slot rule, publishing and
 * reading a slot's count, slot reads with their validation, and the device
 * handle a producer fills. The gather itself is tests/unit/test_unpack_host.c. */
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "tcpx/contract.h"
#include "testutil.h"
#include "tpx/net.h"

static void test_limits_and_layout(void **state) {
  (void)state;
  assert_int_equal(TPX_UNPACK_SLOTS, 16);
  assert_int_equal(TPX_UNPACK_MAX_FRAGS, 2048);
  assert_int_equal(TPX_TCPX_MAX_REQUESTS, 16);
  assert_int_equal(TPX_TCPX_DEV_VERSION, 7);
  assert_int_equal(TPX_TCPX_DEV_VERSION, TPX_NET_UNPACK_VERSION);
  assert_int_equal(TPX_TCPX_PAGE_BYTES, 4096);
  assert_int_equal(TPX_TCPX_MAX_REQ_BYTES, 8u << 20);
  assert_int_equal(sizeof(tpx_unpack_meta_t), 16);
  assert_int_equal(_Alignof(tpx_unpack_meta_t), 16);
  assert_int_equal(sizeof(tpx_unpack_meta_block_t), 16 * 2048 * 16 + 16 * 8);
  assert_int_equal(offsetof(tpx_unpack_meta_block_t, cnt), 512 * 1024);
  assert_int_equal(sizeof(tpx_unpack_dev_handle_t), TPX_TCPX_DEV_HANDLE_BYTES);
  assert_int_equal(offsetof(tpx_unpack_dev_handle_t, bounce_buf), 8);
  /* One entry's bytes, as the plugin writes them (little-endian). */
  tpx_unpack_meta_t m = {0x11223344u, 0x55667788u, 0x0102030405060708ull};
  const unsigned char *b = (const unsigned char *)&m;
  assert_int_equal(b[0], 0x44);
  assert_int_equal(b[4], 0x88);
  assert_int_equal(b[8], 0x08);
  assert_int_equal(b[15], 0x01);
}

static void test_slot_rule(void **state) {
  (void)state;
  for (uint64_t k = 0; k < 100; k++) assert_int_equal(tpx__tcpx_slot(k), k % 16);
  assert_int_equal(tpx__tcpx_slot(16), 0);
  assert_int_equal(tpx__tcpx_slot(UINT64_MAX), 15);
  assert_int_equal(tpx__tcpx_slot((1ull << 32) + 3), 3); /* no 32-bit truncation first */
}

static tpx_unpack_meta_block_t *block_new(void) {
  tpx_unpack_meta_block_t *mb = aligned_alloc(64, sizeof(*mb));
  assert_non_null(mb);
  memset(mb, 0, sizeof(*mb));
  return mb;
}

static void test_publish_and_read(void **state) {
  (void)state;
  tpx_unpack_meta_block_t *mb = block_new();
  /* Receive 21 -> slot 5: three entries, the last one short. */
  uint32_t s = tpx__tcpx_slot(21);
  mb->mem[s][0] = (tpx_unpack_meta_t){8 * 4096, 4096, 0};
  mb->mem[s][1] = (tpx_unpack_meta_t){2 * 4096, 4096, 4096};
  mb->mem[s][2] = (tpx_unpack_meta_t){5 * 4096, 100, 8192};
  tpx__tcpx_cnt_publish(mb, s, 3);
  assert_int_equal(tpx__tcpx_cnt_load(mb, s), 3);
  assert_int_equal(tpx__tcpx_cnt_load(mb, (s + 1) % 16), 0);
  uint32_t cnt = 99;
  uint64_t total = 0;
  assert_int_equal(tpx__tcpx_slot_read(mb, s, 16 * 4096, 8192 + 100, &cnt, &total), 0);
  assert_int_equal(cnt, 3);
  assert_int_equal(total, 8192 + 100);
  /* total may be NULL; the bounce size may be unknown (SIZE_MAX). */
  assert_int_equal(tpx__tcpx_slot_read(mb, s, SIZE_MAX, 8192 + 100, &cnt, NULL), 0);
  /* An entry past the destination or the bounce buffer is refused. */
  assert_int_equal(tpx__tcpx_slot_read(mb, s, SIZE_MAX, 8192 + 99, &cnt, NULL), TPX_EPROTO);
  assert_non_null(strstr(tpx_last_error(), "unpack slot 5"));
  assert_int_equal(tpx__tcpx_slot_read(mb, s, 8 * 4096, 8192 + 100, &cnt, NULL), TPX_EPROTO);
  /* A count the layout cannot hold. */
  tpx__tcpx_cnt_publish(mb, s, TPX_UNPACK_MAX_FRAGS + 1);
  assert_int_equal(tpx__tcpx_slot_read(mb, s, SIZE_MAX, SIZE_MAX, &cnt, NULL), TPX_EPROTO);
  assert_non_null(strstr(tpx_last_error(), "claims 2049 entries"));
  /* An empty message. */
  tpx__tcpx_cnt_publish(mb, s, 0);
  total = 7;
  assert_int_equal(tpx__tcpx_slot_read(mb, s, SIZE_MAX, 0, &cnt, &total), 0);
  assert_int_equal(cnt, 0);
  assert_int_equal(total, 0);
  /* Misuse. */
  assert_int_equal(tpx__tcpx_slot_read(mb, 16, SIZE_MAX, 0, &cnt, NULL), TPX_EINVAL);
  assert_int_equal(tpx__tcpx_slot_read(NULL, 0, SIZE_MAX, 0, &cnt, NULL), TPX_EINVAL);
  assert_int_equal(tpx__tcpx_slot_read(mb, 0, SIZE_MAX, 0, NULL, NULL), TPX_EINVAL);
  free(mb);
}

/* A full slot: 2048 entries, every one a page, gathered byte for byte. */
static void test_full_slot_gather(void **state) {
  (void)state;
  enum { N = TPX_UNPACK_MAX_FRAGS, PG = 4096 };
  tpx_unpack_meta_block_t *mb = block_new();
  unsigned char *bounce = malloc((size_t)N * PG), *dst = malloc((size_t)N * PG);
  assert_non_null(bounce);
  assert_non_null(dst);
  tu_fill(bounce, (size_t)N * PG, 3, 0);
  for (uint32_t i = 0; i < N; i++) /* pages in reverse order */
    mb->mem[15][i] = (tpx_unpack_meta_t){(N - 1 - i) * PG, PG, (uint64_t)i * PG};
  tpx__tcpx_cnt_publish(mb, 15, N);
  uint32_t cnt = 0;
  uint64_t total = 0;
  assert_int_equal(tpx__tcpx_slot_read(mb, 15, (size_t)N * PG, (size_t)N * PG, &cnt, &total), 0);
  assert_int_equal(total, TPX_TCPX_MAX_REQ_BYTES);
  assert_int_equal(tpx__tcpx_unpack_cpu(dst, (size_t)N * PG, bounce, (size_t)N * PG, mb->mem[15], cnt), 0);
  for (uint32_t i = 0; i < N; i++)
    assert_int_equal(tu_check(dst + (size_t)i * PG, PG, 3, (size_t)(N - 1 - i) * PG), SIZE_MAX);
  free(dst);
  free(bounce);
  free(mb);
}

static void test_dev_handle_fill(void **state) {
  (void)state;
  tpx_net_dev_handle_t d;
  memset(&d, 0xab, sizeof(d));
  tpx_unpack_dev_handle_t h = {0};
  tpx__tcpx_dev_handle_fill(&d, &h);
  assert_int_equal(d.type, TPX_NET_DEV_UNPACK);
  assert_int_equal(d.version, TPX_TCPX_DEV_VERSION);
  assert_ptr_equal(d.handle, &h);
  assert_int_equal(d.size, TPX_TCPX_DEV_HANDLE_BYTES);
  assert_int_equal(d.needs_proxy_progress, 1);
  for (size_t i = 0; i < sizeof(d.spare); i++) assert_int_equal(d.spare[i], 0xab); /* the caller's */
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_limits_and_layout),
      cmocka_unit_test(test_slot_rule),
      cmocka_unit_test(test_publish_and_read),
      cmocka_unit_test(test_full_slot_gather),
      cmocka_unit_test(test_dev_handle_fill),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
