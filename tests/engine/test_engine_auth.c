/* Shared-key authentication (engine/auth.h, docs/SECURITY.md), end to end
 * and against forged peers that speak the control protocol: the same key
 * connects and moves verified bytes; a wrong key, a key on one side only, a
 * reflected or replayed proof all fail with TPX_EAUTH on both sides, and the
 * side that failed to prove the key never gets a HELLO (transport handles)
 * or anything after it. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/hmac.h"
#include "eng.h"
#include "engine/core.h"
#include "engine/wire.h"

#define KEY1 "the first shared key, 32 bytes.."
#define KEY2 "the other shared key, 32 bytes.."

static void key_cfg(tpx_config_t *cfg, const char *key) {
  eng_cfg(cfg);
  cfg->connect_timeout_ms = 5000;
  if (key) assert_int_equal(tpx_config_set(cfg, "TPX_AUTH_KEY", key), 0);
}

/* What auth.c computes, written again from the protocol's description:
 * HMAC(K, "tpx-p2p control auth\0" | version | role | Nc | Ns). */
static void proof(const char *key, int version, int role, const uint8_t *nc, const uint8_t *ns,
                  uint8_t *out) {
  static const char label[] = "tpx-p2p control auth";
  uint8_t hdr[2] = {(uint8_t)version, (uint8_t)role};
  struct tpx_mac_part parts[] = {{label, sizeof(label)}, {hdr, 2}, {nc, 32}, {ns, 32}};
  assert_int_equal(tpx__hmac((const uint8_t *)key, strlen(key), parts, 4, out), 0);
}

static void send_auth(int fd, int step, const uint8_t *nonce, const uint8_t *mac) {
  struct tpx__wire_auth m = {.step = (uint8_t)step};
  if (nonce) memcpy(m.nonce, nonce, 32);
  if (mac) memcpy(m.mac, mac, 32);
  struct tpx__wbuf w = {0};
  assert_int_equal(tpx__wire_put_auth(&w, &m), 0);
  assert_true(send(fd, w.p, w.len, MSG_NOSIGNAL) == (ssize_t)w.len);
  tpx__wbuf_free(&w);
}

static void send_hello(int fd) {
  uint8_t handles[TPX_NET_HANDLE_BYTES] = {0};
  struct tpx__wire_hello h = {77, 0, 1, 0, "forger", handles};
  struct tpx__wbuf w = {0};
  assert_int_equal(tpx__wire_put_hello(&w, 0, &h), 0);
  (void)send(fd, w.p, w.len, MSG_NOSIGNAL); /* the peer may have closed already */
  tpx__wbuf_free(&w);
}

/* Reads one whole frame (5 s at most) into buf; returns its type. */
static int read_frame(int fd, uint8_t *buf, size_t cap, struct tpx__wire_frame *f) {
  size_t got = 0;
  for (int i = 0; i < 500; i++) {
    long n = tpx__wire_frame_parse(buf, got, f);
    assert_true(n >= 0);
    if (n > 0) return f->type;
    struct pollfd pf = {fd, POLLIN, 0};
    if (poll(&pf, 1, 10) <= 0) continue;
    ssize_t k = recv(fd, buf + got, 1, 0); /* byte by byte: the next frame stays in the socket */
    if (k <= 0) fail_msg("connection closed before a whole frame");
    got += (size_t)k;
    assert_true(got < cap);
  }
  fail_msg("no frame within 5 s");
  return -1;
}

/* The rest of the stream until EOF: exactly one frame, an error naming
 * authentication (TPX_EAUTH); no HELLO_ACK, nothing else. */
static void expect_auth_error(int fd, const char *why) {
  static uint8_t buf[1 << 16];
  size_t got = eng_read_to_eof(fd, buf, sizeof(buf));
  struct tpx__wire_frame f;
  long n = tpx__wire_frame_parse(buf, got, &f);
  assert_true(n > 0);
  if (f.type != MSG_ERROR) fail_msg("%s: got message type %u, not an error", why, f.type);
  struct tpx__wire_error e;
  assert_int_equal(tpx__wire_get_error(&f, &e), 0);
  if (e.code != TPX_EAUTH) fail_msg("%s: error %d (%s), not TPX_EAUTH", why, e.code, e.msg);
  /* An unauthenticated peer learns only that it was refused; why (the
   * reason named here) stays in the acceptor's log. */
  if (strcmp(e.msg, "refused") != 0) fail_msg("%s: error '%s' says more than 'refused'", why, e.msg);
  assert_int_equal((size_t)n, got); /* nothing after it */
}

/* A forged connector: challenge, the endpoint's response (checked with the
 * right key), then `mac` as the proof (NULL: the right one); returns the
 * socket and the nonces. */
static int forged_connector(int port, const uint8_t *nc, uint8_t *ns, uint8_t *resp_mac) {
  int fd = eng_raw_connect(port);
  send_auth(fd, AUTH_CHALLENGE, nc, NULL);
  uint8_t buf[256];
  struct tpx__wire_frame f;
  assert_int_equal(read_frame(fd, buf, sizeof(buf), &f), MSG_AUTH);
  struct tpx__wire_auth m;
  assert_int_equal(tpx__wire_get_auth(&f, &m), 0);
  assert_int_equal(m.step, AUTH_RESPONSE);
  memcpy(ns, m.nonce, 32);
  memcpy(resp_mac, m.mac, 32);
  uint8_t want[32];
  proof(KEY1, WIRE_VERSION, 'A', nc, ns, want);
  assert_memory_equal(want, m.mac, 32); /* the acceptor proved the key */
  return fd;
}

/* A forged connector whose proof is wrong: under `key` for `version` and
 * `role`, or (reflect) the acceptor's own MAC sent back; then, if hello, a
 * HELLO anyway. The acceptor must drop it with TPX_EAUTH, no HELLO_ACK. */
static void bad_proof(int port, const uint8_t *nc, const char *key, int version, int role,
                      int reflect, int hello) {
  uint8_t ns[32], rmac[32], mac[32];
  int fd = forged_connector(port, nc, ns, rmac);
  if (reflect)
    memcpy(mac, rmac, sizeof(mac));
  else
    proof(key, version, role, nc, ns, mac);
  send_auth(fd, AUTH_PROOF, NULL, mac);
  if (hello) send_hello(fd);
  expect_auth_error(fd, "proof of the key is wrong");
  close(fd);
}

/* The same key on both sides: peers connect, bytes arrive intact both ways. */
static void test_auth_same_key_transfers(void **state) {
  (void)state;
  tpx_config_t cfg;
  key_cfg(&cfg, KEY1);
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  eng_buf_t a, b;
  eng_buf(P.a, 4 << 20, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &a);
  eng_buf(P.b, 4 << 20, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &b);
  eng_write_check(P.ab, &a, &b, 11);
  eng_write_check(P.ba, &b, &a, 12);
  eng_buf_free(&a);
  eng_buf_free(&b);
  eng_pair_close(&P);
}

/* a connects to b and fails with TPX_EAUTH saying `why`; b never gets a
 * peer out of accept. Both endpoints are destroyed. */
static void connect_refused(tpx_endpoint_t *a, tpx_endpoint_t *b, const char *why) {
  tpx_peer_t *ab = NULL, *ba = NULL;
  assert_int_equal(tpx_connect(a, "127.0.0.1", tpx_endpoint_port(b), &ab), TPX_EAUTH);
  assert_null(ab);
  if (!strstr(tpx_last_error(), why)) fail_msg("'%s' does not say '%s'", tpx_last_error(), why);
  assert_int_equal(tpx_accept(b, 200, &ba), TPX_ETIMEDOUT);
  tpx_endpoint_destroy(a);
  tpx_endpoint_destroy(b);
}

/* Keys differ: the connector finds the acceptor's proof wrong and says so;
 * both ends fail with TPX_EAUTH; no peer comes out of accept. */
static void test_auth_wrong_key_fails(void **state) {
  (void)state;
  tpx_config_t ca, cb;
  key_cfg(&ca, KEY1);
  key_cfg(&cb, KEY2);
  eng_res_t base;
  eng_res_now(&base);
  connect_refused(eng_ep_open(&ca, "A"), eng_ep_open(&cb, "B"), "proof of the key is wrong");
  eng_res_settled(&base, 64 << 10);
}

/* A key on one side only fails both, at once (not at a timeout), with an
 * error that says which side has none. */
static void test_auth_key_one_side(void **state) {
  (void)state;
  tpx_config_t ck, cn;
  key_cfg(&ck, KEY1);
  key_cfg(&cn, NULL);
  for (int keyed_connector = 0; keyed_connector < 2; keyed_connector++) {
    tpx_endpoint_t *a = eng_ep_open(keyed_connector ? &ck : &cn, "A"),
                   *b = eng_ep_open(keyed_connector ? &cn : &ck, "B");
    /* A keyed endpoint tells an unauthenticated connector only "refused". */
    connect_refused(a, b, keyed_connector ? "this endpoint has none" : "reported: refused");
  }
}

/* Forged connectors against a keyed endpoint: each is dropped with
 * TPX_EAUTH and never gets a HELLO_ACK (no transport handle leaves). */
static void test_auth_forged_connectors(void **state) {
  (void)state;
  tpx_config_t cfg;
  key_cfg(&cfg, KEY1);
  eng_pair_t P; /* a real peer, which must stay undisturbed */
  eng_pair_open(&P, &cfg);
  int port = tpx_endpoint_port(P.b);
  uint8_t nc[32], ns[32], mac[32], rmac[32];
  for (int i = 0; i < 32; i++)
    nc[i] = (uint8_t)(i * 3 + 1);
  /* 1. no key: straight to HELLO */
  int fd = eng_raw_connect(port);
  send_hello(fd);
  expect_auth_error(fd, "requires a key");
  close(fd);
  bad_proof(port, nc, KEY2, WIRE_VERSION, 'C', 0, 1); /* 2. the wrong key, then a HELLO anyway */
  bad_proof(port, nc, NULL, 0, 0, 1, 1); /* 3. reflection: the acceptor's own MAC back */
  bad_proof(port, nc, KEY1, WIRE_VERSION, 'A', 0, 0); /* 3'. the right key, the acceptor's role */
  /* 4. replay: a proof that was right for an earlier run (its Ns) */
  uint8_t ns_old[32];
  fd = forged_connector(port, nc, ns_old, rmac);
  close(fd); /* what an eavesdropper saw: Nc, Ns_old and the proof below */
  proof(KEY1, WIRE_VERSION, 'C', nc, ns_old, mac);
  fd = forged_connector(port, nc, ns, rmac);
  assert_memory_not_equal(ns, ns_old, 32); /* a fresh nonce each time */
  send_auth(fd, AUTH_PROOF, NULL, mac);
  send_hello(fd);
  expect_auth_error(fd, "proof of the key is wrong");
  close(fd);
  bad_proof(port, nc, KEY1, WIRE_VERSION + 1, 'C', 0,
            0); /* 5. another protocol version's transcript */
  /* 6. a proof before any challenge, and a hello between challenge and proof */
  fd = eng_raw_connect(port);
  send_auth(fd, AUTH_PROOF, NULL, mac);
  expect_auth_error(fd, "unexpected step");
  close(fd);
  fd = forged_connector(port, nc, ns, rmac);
  send_hello(fd);
  expect_auth_error(fd, "hello before the proof");
  close(fd);
  /* 7. the right proof is taken (the real test of 1-6's refusals) */
  fd = forged_connector(port, nc, ns, rmac);
  proof(KEY1, WIRE_VERSION, 'C', nc, ns, mac);
  send_auth(fd, AUTH_PROOF, NULL, mac);
  struct pollfd pf = {fd, POLLIN, 0};
  assert_int_equal(poll(&pf, 1, 200), 0); /* no error: it waits for the HELLO */
  close(fd);
  /* the real peer is undisturbed */
  eng_buf_t x, y;
  eng_buf(P.a, 1 << 20, 0, &x);
  eng_buf(P.b, 1 << 20, TPX_ACCESS_WRITE, &y);
  eng_write_check(P.ab, &x, &y, 13);
  eng_buf_free(&x);
  eng_buf_free(&y);
  tpx_peer_t *none = NULL;
  assert_int_equal(tpx_accept(P.b, 0, &none), TPX_ETIMEDOUT);
  eng_pair_close(&P);
}

/* With a key the engine hands the transport the session key: B's data
 * listen handles are keyed. A's transport without the keyed entry points
 * (a proxy standing for an ncclNet plugin) cannot connect to them: A fails
 * with TPX_EAUTH naming the data sockets, not at a timeout. */
static void test_auth_data_sockets_keyed(void **state) {
  (void)state;
  tpx_config_t cfg;
  key_cfg(&cfg, KEY1);
  tpx_endpoint_t *a = eng_ep_open(&cfg, "A"), *b = eng_ep_open(&cfg, "B");
  static eng_proxy_t plain; /* every call through, keyed ones absent */
  eng_proxy_install(a, &plain);
  assert_null(a->net->ops->listen_keyed);
  connect_refused(a, b, "authenticated data sockets"); /* the proxy is gone with a */
}

/* ---- a forged acceptor ---------------------------------------------------- */

struct acceptor {
  int lfd;
  int mode;      /* 0: a MAC under the wrong key; 1: the right key, connector's role (reflection);
                    2: first the challenge sent back to the connector's own endpoint, then as 0 */
  int self_port; /* mode 2: the connector's endpoint's control port */
  uint8_t buf[1 << 16];
  size_t got; /* what the connector sent, to EOF */
  uint8_t refl[4096];
  size_t refl_got; /* mode 2: what the connector's endpoint answered its own challenge with */
};

/* Mode 2, off the test thread (no cmocka asserts here): dial the
 * connector's own endpoint with its challenge, keep what comes back. */
static void reflect_challenge(struct acceptor *A, const uint8_t *nc) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)A->self_port)};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (fd < 0 || connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) return;
  send_auth(fd, AUTH_CHALLENGE, nc, NULL);
  for (int i = 0; i < 500 && A->refl_got < sizeof(A->refl); i++) {
    struct pollfd pf = {fd, POLLIN, 0};
    if (poll(&pf, 1, 10) <= 0) continue;
    ssize_t n = recv(fd, A->refl + A->refl_got, sizeof(A->refl) - A->refl_got, 0);
    if (n <= 0) break;
    A->refl_got += (size_t)n;
  }
  close(fd);
}

static void *acceptor_run(void *arg) {
  struct acceptor *A = arg;
  int fd = accept(A->lfd, NULL, NULL);
  if (fd < 0) return NULL;
  uint8_t b[256];
  struct tpx__wire_frame f;
  struct tpx__wire_auth m;
  if (read_frame(fd, b, sizeof(b), &f) == MSG_AUTH && tpx__wire_get_auth(&f, &m) == 0) {
    uint8_t ns[32], mac[32];
    memset(ns, 0x42, sizeof(ns));
    if (A->mode == 2) reflect_challenge(A, m.nonce);
    proof(A->mode == 1 ? KEY1 : KEY2, WIRE_VERSION, A->mode == 1 ? 'C' : 'A', m.nonce, ns, mac);
    send_auth(fd, AUTH_RESPONSE, ns, mac);
  }
  memcpy(A->buf, b, f.len + WIRE_HDR_BYTES);
  A->got = f.len + WIRE_HDR_BYTES;
  A->got += eng_read_to_eof(fd, A->buf + A->got, sizeof(A->buf) - A->got);
  close(fd);
  return NULL;
}

/* A keyed connector dialling an acceptor that cannot prove the key: it
 * fails with TPX_EAUTH and sends its challenge, then an error: never its
 * HELLO (its transport handles). Mode 2: the acceptor hands the challenge
 * to the connector's own endpoint to have it answered: refused there. */
static void test_auth_forged_acceptor(void **state) {
  (void)state;
  tpx_config_t cfg;
  key_cfg(&cfg, KEY1);
  for (int mode = 0; mode < 3; mode++) {
    struct acceptor *A = calloc(1, sizeof(*A));
    assert_non_null(A);
    A->mode = mode;
    A->lfd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET};
    inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
    assert_int_equal(bind(A->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
    assert_int_equal(listen(A->lfd, 4), 0);
    socklen_t sl = sizeof(sa);
    assert_int_equal(getsockname(A->lfd, (struct sockaddr *)&sa, &sl), 0);
    tpx_endpoint_t *a = eng_ep_open(&cfg, "A");
    A->self_port = tpx_endpoint_port(a);
    pthread_t t;
    assert_int_equal(pthread_create(&t, NULL, acceptor_run, A), 0);
    tpx_peer_t *ab = NULL;
    assert_int_equal(tpx_connect(a, "127.0.0.1", ntohs(sa.sin_port), &ab), TPX_EAUTH);
    if (!strstr(tpx_last_error(), "proof of the key is wrong")) fail_msg("'%s'", tpx_last_error());
    tpx_endpoint_destroy(a);
    pthread_join(t, NULL);
    close(A->lfd);
    /* the stream: AUTH (challenge), ERROR; nothing else */
    int types[8], n = 0;
    for (size_t off = 0; off < A->got && n < 8;) {
      struct tpx__wire_frame f;
      long k = tpx__wire_frame_parse(A->buf + off, A->got - off, &f);
      assert_true(k > 0);
      types[n++] = f.type;
      off += (size_t)k;
    }
    assert_int_equal(n, 2);
    assert_int_equal(types[0], MSG_AUTH);
    assert_int_equal(types[1], MSG_ERROR);
    if (mode == 2) {
      struct tpx__wire_frame f;
      struct tpx__wire_error e;
      assert_true(tpx__wire_frame_parse(A->refl, A->refl_got, &f) > 0);
      assert_int_equal(f.type, MSG_ERROR); /* no response to its own challenge */
      assert_int_equal(tpx__wire_get_error(&f, &e), 0);
      assert_int_equal(e.code, TPX_EAUTH);
      assert_string_equal(e.msg, "refused"); /* the reason (reflection) is ours alone */
    }
    free(A);
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_auth_same_key_transfers),
      cmocka_unit_test(test_auth_wrong_key_fails),
      cmocka_unit_test(test_auth_key_one_side),
      cmocka_unit_test(test_auth_forged_connectors),
      cmocka_unit_test(test_auth_forged_acceptor),
      cmocka_unit_test(test_auth_data_sockets_keyed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
