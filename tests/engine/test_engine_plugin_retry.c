/* A loaded plugin's failed connect or accept, retried with a fresh listen
 * handle (docs/RELIABILITY.md, "Plugins"; src/engine/relisten.h), over the
 * fake plugin's failure injection (tests/fakes: the next N connects or
 * accepts that would complete a comm fail):
 * - accepts failing the first N times: setup succeeds after N fresh
 *   handles, data moves, every byte checked, nothing left open;
 * - connects failing the first N times: likewise (the connector asks);
 * - failing always: a clear error at the setup deadline, not before, that
 *   names every attempt's cause, logged on both sides;
 * - out of retries (TPX_SOCKET_RETRY_CNT) before the deadline: the error
 *   says how many attempts and their causes;
 * - a failure that is not transient (ncclInvalidUsage): no retry;
 * - a peer that does not offer fresh handles (a build before them): the
 *   first failure ends the setup, as before;
 * - the frame from a connection that has not authenticated (a key set):
 *   refused; in transport setup from a peer that did not offer fresh
 *   handles, or naming a handle, channel or count out of sequence: the
 *   setup fails, the peer told why. */
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "eng.h"
#include "engine/wire.h"
#include "fake_open.h"
#include "ncclnet/abi.h"

#define FAKE "fake-v7"

static void fake_cfg(tpx_config_t *c) {
  eng_cfg(c);
  snprintf(c->net_plugin, sizeof(c->net_plugin), "%s", fake_path(FAKE));
  c->num_channels = 2;
  c->socket_retry_sleep_msec = 20;
}

/* Connect, accept, a checked write each way, close; the fake's failures as set. */
static void retried(struct fake_stats *st, int fail_accepts, int fail_connects) {
  tpx_config_t c;
  fake_cfg(&c);
  st->fail_accepts = fail_accepts;
  st->fail_connects = fail_connects;
  eng_pair_t P;
  eng_pair_open(&P, &c);
  print_message("accepts failed %d, connects failed %d, listens %d\n", st->accept_failed, st->connect_failed,
                st->listen);
  assert_int_equal(st->accept_failed, fail_accepts);
  assert_int_equal(st->connect_failed, fail_connects);
  /* 2 channels x 2 sides, then one fresh listen handle per failure */
  assert_int_equal(st->listen, 4 + fail_accepts + fail_connects);
  eng_buf_t src, dst, src2, dst2;
  eng_buf(P.a, 3u << 20, 0, &src);
  eng_buf(P.b, 3u << 20, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &dst);
  eng_buf(P.b, 1u << 20, 0, &src2);
  eng_buf(P.a, 1u << 20, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &dst2);
  eng_write_check(P.ab, &src, &dst, 91);
  eng_write_check(P.ba, &src2, &dst2, 92);
  eng_buf_free(&src);
  eng_buf_free(&dst);
  eng_buf_free(&src2);
  eng_buf_free(&dst2);
  eng_pair_close(&P);
  assert_int_equal(st->live_comms, 0);
}

static void test_accept_retried(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold(FAKE, &dl);
  retried(st, 3, 0);
  dlclose(dl);
}

static void test_connect_retried(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold(FAKE, &dl);
  retried(st, 0, 3);
  memset(st, 0, sizeof(*st));
  retried(st, 2, 2);
  dlclose(dl);
}

/* How the fake fails, the settings, and what the error must say. */
struct fails {
  int accepts, connects, code; /* fake_stats.fail_* */
  int timeout_ms, retries, sleep_ms;
  const char *says;
};

/* tpx_connect to a peer whose plugin fails as set; returns its code, the
 * time it took in *ms and how many log lines (both endpoints) say `says`:
 * at INFO, where A's failure (returned to its caller) is logged beside B's
 * (decided in B's progress thread, logged at ERROR). */
static int connect_fails(struct fake_stats *st, const struct fails *f, uint64_t *ms, int *lines) {
  tpx_config_t c;
  fake_cfg(&c);
  c.connect_timeout_ms = f->timeout_ms;
  c.socket_retry_cnt = f->retries;
  c.socket_retry_sleep_msec = f->sleep_ms;
  st->fail_accepts = f->accepts;
  st->fail_connects = f->connects;
  st->fail_code = f->code;
  tpx_endpoint_t *a = eng_ep_open(&c, "A"), *b = eng_ep_open(&c, "B");
  tpx_peer_t *ab = NULL;
  tu_log_capture_t cap;
  tu_log_capture_start_at(&cap, TPX_LOG_INFO);
  uint64_t t0 = tpx__now_ns();
  int rc = tpx_connect(a, "127.0.0.1", tpx_endpoint_port(b), &ab);
  *ms = (tpx__now_ns() - t0) / 1000000ull;
  char err[512];
  snprintf(err, sizeof(err), "%s", tpx_last_error());
  tpx_peer_t *ba = NULL;
  (void)tpx_accept(b, 500, &ba); /* B's side of the setup ends too (its log) */
  tpx_endpoint_destroy(a);
  tpx_endpoint_destroy(b);
  *lines = tu_log_capture_end(&cap, f->says);
  print_message("after %llu ms: %s: %s (%d log lines say '%s')\n", (unsigned long long)*ms, tpx_strerror(rc), err,
                *lines, f->says);
  assert_null(ab);
  assert_null(ba);
  if (!strstr(err, f->says)) fail_msg("'%s' does not say '%s'", err, f->says);
  assert_int_equal(st->live_comms, 0);
  return rc;
}

static void test_always_fails_at_deadline(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold(FAKE, &dl);
  /* retries past what the deadline allows: the deadline ends it */
  struct fails f = {1 << 30, 0, 0, 1500, 10000, 50, "accept on net device 0 failed: internal error (attempts 1-"};
  uint64_t ms;
  int lines;
  assert_int_equal(connect_fails(st, &f, &ms, &lines), TPX_ETIMEDOUT);
  assert_true(ms >= 1500 && ms < 6000);
  assert_true(st->accept_failed >= 3); /* retried meanwhile (about 8 each side when idle) */
  assert_true(lines >= 2);             /* each side's failure names the causes */
  dlclose(dl);
}

static void test_out_of_retries(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold(FAKE, &dl);
  struct fails f = {0, 1 << 30, 0, 20000, 2, 20,
                    "3 attempts, each with a fresh listen handle: system error (attempts 1-3)"};
  uint64_t ms;
  int lines;
  assert_int_equal(connect_fails(st, &f, &ms, &lines), TPX_ESYSTEM);
  assert_true(ms < 10000); /* by the count, not the deadline */
  assert_true(lines >= 1);
  dlclose(dl);
}

static void test_not_transient(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold(FAKE, &dl);
  struct fails f = {1 << 30, 0, NCCLNET_INVALID_USAGE, 20000, 34, 20, "accept on net device 0 failed: "};
  uint64_t ms;
  int lines;
  assert_int_equal(connect_fails(st, &f, &ms, &lines), TPX_EUSAGE);
  assert_true(ms < 10000);
  assert_true(st->accept_failed <= 2); /* one per side at most: no retry */
  assert_int_equal(st->listen, 4);
  dlclose(dl);
}

static void test_older_peer(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold(FAKE, &dl);
  tpx_config_t c;
  fake_cfg(&c);
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(fake_path(FAKE), &net), 0);
  tpx_net_t older = *net; /* the same plugin, but A's HELLO lacks HELLO_F_RELISTEN */
  older.caps.builtin = 1;
  tpx_endpoint_t *a = eng_ep_open_net(&c, "A", &older), *b = eng_ep_open_net(&c, "B", net);
  st->fail_accepts = 1;
  tpx_peer_t *ab = NULL;
  int rc = tpx_connect(a, "127.0.0.1", tpx_endpoint_port(b), &ab);
  print_message("%s: %s\n", tpx_strerror(rc), rc ? tpx_last_error() : "");
  if (rc == 0) {
    /* B's accept failed after A's own side was done: without fresh handles
     * there is no UP to wait for, so A learns it from B's report, at once. */
    for (int i = 0; i < 500 && tpx_peer_status(ab) == 0; i++) usleep(10000);
    assert_int_equal(tpx_peer_status(ab), TPX_EINTERNAL);
    tpx_peer_close(ab);
  } else {
    assert_int_equal(rc, TPX_EINTERNAL);
    assert_non_null(strstr(tpx_last_error(), "accept on net device 0 failed"));
    assert_null(strstr(tpx_last_error(), "attempt"));
  }
  assert_int_equal(st->accept_failed, 1);
  assert_int_equal(st->listen, 4); /* no fresh handle */
  tpx_endpoint_destroy(a);
  tpx_endpoint_destroy(b);
  tpx_net_close(net);
  assert_int_equal(st->live_comms, 0);
  dlclose(dl);
}

static size_t relisten_frame(uint8_t *out, size_t cap) {
  struct tpx__wbuf b = {0};
  uint8_t handle[TPX_NET_HANDLE_BYTES] = {0};
  struct tpx__wire_relisten m = {RELISTEN_HANDLE, 0, 1, TPX_EINTERNAL, handle};
  assert_int_equal(tpx__wire_put_relisten(&b, &m), 0);
  assert_true(b.len <= cap);
  memcpy(out, b.p, b.len);
  size_t n = b.len;
  tpx__wbuf_free(&b);
  return n;
}

/* A keyed endpoint and a connection that sends a RELISTEN first: it learns
 * only "refused", and the endpoint goes on serving. */
static void test_unauthenticated_refused(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold(FAKE, &dl);
  tpx_config_t c;
  fake_cfg(&c);
  assert_int_equal(tpx_config_set(&c, "TPX_AUTH_KEY", "0123456789abcdef0123456789abcdef"), 0);
  tpx_endpoint_t *a = eng_ep_open(&c, "A"), *b = eng_ep_open(&c, "B");
  int fd = eng_raw_connect(tpx_endpoint_port(b));
  uint8_t frame[256];
  size_t n = relisten_frame(frame, sizeof(frame));
  assert_int_equal(send(fd, frame, n, MSG_NOSIGNAL), (ssize_t)n);
  uint8_t in[1024];
  size_t got = eng_read_to_eof(fd, in, sizeof(in));
  close(fd);
  struct tpx__wire_error e;
  size_t at;
  assert_int_equal(tpx__wire_find_error(in, got, &e, &at), 1);
  print_message("raw connection told: %d %s\n", e.code, e.msg);
  assert_string_equal(e.msg, "refused");
  assert_int_equal(st->listen, 0); /* nothing listened for it */
  tpx_peer_t *ab = NULL, *ba = NULL;
  eng_connect(a, b, &ab, &ba); /* and the endpoint still serves */
  tpx_peer_close(ab);
  tpx_peer_close(ba);
  tpx_endpoint_destroy(a);
  tpx_endpoint_destroy(b);
  dlclose(dl);
}

/* A raw peer's HELLO (flags), its listen handle a real one of the fake (so
 * the endpoint's connect to it is under way and the setup waits for ours),
 * then m: the endpoint must fail the setup, telling why. */
static void setup_frame_refused(tpx_net_t *net, int port, uint32_t flags, struct tpx__wire_relisten m,
                                const char *why) {
  uint8_t handle[TPX_NET_HANDLE_BYTES];
  void *lc = NULL;
  assert_int_equal(net->ops->listen(net, 0, handle, &lc), 0);
  int fd = eng_raw_connect(port);
  struct tpx__wbuf w = {0};
  struct tpx__wire_hello h = {77, 0, 1, flags, "raw", handle};
  assert_int_equal(tpx__wire_put_hello(&w, 0, &h), 0);
  m.handle = handle; /* a HANDLE's bytes: any */
  assert_int_equal(tpx__wire_put_relisten(&w, &m), 0);
  assert_int_equal(send(fd, w.p, w.len, MSG_NOSIGNAL), (ssize_t)w.len);
  tpx__wbuf_free(&w);
  static uint8_t in[1 << 16];
  size_t got = eng_read_to_eof(fd, in, sizeof(in));
  close(fd);
  struct tpx__wire_error e;
  size_t at;
  assert_int_equal(tpx__wire_find_error(in, got, &e, &at), 1);
  print_message("told: %s\n", e.msg);
  if (!strstr(e.msg, why)) fail_msg("'%s' does not say '%s'", e.msg, why);
  assert_int_equal(net->ops->close_listen(net, lc), 0);
}

static void test_setup_frames_checked(void **state) {
  (void)state;
  void *dl;
  struct fake_stats *st = hold(FAKE, &dl);
  tpx_config_t c;
  fake_cfg(&c);
  c.num_channels = 1;
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open(fake_path(FAKE), &net), 0);
  tpx_endpoint_t *b = eng_ep_open_net(&c, "B", net);
  int port = tpx_endpoint_port(b);
  const uint32_t F = HELLO_F_RELISTEN;
  setup_frame_refused(net, port, 0, (struct tpx__wire_relisten){RELISTEN_UP, 0, 0, 0, NULL}, "were not agreed");
  setup_frame_refused(net, port, F, (struct tpx__wire_relisten){RELISTEN_HANDLE, 0, 5, 0, NULL}, "handle 5 after 0");
  setup_frame_refused(net, port, F, (struct tpx__wire_relisten){RELISTEN_ASK, 0, 3, TPX_ESYSTEM, NULL},
                      "asks about handle 3");
  setup_frame_refused(net, port, F, (struct tpx__wire_relisten){RELISTEN_ASK, 7, 0, TPX_ESYSTEM, NULL},
                      "channel 7 of 1");
  setup_frame_refused(net, port, F, (struct tpx__wire_relisten){RELISTEN_UP, 0, 4, 0, NULL}, "read 4 of our 0");
  assert_int_equal(st->listen, 2 * 5); /* the raw peer's and the endpoint's: no fresh handle */
  tpx_endpoint_destroy(b);
  tpx_net_close(net);
  assert_int_equal(st->live_comms, 0);
  dlclose(dl);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_accept_retried),
      cmocka_unit_test(test_connect_retried),
      cmocka_unit_test(test_always_fails_at_deadline),
      cmocka_unit_test(test_out_of_retries),
      cmocka_unit_test(test_not_transient),
      cmocka_unit_test(test_older_peer),
      cmocka_unit_test(test_unauthenticated_refused),
      cmocka_unit_test(test_setup_frames_checked),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
