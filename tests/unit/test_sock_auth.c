/* The built-in transport's keyed data sockets (tpx/net.h listen_keyed /
 * connect_keyed, sock/wire.h): a connector with the session key gets a
 * working comm; a hello with a wrong or stale MAC, a replayed one, or one
 * of the wrong kind is refused by the listener (its socket closed, no comm),
 * and a plain connect to a keyed handle fails with TPX_EAUTH. Without a key
 * nothing changes (the other test_sock_* tests). */
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sock/sock.h"
#include "test_sock_forge.h"
#include "test_sock_util.h"

static const uint8_t key1[TPX_NET_KEY_BYTES] = "session key one, 32 bytes long!";
static const uint8_t key2[TPX_NET_KEY_BYTES] = "session key two, 32 bytes long!";

/* The transport with a connect timeout past the tests' own bound: a socket
 * the listener kept (instead of refusing it) would fail `refused` rather
 * than be dropped at the listener's deadline. */
static tpx_net_t *open_net(int nsocks) {
  tpx_config_t cfg;
  ts_cfg(&cfg, 0, nsocks, 2);
  cfg.connect_timeout_ms = 3 * TS_TIMEOUT_MS;
  return ts_open_cfg(&cfg);
}

static void *keyed_listen(tpx_net_t *net, const uint8_t *key, uint8_t *h) {
  void *lc = NULL;
  memset(h, 0, TPX_NET_HANDLE_BYTES);
  assert_int_equal(net->ops->listen_keyed(net, 0, key, h, &lc), 0);
  assert_non_null(lc);
  assert_int_equal(tpx__get32(h + TPX_WH_FLAGS), TPX_WIRE_HANDLE_F_KEYED);
  return lc;
}

/* A raw socket dialled to the handle's address. */
static int dial(const uint8_t *h) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  memcpy(&a.sin_addr, h + TPX_WH_ADDR, 4);
  memcpy(&a.sin_port, h + TPX_WH_PORT, 2);
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  assert_int_equal(connect(fd, (struct sockaddr *)&a, sizeof(a)), 0);
  return fd;
}

/* A hello for socket `index` of a comm of nsocks data sockets to handle h:
 * keyed (with a fresh nonce and the MAC under key) when key is not NULL. */
static size_t make_hello(uint8_t *out, const uint8_t *h, uint64_t comm_id, int index, int nsocks,
                         const uint8_t *key) {
  size_t len = key ? TPX_WIRE_HELLO_KEYED_BYTES : TPX_WIRE_HELLO_BYTES;
  memset(out, 0, len);
  tpx__put32(out, TPX_WIRE_HELLO_MAGIC);
  tpx__put16(out + 4, TPX_WIRE_VERSION);
  tpx__put16(out + 6, (uint16_t)len);
  tpx__put64(out + 8, tpx__get64(h + TPX_WH_NONCE));
  tpx__put64(out + 16, comm_id);
  tpx__put16(out + 24, (uint16_t)index);
  tpx__put16(out + 26, (uint16_t)nsocks);
  if (key) {
    tpx__put32(out + 28, TPX_WIRE_HELLO_F_MAC);
    for (int i = 0; i < TPX_WIRE_HELLO_NONCE_BYTES; i++)
      out[40 + i] = (uint8_t)(comm_id * 7 + (uint64_t)index * 13 + (uint64_t)i);
    assert_int_equal(tpx__sock_hello_mac(key, out, out + TPX_WIRE_HELLO_MACED), 0);
  }
  return len;
}

/* connect (keyed when key) and accept on lc until both ends are up. */
static void pair_up(tpx_net_t *net, void *lc, uint8_t *h, const uint8_t *key, void **s, void **r) {
  *s = *r = NULL;
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  while ((!*s || !*r) && tpx__now_ns() < end) {
    if (!*s)
      assert_int_equal(key ? net->ops->connect_keyed(net, 0, key, h, s, NULL)
                           : net->ops->connect(net, 0, h, s, NULL),
                       0);
    if (!*r) assert_int_equal(net->ops->accept(net, lc, r, NULL), 0);
  }
  assert_non_null(*s);
  assert_non_null(*r);
}

/* Drive accept until the raw socket fd is closed by the listener (EOF or
 * reset); no comm may come out meanwhile. */
static void refused(tpx_net_t *net, void *lc, int fd) {
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  for (;;) {
    void *r = NULL;
    assert_int_equal(net->ops->accept(net, lc, &r, NULL), 0);
    assert_null(r);
    struct pollfd p = {fd, POLLIN, 0};
    if (poll(&p, 1, 5) == 1) {
      char b;
      ssize_t n = recv(fd, &b, 1, MSG_DONTWAIT);
      assert_true(n == 0 || (n < 0 && errno == ECONNRESET)); /* the listener never sends anything */
      break;
    }
    if (tpx__now_ns() > end) fail_msg("the listener kept a socket it should have refused");
  }
  close(fd);
}

/* Same key on both ends: a comm, and bytes that arrive intact. */
static void test_keyed_pair_transfers(void **state) {
  (void)state;
  tpx_net_t *net = open_net(2);
  uint8_t h[TPX_NET_HANDLE_BYTES];
  void *lc = keyed_listen(net, key1, h), *s = NULL, *r = NULL;
  pair_up(net, lc, h, key1, &s, &r);
  ts_xfer(net, s, r, 1 << 20, 1 << 20, 5);
  ts_xfer(net, s, r, 100, 4096, 6);
  /* its one comm is taken: a replay of any hello is refused from now on */
  uint8_t hello[TPX_WIRE_HELLO_KEYED_BYTES];
  int fd = dial(h);
  ts_send_all(fd, hello, make_hello(hello, h, 42, 0, 2, key1));
  refused(net, lc, fd);
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  assert_int_equal(net->ops->close_send(net, s), 0);
  assert_int_equal(net->ops->close_recv(net, r), 0);
  tpx_net_close(net);
}

/* A connector with another key: its sockets are refused, no comm forms. */
static void test_wrong_key_refused(void **state) {
  (void)state;
  tpx_net_t *net = open_net(1);
  uint8_t h[TPX_NET_HANDLE_BYTES];
  void *lc = keyed_listen(net, key1, h);
  uint8_t hello[TPX_WIRE_HELLO_KEYED_BYTES];
  int fd = dial(h);
  ts_send_all(fd, hello, make_hello(hello, h, 7, 0, 1, key2));
  refused(net, lc, fd);
  /* the right key but one MAC byte flipped */
  make_hello(hello, h, 7, 0, 1, key1);
  hello[TPX_WIRE_HELLO_MACED + 5] ^= 1;
  fd = dial(h);
  ts_send_all(fd, hello, sizeof(hello));
  refused(net, lc, fd);
  /* a valid MAC, then a field changed after it was computed */
  make_hello(hello, h, 7, 0, 1, key1);
  tpx__put64(hello + 16, 8);
  fd = dial(h);
  ts_send_all(fd, hello, sizeof(hello));
  refused(net, lc, fd);
  /* a real connect with the wrong key: the listener never accepts it */
  void *s = NULL, *r = NULL;
  uint64_t end = tpx__now_ns() + 2000ull * 1000000ull;
  while (!s && tpx__now_ns() < end)
    assert_int_equal(net->ops->connect_keyed(net, 0, key2, h, &s, NULL), 0);
  assert_non_null(s); /* connect completes without the listener (hellos go one way) */
  end = tpx__now_ns() + 300ull * 1000000ull;
  while (tpx__now_ns() < end) {
    assert_int_equal(net->ops->accept(net, lc, &r, NULL), 0);
    assert_null(r);
  }
  assert_int_equal(net->ops->close_send(net, s), 0);
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  tpx_net_close(net);
}

/* A hello made for an earlier session (its listen comm, its key) is
 * useless in a new one: wrong nonce and wrong key. */
static void test_stale_hello_refused(void **state) {
  (void)state;
  tpx_net_t *net = open_net(1);
  uint8_t h1[TPX_NET_HANDLE_BYTES], h2[TPX_NET_HANDLE_BYTES];
  void *lc1 = keyed_listen(net, key1, h1);
  uint8_t old[TPX_WIRE_HELLO_KEYED_BYTES];
  make_hello(old, h1, 9, 0, 1, key1); /* what an eavesdropper saw in session 1 */
  assert_int_equal(net->ops->close_listen(net, lc1), 0);
  void *lc2 = keyed_listen(net, key2, h2);
  assert_true(tpx__get64(h1 + TPX_WH_NONCE) != tpx__get64(h2 + TPX_WH_NONCE));
  int fd = dial(h2);
  ts_send_all(fd, old, sizeof(old));
  refused(net, lc2, fd);
  /* ... with the new listen comm's nonce written in: its MAC no longer fits */
  uint8_t patched[TPX_WIRE_HELLO_KEYED_BYTES];
  memcpy(patched, old, sizeof(patched));
  tpx__put64(patched + 8, tpx__get64(h2 + TPX_WH_NONCE));
  fd = dial(h2);
  ts_send_all(fd, patched, sizeof(patched));
  refused(net, lc2, fd);
  /* the same session key, another listen comm's nonce: still refused */
  void *lc3 = keyed_listen(net, key1, h1);
  fd = dial(h1);
  ts_send_all(fd, old, sizeof(old));
  refused(net, lc3, fd);
  assert_int_equal(net->ops->close_listen(net, lc2), 0);
  assert_int_equal(net->ops->close_listen(net, lc3), 0);
  tpx_net_close(net);
}

/* Keyed and plain do not mix: a plain hello to a keyed listen comm and a
 * keyed one to a plain listen comm are refused at once; a plain connect to
 * a keyed handle fails with TPX_EAUTH before dialling. */
static void test_kinds_do_not_mix(void **state) {
  (void)state;
  tpx_net_t *net = open_net(1);
  uint8_t h[TPX_NET_HANDLE_BYTES], hp[TPX_NET_HANDLE_BYTES];
  void *lc = keyed_listen(net, key1, h);
  uint8_t hello[TPX_WIRE_HELLO_KEYED_BYTES];
  int fd = dial(h);
  ts_send_all(fd, hello, make_hello(hello, h, 3, 0, 1, NULL)); /* 40 bytes: refused on its length */
  refused(net, lc, fd);
  void *s = NULL;
  assert_int_equal(net->ops->connect(net, 0, h, &s, NULL), TPX_EAUTH);
  assert_null(s);
  assert_non_null(strstr(tpx_last_error(), "authenticated"));
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  void *lp = NULL;
  memset(hp, 0, sizeof(hp));
  assert_int_equal(net->ops->listen(net, 0, hp, &lp), 0);
  assert_int_equal(tpx__get32(hp + TPX_WH_FLAGS), 0);
  fd = dial(hp);
  ts_send_all(fd, hello, make_hello(hello, hp, 3, 0, 1, key1));
  refused(net, lp, fd);
  /* a keyed connect to a plain handle: the listener chose, plain hellos */
  void *r = NULL;
  pair_up(net, lp, hp, key1, &s, &r);
  ts_xfer(net, s, r, 4096, 4096, 8);
  assert_int_equal(net->ops->close_send(net, s), 0);
  assert_int_equal(net->ops->close_recv(net, r), 0);
  assert_int_equal(net->ops->close_listen(net, lp), 0);
  tpx_net_close(net);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_keyed_pair_transfers),
      cmocka_unit_test(test_wrong_key_refused),
      cmocka_unit_test(test_stale_hello_refused),
      cmocka_unit_test(test_kinds_do_not_mix),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
