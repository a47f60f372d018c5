/* The devmem TCP stand-in's page and token bookkeeping (devmem_pages.h):
 * fragments within pages, tokens per socket, the buffer running out and
 * filling again, tokens given back twice or never handed out. */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "devmem_pages.h"

#define PAGES 8

static uint8_t buf[PAGES * DEVMEM_PAGE];
static uint8_t data[PAGES * DEVMEM_PAGE + 100];

static void fill(void) {
  for (size_t i = 0; i < sizeof(data); i++) data[i] = (uint8_t)(i * 7 + 3);
}

/* A fresh buffer of PAGES pages over buf, and data to receive. */
static void start(struct devmem_pages *dp) {
  assert_int_equal(devmem_pages_init(dp, buf, sizeof(buf)), 0);
  fill();
}

static void t_fragments(void **state) {
  (void)state;
  struct devmem_pages dp;
  assert_int_equal(devmem_pages_init(&dp, buf, sizeof(buf) + 100), 0); /* whole pages only */
  assert_int_equal(dp.npages, PAGES);
  fill();
  struct devmemvec f[PAGES];
  size_t nf;
  /* 10000 bytes: three fragments, each in its own page, bytes where they say. */
  assert_int_equal(devmem_pages_rx(&dp, 1, data, 10000, f, PAGES, &nf), 10000);
  assert_int_equal(nf, 3);
  size_t at = 0;
  for (size_t i = 0; i < nf; i++) {
    assert_true(f[i].frag_size <= DEVMEM_PAGE);
    assert_int_equal(f[i].frag_offset % DEVMEM_PAGE, 0);
    assert_int_equal(f[i].frag_offset / DEVMEM_PAGE, f[i].frag_token);
    assert_memory_equal(buf + f[i].frag_offset, data + at, f[i].frag_size);
    at += f[i].frag_size;
  }
  assert_int_equal(f[2].frag_size, 10000 - 2 * DEVMEM_PAGE);
  /* Fragment room of the caller (its control buffer) limits a receive too. */
  assert_int_equal(devmem_pages_rx(&dp, 1, data, 3 * DEVMEM_PAGE, f, 1, &nf), DEVMEM_PAGE);
  assert_int_equal(nf, 1);
  devmem_pages_fini(&dp);
}

static void t_full_and_refill(void **state) {
  (void)state;
  struct devmem_pages dp;
  start(&dp);
  struct devmemvec f[PAGES + 1];
  size_t nf;
  /* More than the buffer holds: what fits, then nothing until tokens return. */
  assert_int_equal(devmem_pages_rx(&dp, 1, data, sizeof(data), f, PAGES + 1, &nf), PAGES * DEVMEM_PAGE);
  assert_int_equal(nf, PAGES);
  assert_int_equal(devmem_pages_rx(&dp, 1, data, 1, f, 1, &nf), 0);
  assert_int_equal(nf, 0);
  /* Consecutive tokens given back as one range, as the plugin merges them. */
  struct devmemtoken t = {f[0].frag_token, 2};
  assert_int_equal(f[1].frag_token, f[0].frag_token + 1);
  assert_int_equal(devmem_pages_dontneed(&dp, 1, &t, 1), 2);
  assert_int_equal(devmem_pages_rx(&dp, 1, data, 2 * DEVMEM_PAGE + 1, f, PAGES, &nf), 2 * DEVMEM_PAGE);
  assert_int_equal(dp.misuse, 0);
  devmem_pages_fini(&dp);
}

static void t_bad_tokens(void **state) {
  (void)state;
  struct devmem_pages dp;
  start(&dp);
  struct devmemvec f[2];
  size_t nf;
  assert_int_equal(devmem_pages_rx(&dp, 1, data, 2 * DEVMEM_PAGE, f, 2, &nf), 2 * DEVMEM_PAGE);
  struct devmemtoken one = {f[0].frag_token, 1};
  assert_int_equal(devmem_pages_dontneed(&dp, 1, &one, 1), 1);
  /* Twice. */
  assert_int_equal(devmem_pages_dontneed(&dp, 1, &one, 1), -EINVAL);
  assert_int_equal(dp.misuse, 1);
  /* Another socket's token: refused, and still the owner's. */
  struct devmemtoken other = {f[1].frag_token, 1};
  assert_int_equal(devmem_pages_dontneed(&dp, 2, &other, 1), -EINVAL);
  assert_int_equal(dp.misuse, 2);
  /* Never handed out, far beyond the buffer: counted, not walked. */
  struct devmemtoken huge = {5, UINT32_MAX};
  assert_int_equal(devmem_pages_dontneed(&dp, 1, &huge, 1), -EINVAL);
  assert_true(dp.misuse > 1000);
  /* The valid token in a bad batch is still freed. */
  uint64_t before = dp.misuse;
  struct devmemtoken mixed[2] = {{f[1].frag_token, 1}, {f[1].frag_token, 1}};
  assert_int_equal(devmem_pages_dontneed(&dp, 1, mixed, 2), -EINVAL);
  assert_int_equal(dp.misuse, before + 1);
  assert_int_equal(dp.nfree, PAGES);
  devmem_pages_fini(&dp);
}

static void t_socket_close(void **state) {
  (void)state;
  struct devmem_pages dp;
  start(&dp);
  struct devmemvec f[PAGES];
  size_t nf;
  devmem_pages_rx(&dp, 1, data, 3 * DEVMEM_PAGE, f, PAGES, &nf);
  devmem_pages_rx(&dp, 2, data, 2 * DEVMEM_PAGE, f, PAGES, &nf);
  assert_int_equal(devmem_pages_release_sock(&dp, 1), 3);
  assert_int_equal(dp.nfree, PAGES - 2);
  assert_int_equal(devmem_pages_release_sock(&dp, 2), 2);
  assert_int_equal(dp.nfree, PAGES);
  devmem_pages_fini(&dp);
}

static void t_lowest_first(void **state) {
  (void)state;
  struct devmem_pages dp;
  start(&dp);
  struct devmemvec f[PAGES];
  size_t nf;
  assert_int_equal(devmem_pages_rx(&dp, 1, data, sizeof(buf), f, PAGES, &nf), sizeof(buf));
  for (size_t i = 0; i < nf; i++) assert_int_equal(f[i].frag_token, i);
  /* Given back out of order, one at a time: reused lowest first, so the
   * next receive lands in pages 2..5, one run. */
  static const uint32_t back[] = {5, 3, 2, 4};
  for (size_t i = 0; i < 4; i++)
    assert_int_equal(devmem_pages_dontneed(&dp, 1, &(struct devmemtoken){back[i], 1}, 1), 1);
  assert_int_equal(devmem_pages_rx(&dp, 1, data, 4 * DEVMEM_PAGE, f, PAGES, &nf), 4 * DEVMEM_PAGE);
  assert_int_equal(nf, 4);
  for (size_t i = 0; i < nf; i++) {
    assert_int_equal(f[i].frag_token, 2 + i);
    assert_memory_equal(buf + f[i].frag_offset, data + i * DEVMEM_PAGE, DEVMEM_PAGE);
  }
  assert_int_equal(dp.nfree, 0);
  devmem_pages_fini(&dp);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(t_fragments), cmocka_unit_test(t_full_and_refill),
                                     cmocka_unit_test(t_lowest_first),
                                     cmocka_unit_test(t_bad_tokens), cmocka_unit_test(t_socket_close)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
