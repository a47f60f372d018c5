/* TPX_ENCRYPT end to end (docs/SECURITY.md): two endpoints with the same key
 * and TPX_ENCRYPT=1 move writes, reads and send/recv of many sizes over
 * sealed data sockets, every byte checked; 1 against 0 fails the connect
 * naming the setting (no plaintext to a side that asked for records); a
 * wrong key fails with TPX_EAUTH; no key, or unpack mode, is refused at
 * endpoint creation. A proxy on the control connection that alters,
 * replays or drops one record after the handshake fails the peer with
 * TPX_EAUTH and the write in flight, never reporting it done. Tampering with
 * the data sockets: tests/unit/test_sock_seal.c. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/le.h"
#include "common/util.h"
#include "engine/ctl_seal.h"
#include "engine/wire.h"
#include "eng.h"

#define KEY1 "the first shared key, 32 bytes.."
#define KEY2 "the other shared key, 32 bytes.."

static void enc_cfg(tpx_config_t *cfg, int encrypt, const char *key) {
  eng_cfg(cfg);
  cfg->connect_timeout_ms = 5000;
  if (key) assert_int_equal(tpx_config_set(cfg, "TPX_AUTH_KEY", key), 0);
  assert_int_equal(tpx_config_set(cfg, "TPX_ENCRYPT", encrypt ? "1" : "0"), 0);
}

static const size_t sizes[] = {1, 4095, 4096, 65536 + 3, 1u << 20, (9u << 20) + 17};

static void test_transfers(void **state) {
  (void)state;
  tpx_config_t cfg;
  enc_cfg(&cfg, 1, KEY1);
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  size_t max = sizes[sizeof(sizes) / sizeof(sizes[0]) - 1];
  eng_buf_t a, b;
  eng_buf(P.a, max, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &a);
  eng_buf(P.b, max, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &b);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    size_t n = sizes[i];
    uint32_t seed = (uint32_t)(i * 3 + 1);
    tpx_xfer_t *x = NULL, *r = NULL;
    /* write A -> B */
    tu_fill(a.p, n, seed, 0);
    memset(b.p, 0, n);
    assert_int_equal(tpx_write(P.ab, a.mem, 0, b.rmem, 0, n, NULL, 0, &x), 0);
    eng_wait(x, 0);
    tpx_xfer_free(x);
    assert_int_equal(tu_check(b.p, n, seed, 0), SIZE_MAX);
    /* read A <- B */
    tu_fill(b.p, n, seed + 1, 0);
    memset(a.p, 0, n);
    assert_int_equal(tpx_read(P.ab, a.mem, 0, b.rmem, 0, n, &x), 0);
    eng_wait(x, 0);
    tpx_xfer_free(x);
    assert_int_equal(tu_check(a.p, n, seed + 1, 0), SIZE_MAX);
    /* send B -> A */
    memset(a.p, 0, n);
    assert_int_equal(tpx_recv(P.ab, a.mem, 0, n, seed, &r), 0);
    assert_int_equal(tpx_send(P.ba, b.mem, 0, n, seed, &x), 0);
    eng_wait(x, 0);
    eng_wait(r, 0);
    assert_int_equal(tpx_xfer_received(r), n);
    assert_int_equal(tu_check(a.p, n, seed + 1, 0), SIZE_MAX);
    tpx_xfer_free(x);
    tpx_xfer_free(r);
  }
  eng_buf_free(&a);
  eng_buf_free(&b);
  eng_pair_close(&P);
}

/* Several writes at once, each to its own slice. */
static void test_inflight(void **state) {
  (void)state;
  tpx_config_t cfg;
  enc_cfg(&cfg, 1, KEY1);
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  enum { N = 4 };
  size_t n = 3u << 20;
  eng_buf_t a, b;
  eng_buf(P.a, N * n, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &a);
  eng_buf(P.b, N * n, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &b);
  tpx_xfer_t *x[N];
  for (int i = 0; i < N; i++) {
    tu_fill(a.p + (size_t)i * n, n, 50u + (uint32_t)i, 0);
    assert_int_equal(tpx_write(P.ab, a.mem, (size_t)i * n, b.rmem, (uint64_t)i * n, n, NULL, 0, &x[i]), 0);
  }
  for (int i = 0; i < N; i++) {
    eng_wait(x[i], 0);
    tpx_xfer_free(x[i]);
    assert_int_equal(tu_check(b.p + (size_t)i * n, n, 50u + (uint32_t)i, 0), SIZE_MAX);
  }
  eng_buf_free(&a);
  eng_buf_free(&b);
  eng_pair_close(&P);
}

static tpx_endpoint_t *try_ep(const tpx_config_t *cfg, int *rc) {
  tpx_endpoint_params_t ep;
  tpx_endpoint_params_init(&ep);
  ep.cfg = cfg;
  ep.port = TPX_PORT_EPHEMERAL;
  ep.listen_host = "127.0.0.1";
  ep.name = "E";
  tpx_endpoint_t *e = NULL;
  *rc = tpx_endpoint_create(&ep, &e);
  return e;
}

/* 1 against 0 (same key), either way round: no transfer ever succeeds, and
 * the failure names TPX_ENCRYPT. */
static void mismatch(int a_enc) {
  tpx_config_t ca, cb;
  enc_cfg(&ca, a_enc, KEY1);
  enc_cfg(&cb, !a_enc, KEY1);
  int rc;
  tpx_endpoint_t *a = try_ep(&ca, &rc), *b = try_ep(&cb, &rc);
  assert_true(a && b);
  tpx_peer_t *ab = NULL, *ba = NULL;
  rc = tpx_connect(a, "127.0.0.1", tpx_endpoint_port(b), &ab);
  if (rc == 0) rc = tpx_accept(b, 5000, &ba);
  if (rc == 0) { /* the peers came up: the data plane must refuse */
    eng_buf_t x, y;
    eng_buf(a, 4096, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &x);
    eng_buf(b, 1 << 20, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &y);
    tpx_xfer_t *t = NULL;
    rc = tpx_write(ab, x.mem, 0, y.rmem, 0, 4096, NULL, 0, &t);
    if (rc == 0) {
      rc = tpx_xfer_wait(t, 10000);
      tpx_xfer_free(t);
    }
    eng_buf_free(&x);
    eng_buf_free(&y);
  }
  assert_int_not_equal(rc, 0);
  if (!strstr(tpx_last_error(), "TPX_ENCRYPT")) fail_msg("rc %d: %s", rc, tpx_last_error());
  if (ab) tpx_peer_close(ab);
  if (ba) tpx_peer_close(ba);
  tpx_endpoint_destroy(a);
  tpx_endpoint_destroy(b);
}

static void test_mismatch_1_0(void **state) { (void)state; mismatch(1); }
static void test_mismatch_0_1(void **state) { (void)state; mismatch(0); }

static void test_wrong_key(void **state) {
  (void)state;
  tpx_config_t ca, cb;
  enc_cfg(&ca, 1, KEY1);
  enc_cfg(&cb, 1, KEY2);
  int rc;
  tpx_endpoint_t *a = try_ep(&ca, &rc), *b = try_ep(&cb, &rc);
  assert_true(a && b);
  tpx_peer_t *ab = NULL, *ba = NULL;
  rc = tpx_connect(a, "127.0.0.1", tpx_endpoint_port(b), &ab);
  if (rc == 0) rc = tpx_accept(b, 5000, &ba);
  assert_int_equal(rc, TPX_EAUTH);
  if (ab) tpx_peer_close(ab);
  if (ba) tpx_peer_close(ba);
  tpx_endpoint_destroy(a);
  tpx_endpoint_destroy(b);
}

static void test_no_key(void **state) {
  (void)state;
  tpx_config_t cfg;
  enc_cfg(&cfg, 1, NULL);
  assert_int_equal(tpx_config_set_auth_key(&cfg, NULL, 0), 0);
  int rc;
  tpx_endpoint_t *e = try_ep(&cfg, &rc);
  assert_null(e);
  assert_int_equal(rc, TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "TPX_AUTH_KEY"));
}

/* Unpack mode (the TCPX receive contract) has no record layer: refused. */
static void test_unpack_refused(void **state) {
  (void)state;
  tpx_config_t cfg;
  enc_cfg(&cfg, 1, KEY1);
  int rc;
  tpx_endpoint_t *e = try_ep(&cfg, &rc);
  assert_null(e);
  assert_int_equal(rc, TPX_ENOTSUP);
}

/* ---- a proxy on the control connection ---- */

enum { C_FLIP = 1, C_REPLAY, C_DROP };

struct cproxy {
  int lfd, c, u;
  uint16_t port, up_port;
  int mode;
  _Atomic int arm, tampered, stop;
  pthread_t tid;
  /* connector -> acceptor: frames until the proof, then records */
  uint8_t buf[2 * (TPX_CTL_SEAL_HDR + TPX_CTL_SEAL_REC + 16)];
  size_t have;
  int auths, sealed;
};

static void cp_write(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return;
    p += k;
    n -= (size_t)k;
  }
}

/* Pass what is whole of the connector's stream, tampering once armed. */
static void cp_c2a(struct cproxy *px) {
  size_t off = 0;
  for (;;) {
    uint8_t *b = px->buf + off;
    size_t left = px->have - off, len;
    if (!px->sealed) {
      struct tpx__wire_frame f;
      long n = tpx__wire_frame_parse(b, left, &f);
      if (n <= 0) break;
      len = (size_t)n;
      if (f.type == MSG_AUTH && ++px->auths == 2) px->sealed = 1; /* the proof: records from here */
      cp_write(px->u, b, len);
    } else {
      if (left < TPX_CTL_SEAL_HDR) break;
      len = TPX_CTL_SEAL_HDR + tpx__get32(b + 4) + 16;
      if (left < len) break;
      if (atomic_load(&px->arm) && !atomic_load(&px->tampered)) {
        atomic_store(&px->tampered, 1);
        if (px->mode == C_FLIP) b[TPX_CTL_SEAL_HDR] ^= 0x04;
        if (px->mode != C_DROP) cp_write(px->u, b, len);
        if (px->mode == C_REPLAY) cp_write(px->u, b, len);
      } else {
        cp_write(px->u, b, len);
      }
    }
    off += len;
  }
  memmove(px->buf, px->buf + off, px->have - off);
  px->have -= off;
}

static void *cp_main(void *arg) {
  struct cproxy *px = arg;
  px->c = accept(px->lfd, NULL, NULL);
  assert_true(px->c >= 0);
  px->u = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = htons(px->up_port)};
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  assert_int_equal(connect(px->u, (struct sockaddr *)&a, sizeof(a)), 0);
  uint64_t end = tpx__now_ns() + 30ull * 1000000000ull;
  while (!atomic_load(&px->stop) && tpx__now_ns() < end) {
    struct pollfd p[2] = {{px->c, POLLIN, 0}, {px->u, POLLIN, 0}};
    if (poll(p, 2, 10) <= 0) continue;
    if (p[0].revents) {
      ssize_t n = recv(px->c, px->buf + px->have, sizeof(px->buf) - px->have, 0);
      if (n <= 0) break;
      px->have += (size_t)n;
      cp_c2a(px);
    }
    if (p[1].revents) {
      uint8_t t[65536];
      ssize_t n = recv(px->u, t, sizeof(t), 0);
      if (n <= 0) break;
      cp_write(px->c, t, (size_t)n);
    }
  }
  shutdown(px->c, SHUT_RDWR);
  shutdown(px->u, SHUT_RDWR);
  return NULL;
}

static void ctl_tamper(int mode) {
  tpx_config_t cfg;
  enc_cfg(&cfg, 1, KEY1);
  int rc;
  tpx_endpoint_t *a = try_ep(&cfg, &rc), *b = try_ep(&cfg, &rc);
  assert_true(a && b);
  static struct cproxy px;
  memset(&px, 0, sizeof(px));
  px.mode = mode;
  px.up_port = (uint16_t)tpx_endpoint_port(b);
  px.lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in la = {.sin_family = AF_INET};
  la.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t ll = sizeof(la);
  assert_int_equal(bind(px.lfd, (struct sockaddr *)&la, sizeof(la)), 0);
  assert_int_equal(listen(px.lfd, 4), 0);
  assert_int_equal(getsockname(px.lfd, (struct sockaddr *)&la, &ll), 0);
  assert_int_equal(pthread_create(&px.tid, NULL, cp_main, &px), 0);
  tpx_peer_t *ab = NULL, *ba = NULL;
  assert_int_equal(tpx_connect(a, "127.0.0.1", ntohs(la.sin_port), &ab), 0);
  assert_int_equal(tpx_accept(b, 10000, &ba), 0);
  eng_buf_t x, y;
  eng_buf(a, 1 << 20, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &x);
  eng_buf(b, 1 << 20, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &y);
  eng_write_check(ab, &x, &y, 3); /* sealed both ways, through the proxy */
  atomic_store(&px.arm, 1);
  tpx_xfer_t *t = NULL;
  rc = tpx_write(ab, x.mem, 0, y.rmem, 0, 1 << 20, NULL, 0, &t);
  if (rc == 0) {
    rc = tpx_xfer_wait(t, 10000);
    tpx_xfer_free(t);
  }
  assert_int_equal(atomic_load(&px.tampered), 1);
  if (mode == C_REPLAY && rc == 0) { /* the first copy was genuine; the replay fails the peer */
    for (int i = 0; i < 100 && rc == 0; i++) {
      rc = tpx_write(ab, x.mem, 0, y.rmem, 0, 4096, NULL, 0, &t);
      if (rc == 0) {
        rc = tpx_xfer_wait(t, 10000);
        tpx_xfer_free(t);
      }
      if (rc == 0) usleep(10000);
    }
  }
  if (rc == 0) fail_msg("mode %d: the write succeeded over a tampered control connection", mode);
  atomic_store(&px.stop, 1);
  pthread_join(px.tid, NULL);
  close(px.c);
  close(px.u);
  close(px.lfd);
  eng_buf_free(&x);
  eng_buf_free(&y);
  tpx_peer_close(ab);
  tpx_peer_close(ba);
  tpx_endpoint_destroy(a);
  tpx_endpoint_destroy(b);
}

static void test_ctl_flip(void **state) { (void)state; ctl_tamper(C_FLIP); }
static void test_ctl_replay(void **state) { (void)state; ctl_tamper(C_REPLAY); }
static void test_ctl_drop(void **state) { (void)state; ctl_tamper(C_DROP); }

int main(void) {
  tpx_config_t cfg;
  eng_cfg(&cfg);
  if (cfg.sock_unpack) {
    const struct CMUnitTest t[] = {cmocka_unit_test(test_unpack_refused)};
    return cmocka_run_group_tests(t, NULL, NULL);
  }
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_transfers),   cmocka_unit_test(test_inflight),
      cmocka_unit_test(test_mismatch_1_0), cmocka_unit_test(test_mismatch_0_1),
      cmocka_unit_test(test_wrong_key),   cmocka_unit_test(test_no_key),
      cmocka_unit_test(test_ctl_flip),    cmocka_unit_test(test_ctl_replay),
      cmocka_unit_test(test_ctl_drop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
