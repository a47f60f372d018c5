/* The graceful-close race of the 2025 engine (seed 000): the sender closes
 * right after its last send completed; the receiver must still get every
 * byte, with no abort. Repeated 1000 times, each iteration tiny. */
#include <stdlib.h>
#include <string.h>

#include "eng.h"

/* ThreadSanitizer watches every access instead (and each iteration costs
 * tens of times more there): fewer repetitions. TPX_TEST_CLOSE_ITERS
 * overrides (tests/engine/CMakeLists.txt: the strict and unpack variants). */
#if defined(__SANITIZE_THREAD__)
#define ITERS_DEFAULT 200
#else
#define ITERS_DEFAULT 1000
#endif
static int g_iters = ITERS_DEFAULT;

static void run(int use_write, int tpx__inline_ok, int iters) {
  tpx_config_t cfg;
  eng_cfg(&cfg);
  cfg.num_channels = 2;
  cfg.chunk_bytes = 4096; /* several chunks per message, on both channels */
  if (!tpx__inline_ok) cfg.inline_bytes = 0; /* the data must go through the transport */
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.port = TPX_PORT_EPHEMERAL;
  p.listen_host = "127.0.0.1";
  p.name = "receiver";
  tpx_endpoint_t *rx, *tx;
  assert_int_equal(tpx_endpoint_create(&p, &rx), 0);
  p.name = "sender";
  p.no_listen = 1;
  assert_int_equal(tpx_endpoint_create(&p, &tx), 0);
  eng_buf_t s, r;
  eng_buf(tx, 64 * 1024, 0, &s);
  eng_buf(rx, 64 * 1024, TPX_ACCESS_WRITE, &r);
  uint8_t blob[TPX_MD_MAX];
  size_t bl;
  assert_int_equal(tpx_mem_get_public_data(r.mem, blob, sizeof(blob), &bl), 0);
  int fds0 = tu_count_fds();
  for (int i = 0; i < iters; i++) {
    size_t len = 3 * 4096 + (size_t)(i * 37 % 4000) + 1;
    tpx_peer_t *st, *rt;
    eng_connect(tx, rx, &st, &rt);
    tu_fill(s.p, len, (uint32_t)i, 0);
    tpx_xfer_t *sx, *rv = NULL;
    if (use_write) {
      tpx_rmem_t *rm;
      assert_int_equal(tpx_load_remote_md(blob, bl, &rm), 0);
      /* the descriptor is tied to the receiver endpoint, valid on every new peer */
      assert_int_equal(tpx_write(st, s.mem, 0, rm, 0, len, &i, sizeof(i), &sx), 0);
      tpx_rmem_free(rm);
    } else {
      assert_int_equal(tpx_recv(rt, r.mem, 0, r.len, 1, &rv), 0);
      assert_int_equal(tpx_send(st, s.mem, 0, len, 1, &sx), 0);
    }
    eng_wait(sx, 0);
    tpx_xfer_free(sx);
    tpx_peer_close(st); /* right after the last send */
    if (use_write) {
      tpx_notif_t nt;
      assert_int_equal(tpx_wait_notif(rx, 10000, &nt), 1);
      int who;
      memcpy(&who, nt.msg, sizeof(who));
      assert_int_equal(who, i);
    } else {
      int rc = tpx_xfer_wait(rv, 10000);
      if (rc) fail_msg("iteration %d: recv failed: %s (%s)", i, tpx_strerror(rc), tpx_last_error());
      assert_int_equal(tpx_xfer_received(rv), len);
      tpx_xfer_free(rv);
    }
    size_t bad = tu_check(r.p, len, (uint32_t)i, 0);
    if (bad != SIZE_MAX) fail_msg("iteration %d: byte %zu differs", i, bad);
    tpx_peer_close(rt);
  }
  eng_buf_free(&s);
  eng_buf_free(&r);
  tpx_endpoint_destroy(tx);
  tpx_endpoint_destroy(rx);
  (void)fds0;
}

static void test_close_after_send(void **state) {
  (void)state;
  int fds = tu_count_fds();
  run(0, 0, g_iters);
  assert_int_equal(tu_count_fds(), fds); /* every socket of 1000 peers closed */
}

static void test_close_after_write(void **state) {
  (void)state;
  run(1, 0, g_iters);
}

/* Same with the data inside the control messages (small transfers). */
static void test_close_after_inline(void **state) {
  (void)state;
  run(0, 1, g_iters / 4);
  run(1, 1, g_iters / 4);
}

int main(void) {
  const char *e = getenv("TPX_TEST_CLOSE_ITERS");
  if (e && atoi(e) >= 4) g_iters = atoi(e);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_close_after_send),
      cmocka_unit_test(test_close_after_write),
      cmocka_unit_test(test_close_after_inline),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
