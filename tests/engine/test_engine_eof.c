/* A dead peer, whatever the transport says (docs/A3HIGH.md, "A dead peer"):
 * GPUDirect-TCPX answers rc 2 (not done) for good once a peer is gone, and
 * never completes nor fails the request, so only the control connection can
 * tell. When it ends (EOF, reset, or the peer's goodbye), what the peer still
 * has in the transport must fail within one second - not at TPX_TIMEOUT_MS.
 *
 * The transport under A is the built-in one wrapped (tests/util/net_probe.h)
 * so that, once "stuck", every test answers rc 2 / not done. */
#include <stdlib.h>
#include <string.h>

#include "eng.h"
#include "net_probe.h"

static int no_device(void) {
  return 0;
}

static void eof_case(int destroy_b) {
  tpx_config_t cfg;
  eng_cfg(&cfg);
  cfg.timeout_ms = 30000; /* the request deadline the EOF must beat */
  tpx_net_t *base = NULL;
  assert_int_equal(tpx_net_open_builtin(&cfg, &base), 0);
  tpx_net_t *probe = net_probe_wrap(base, no_device, 0);
  eng_pair_t P;
  eng_pair_open_net(&P, &cfg, &cfg, probe, NULL, 0);
  tpx_endpoint_t *a = P.a, *b = P.b;
  tpx_peer_t *ab = P.ab, *ba = P.ba;
  eng_buf_t src, dst;
  eng_buf(a, 8 << 20, TPX_ACCESS_READ, &src);
  eng_buf(b, 8 << 20, TPX_ACCESS_WRITE, &dst);
  eng_write_check(ab, &src, &dst, 4); /* the pair works */

  __atomic_store_n(&np_g.stuck, 1, __ATOMIC_RELEASE);
  tpx_xfer_t *x = NULL;
  assert_int_equal(tpx_write(ab, src.mem, 0, dst.rmem, 0, src.len, NULL, 0, &x), 0);
  assert_int_equal(tpx_xfer_wait(x, 200), TPX_ETIMEDOUT); /* stuck in the transport */
  if (destroy_b) {
    eng_buf_free(&dst);
    tpx_peer_close(ba);
    tpx_endpoint_destroy(b);
  } else {
    tpx_peer_close(ba); /* B says goodbye, stays up */
  }
  /* Well inside the 30 s request deadline: the control connection's end
   * decided it (500 ms grace without a completed chunk). */
  int rc = tpx_xfer_wait(x, 5000);
  if (rc == 0 || rc == TPX_ETIMEDOUT)
    fail_msg("write after the peer left: %d (%s), want a failure", rc, tpx_strerror(rc));
  tpx_xfer_free(x);
  __atomic_store_n(&np_g.stuck, 0, __ATOMIC_RELEASE);
  eng_buf_free(&src);
  if (!destroy_b) eng_buf_free(&dst);
  tpx_peer_close(ab);
  tpx_endpoint_destroy(a);
  if (!destroy_b) tpx_endpoint_destroy(b);
  tpx_net_close(base);
}

static void test_peer_destroyed(void **state) {
  (void)state;
  eof_case(1);
}

static void test_peer_closed(void **state) {
  (void)state;
  eof_case(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_peer_destroyed),
      cmocka_unit_test(test_peer_closed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
