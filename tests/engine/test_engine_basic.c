/* End-to-end host transfers over loopback: write, read, send/recv, with
 * random sizes, offsets and channel counts; integrity byte for byte. */
#include <stdlib.h>
#include <string.h>

#include "eng.h"

static void test_write_read_send(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  size_t n = 3 * 1024 * 1024 + 17;
  eng_buf_t src, dst;
  eng_buf(P.a, n, 0, &src);
  eng_buf(P.b, n, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &dst);
  tu_fill(src.p, n, 1, 0);
  memset(dst.p, 0, n);
  tpx_xfer_t *x = NULL;
  /* write: A -> B */
  assert_int_equal(tpx_write(P.ab, src.mem, 0, dst.rmem, 0, n, "hi", 2, &x), 0);
  eng_wait(x, 0);
  tpx_xfer_free(x);
  assert_int_equal(tu_check(dst.p, n, 1, 0), SIZE_MAX);
  tpx_notif_t nt;
  assert_int_equal(tpx_wait_notif(P.b, 5000, &nt), 1);
  assert_int_equal(nt.len, 2);
  assert_memory_equal(nt.msg, "hi", 2);
  assert_string_equal(nt.peer_name, "A");
  /* read: A <- B */
  tu_fill(dst.p, n, 2, 0);
  memset(src.p, 0, n);
  assert_int_equal(tpx_read(P.ab, src.mem, 0, dst.rmem, 0, n, &x), 0);
  eng_wait(x, 0);
  tpx_xfer_free(x);
  assert_int_equal(tu_check(src.p, n, 2, 0), SIZE_MAX);
  /* send / recv: B -> A */
  tpx_xfer_t *r = NULL, *s = NULL;
  memset(src.p, 0, n);
  assert_int_equal(tpx_recv(P.ab, src.mem, 0, n, 7, &r), 0);
  assert_int_equal(tpx_send(P.ba, dst.mem, 0, n - 5, 7, &s), 0);
  eng_wait(s, 0);
  eng_wait(r, 0);
  assert_int_equal(tpx_xfer_received(r), n - 5);
  assert_int_equal(tu_check(src.p, n - 5, 2, 0), SIZE_MAX);
  tpx_xfer_free(r);
  tpx_xfer_free(s);
  eng_buf_free(&src);
  eng_buf_free(&dst);
  eng_pair_close(&P);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_read_send),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
