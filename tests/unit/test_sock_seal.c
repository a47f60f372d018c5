/* TPX_ENCRYPT on the built-in transport (sock/seal.c, wire.h 4): through its
 * NCCL face (listen / connect without a key: the key comes from the auth
 * key) and its keyed face (listen_keyed, as the engine calls it), every byte
 * of messages of many sizes and cuts arrives, across rekeys; a side with
 * TPX_ENCRYPT=1 and one with 0 never exchange data (connect fails, naming
 * the setting); a connector with another key gets no comm; and a proxy on
 * 127.0.0.1 between the two ends that flips a byte of a record, its length
 * or tag, replays, swaps or drops a record makes the receive fail with
 * TPX_EAUTH ("data failed authentication"), never report success. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sock/sock.h"
#include "sock/wire.h"
#include "test_sock_util.h"

static const char key_a[] = "the shared key of this test, 40 bytes...";
static const char key_b[] = "another key entirely, also 40 bytes long";

static tpx_net_t *open_enc(int encrypt, const char *key, int nsocks, uint64_t rekey) {
  tpx_config_t cfg;
  ts_cfg(&cfg, 0, nsocks, 2);
  cfg.encrypt = encrypt;
  if (key) assert_int_equal(tpx_config_set_auth_key(&cfg, key, strlen(key)), 0);
  tpx_net_t *net = ts_open_cfg(&cfg);
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "test");
  assert_non_null(sn);
  sn->seal_rekey = rekey;
  return net;
}

/* A message of `size` bytes, `inflight` at once, each checked. */
static void xfer_many(tpx_net_t *net, void *s, void *r, size_t size, int inflight, uint32_t seed) {
  enum { MAX = 8 };
  unsigned char *sb[MAX], *rb[MAX];
  void *sreq[MAX], *rreq[MAX];
  for (int i = 0; i < inflight; i++) {
    sb[i] = malloc(size + 1);
    rb[i] = malloc(size + 1);
    assert_true(sb[i] && rb[i]);
    tu_fill(sb[i], size, seed + (uint32_t)i, 0);
    memset(rb[i], 0xEE, size + 1);
    void *d[1] = {rb[i]};
    size_t sz[1] = {size};
    int tag[1] = {0};
    assert_int_equal(net->ops->irecv(net, r, 1, d, sz, tag, NULL, &rreq[i]), 0);
    assert_int_equal(net->ops->isend(net, s, sb[i], size, 0, NULL, &sreq[i]), 0);
  }
  for (int i = 0; i < inflight; i++) {
    size_t gs = 0, gr = 0;
    assert_int_equal(ts_wait(net, sreq[i], &gs), 0);
    assert_int_equal(ts_wait(net, rreq[i], &gr), 0);
    assert_int_equal(gr, size);
    assert_int_equal(tu_check(rb[i], size, seed + (uint32_t)i, 0), SIZE_MAX);
    free(sb[i]);
    free(rb[i]);
  }
}

static const size_t sizes[] = {0, 1, 31, 4096, 16384, 16385, 65536 + 7, (1u << 20) + 4095, (5u << 20) + 123};

/* NCCL's face: listen / connect without a key, TPX_ENCRYPT=1 and a key on
 * both ends; records every 3 records under a new key. */
static void test_sealed_transfers(void **state) {
  (void)state;
  tpx_net_t *net = open_enc(1, key_a, 2, 3);
  uint8_t h[TPX_NET_HANDLE_BYTES];
  void *lc = NULL;
  assert_int_equal(net->ops->listen(net, 0, h, &lc), 0);
  assert_int_equal(tpx__get32(h + TPX_WH_FLAGS), TPX_WIRE_HANDLE_F_KEYED | TPX_WIRE_HANDLE_F_ENC);
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  void *s = NULL, *r = NULL;
  ts_pair(net, &s, &r);
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    xfer_many(net, s, r, sizes[i], 1, (uint32_t)i * 10);
    xfer_many(net, s, r, sizes[i], 4, (uint32_t)i * 10 + 100);
  }
  /* a receive larger than the message, and one smaller (truncated) */
  ts_xfer(net, s, r, 100000, 200000, 7);
  ts_close_pair(net, s, r);
}

/* The engine's face: listen_keyed / connect_keyed with a session key. */
static void test_sealed_keyed(void **state) {
  (void)state;
  static const uint8_t skey[TPX_NET_KEY_BYTES] = "session key one, 32 bytes long!";
  tpx_net_t *net = open_enc(1, key_a, 3, 0);
  uint8_t h[TPX_NET_HANDLE_BYTES];
  void *lc = NULL, *s = NULL, *r = NULL;
  assert_int_equal(net->ops->listen_keyed(net, 0, skey, h, &lc), 0);
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  while ((!s || !r) && tpx__now_ns() < end) {
    if (!s) assert_int_equal(net->ops->connect_keyed(net, 0, skey, h, &s, NULL), 0);
    if (!r) assert_int_equal(net->ops->accept(net, lc, &r, NULL), 0);
  }
  assert_true(s && r);
  xfer_many(net, s, r, 3u << 20, 4, 1);
  xfer_many(net, s, r, 4096, 8, 2);
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  ts_close_pair(net, s, r);
}

/* 1 against 0, either way: connect fails at once, naming TPX_ENCRYPT. */
static void test_mismatch(void **state) {
  (void)state;
  for (int way = 0; way < 2; way++) {
    tpx_net_t *ln = open_enc(way == 0, key_a, 1, 0), *cn = open_enc(way == 1, key_a, 1, 0);
    uint8_t h[TPX_NET_HANDLE_BYTES];
    void *lc = NULL, *s = NULL;
    assert_int_equal(ln->ops->listen(ln, 0, h, &lc), 0);
    assert_int_equal(cn->ops->connect(cn, 0, h, &s, NULL), TPX_EAUTH);
    assert_null(s);
    if (!strstr(tpx_last_error(), "TPX_ENCRYPT")) fail_msg("error: %s", tpx_last_error());
    assert_int_equal(ln->ops->close_listen(ln, lc), 0);
    tpx_net_close(ln);
    tpx_net_close(cn);
  }
  /* and no key at all: the transport refuses to open */
  tpx_config_t cfg;
  ts_cfg(&cfg, 0, 1, 1);
  cfg.encrypt = 1;
  assert_int_equal(tpx_config_set_auth_key(&cfg, NULL, 0), 0);
  tpx_net_t *net = NULL;
  assert_int_equal(tpx_net_open_builtin(&cfg, &net), TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "TPX_AUTH_KEY_FILE"));
  assert_int_equal(tpx_config_check(&cfg), TPX_EINVAL);
}

/* Another key: the listener refuses every socket, no comm forms, and the
 * sender's messages never complete as delivered. */
static void test_wrong_key(void **state) {
  (void)state;
  tpx_net_t *ln = open_enc(1, key_a, 1, 0), *cn = open_enc(1, key_b, 1, 0);
  uint8_t h[TPX_NET_HANDLE_BYTES];
  void *lc = NULL, *s = NULL, *r = NULL;
  assert_int_equal(ln->ops->listen(ln, 0, h, &lc), 0);
  uint64_t end = tpx__now_ns() + 1500ull * 1000000ull;
  while (tpx__now_ns() < end) {
    if (!s) assert_int_equal(cn->ops->connect(cn, 0, h, &s, NULL), 0);
    assert_int_equal(ln->ops->accept(ln, lc, &r, NULL), 0);
    assert_null(r);
    usleep(1000);
  }
  if (s) assert_int_equal(cn->ops->close_send(cn, s), 0);
  assert_int_equal(ln->ops->close_listen(ln, lc), 0);
  tpx_net_close(ln);
  tpx_net_close(cn);
}

/* ---- a tampering proxy on 127.0.0.1 ---- */

enum { T_NONE, T_FLIP, T_FLIP_LEN, T_FLIP_TAG, T_REPLAY, T_SWAP, T_DROP };

#define PX_CONNS (TPX_SOCK_MAX_NSOCKS + 1)
#define PX_BUF (2u * (TPX_SEAL_REC_MAX + 64u))

struct px_conn {
  int c, u;     /* client side, upstream */
  size_t hello; /* hello bytes still to pass */
  int index;    /* socket index from the hello */
  uint8_t *buf;
  size_t have;
  int recs;        /* records seen */
  uint8_t *held;   /* T_SWAP: the record held back */
  size_t held_len;
  uint8_t hello_b[TPX_WIRE_HELLO_KEYED_BYTES];
};

struct proxy {
  int lfd;
  uint16_t port;
  struct sockaddr_in up;
  int mode;
  _Atomic int stop;
  _Atomic int tampered;
  struct px_conn conns[PX_CONNS];
  int n;
  pthread_t tid;
};

static void px_write(int fd, const uint8_t *p, size_t n) {
  while (n > 0) {
    ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
    if (k <= 0) return; /* the receiver failed the comm and closed: fine */
    p += k;
    n -= (size_t)k;
  }
}

/* Whole records of a data socket: the second one is tampered with. */
static void px_records(struct proxy *px, struct px_conn *k) {
  size_t off = 0;
  while (k->have - off >= TPX_SEAL_HDR) {
    uint8_t *r = k->buf + off;
    size_t len = TPX_SEAL_HDR + tpx__get32(r) + TPX_SEAL_TAG;
    if (k->have - off < len) break;
    off += len;
    int target = k->index == 1 && k->recs++ == 1;
    if (!target || px->mode == T_NONE) {
      px_write(k->u, r, len);
      if (k->held && k->index == 1) { /* T_SWAP: the held record after its successor */
        px_write(k->u, k->held, k->held_len);
        free(k->held);
        k->held = NULL;
      }
      continue;
    }
    atomic_store(&px->tampered, 1);
    switch (px->mode) {
    case T_FLIP: r[TPX_SEAL_HDR + (len - TPX_SEAL_HDR - TPX_SEAL_TAG) / 2] ^= 0x20; px_write(k->u, r, len); break;
    case T_FLIP_LEN: r[3] ^= 0x40; px_write(k->u, r, len); break;
    case T_FLIP_TAG: r[len - 1] ^= 0x01; px_write(k->u, r, len); break;
    case T_REPLAY: px_write(k->u, r, len); px_write(k->u, r, len); break;
    case T_DROP: break;
    case T_SWAP:
      k->held = malloc(len);
      assert_non_null(k->held);
      memcpy(k->held, r, len);
      k->held_len = len;
      break;
    }
  }
  memmove(k->buf, k->buf + off, k->have - off);
  k->have -= off;
}

static void px_read(struct proxy *px, struct px_conn *k) {
  ssize_t n = recv(k->c, k->buf + k->have, PX_BUF - k->have, MSG_DONTWAIT);
  if (n <= 0) {
    if (n < 0 && (errno == EAGAIN || errno == EINTR)) return;
    shutdown(k->u, SHUT_WR);
    close(k->c);
    k->c = -1;
    return;
  }
  k->have += (size_t)n;
  if (k->hello) {
    size_t take = k->have < k->hello ? k->have : k->hello;
    memcpy(k->hello_b + TPX_WIRE_HELLO_KEYED_BYTES - k->hello, k->buf, take);
    px_write(k->u, k->buf, take);
    memmove(k->buf, k->buf + take, k->have - take);
    k->have -= take;
    k->hello -= take;
    if (k->hello == 0) k->index = tpx__get16(k->hello_b + 24);
    if (k->hello) return;
  }
  px_records(px, k);
}

static void *px_main(void *arg) {
  struct proxy *px = arg;
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  while (!atomic_load(&px->stop) && tpx__now_ns() < end) {
    struct pollfd p[PX_CONNS + 1];
    p[0] = (struct pollfd){px->lfd, POLLIN, 0};
    for (int i = 0; i < px->n; i++)
      p[i + 1] = (struct pollfd){px->conns[i].c, POLLIN, 0};
    if (poll(p, (nfds_t)px->n + 1, 10) <= 0) continue;
    if ((p[0].revents & POLLIN) && px->n < PX_CONNS) {
      int c = accept4(px->lfd, NULL, NULL, SOCK_CLOEXEC);
      if (c >= 0) {
        struct px_conn *k = &px->conns[px->n++];
        memset(k, 0, sizeof(*k));
        k->c = c;
        k->hello = TPX_WIRE_HELLO_KEYED_BYTES;
        k->buf = malloc(PX_BUF);
        k->u = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
        assert_true(k->buf && k->u >= 0);
        assert_int_equal(connect(k->u, (struct sockaddr *)&px->up, sizeof(px->up)), 0);
      }
    }
    for (int i = 0; i < px->n; i++)
      if (px->conns[i].c >= 0 && (p[i + 1].revents & (POLLIN | POLLHUP | POLLERR))) px_read(px, &px->conns[i]);
  }
  return NULL;
}

/* Start the proxy in front of the listener of handle h, and point h at it. */
static void px_start(struct proxy *px, uint8_t *h, int mode) {
  memset(px, 0, sizeof(*px));
  px->mode = mode;
  px->up.sin_family = AF_INET;
  memcpy(&px->up.sin_addr, h + TPX_WH_ADDR, 4);
  memcpy(&px->up.sin_port, h + TPX_WH_PORT, 2);
  px->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in a = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t al = sizeof(a);
  assert_int_equal(bind(px->lfd, (struct sockaddr *)&a, sizeof(a)), 0);
  assert_int_equal(listen(px->lfd, 64), 0);
  assert_int_equal(getsockname(px->lfd, (struct sockaddr *)&a, &al), 0);
  memcpy(h + TPX_WH_ADDR, &a.sin_addr, 4);
  memcpy(h + TPX_WH_PORT, &a.sin_port, 2);
  assert_int_equal(pthread_create(&px->tid, NULL, px_main, px), 0);
}

static void px_stop(struct proxy *px) {
  atomic_store(&px->stop, 1);
  pthread_join(px->tid, NULL);
  for (int i = 0; i < px->n; i++) {
    if (px->conns[i].c >= 0) close(px->conns[i].c);
    close(px->conns[i].u);
    free(px->conns[i].buf);
    free(px->conns[i].held);
  }
  close(px->lfd);
}

static void tamper(int mode) {
  tpx_net_t *net = open_enc(1, key_a, 1, 0);
  uint8_t h[TPX_NET_HANDLE_BYTES];
  void *lc = NULL, *s = NULL, *r = NULL;
  assert_int_equal(net->ops->listen(net, 0, h, &lc), 0);
  uint8_t ph[TPX_NET_HANDLE_BYTES];
  memcpy(ph, h, sizeof(ph));
  struct proxy px;
  px_start(&px, ph, mode);
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  while ((!s || !r) && tpx__now_ns() < end) {
    if (!s) assert_int_equal(net->ops->connect(net, 0, ph, &s, NULL), 0);
    if (!r) assert_int_equal(net->ops->accept(net, lc, &r, NULL), 0);
  }
  assert_true(s && r);
  /* 2 MiB on data socket 1: 8 records; the second one is tampered with */
  size_t size = 2u << 20;
  unsigned char *sb = malloc(size), *rb = malloc(size);
  assert_true(sb && rb);
  tu_fill(sb, size, 9, 0);
  void *sreq = NULL, *rreq = NULL, *d[1] = {rb};
  size_t sz[1] = {size};
  int tag[1] = {0};
  assert_int_equal(net->ops->irecv(net, r, 1, d, sz, tag, NULL, &rreq), 0);
  assert_int_equal(net->ops->isend(net, s, sb, size, 0, NULL, &sreq), 0);
  size_t got = 0;
  int rc = ts_wait(net, rreq, &got);
  if (mode == T_NONE) {
    assert_int_equal(rc, 0);
    assert_int_equal(tu_check(rb, size, 9, 0), SIZE_MAX);
  } else {
    assert_int_equal(atomic_load(&px.tampered), 1);
    if (rc != TPX_EAUTH) fail_msg("mode %d: receive gave %d (%s), not TPX_EAUTH", mode, rc, tpx_last_error());
    assert_non_null(strstr(tpx_last_error(), "authentication"));
    /* the comm stays failed: a later receive fails too */
    void *rreq2 = NULL;
    assert_int_equal(net->ops->irecv(net, r, 1, d, sz, tag, NULL, &rreq2), 0);
    assert_int_not_equal(ts_wait(net, rreq2, &got), 0);
  }
  assert_int_equal(net->ops->close_recv(net, r), 0);
  (void)ts_wait(net, sreq, &got); /* done, or failed once the receiver went */
  assert_int_equal(net->ops->close_send(net, s), 0);
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  px_stop(&px);
  free(sb);
  free(rb);
  tpx_net_close(net);
}

static void test_proxy_clean(void **state) { (void)state; tamper(T_NONE); }
static void test_tamper_flip(void **state) { (void)state; tamper(T_FLIP); }
static void test_tamper_length(void **state) { (void)state; tamper(T_FLIP_LEN); }
static void test_tamper_tag(void **state) { (void)state; tamper(T_FLIP_TAG); }
static void test_tamper_replay(void **state) { (void)state; tamper(T_REPLAY); }
static void test_tamper_swap(void **state) { (void)state; tamper(T_SWAP); }
static void test_tamper_drop(void **state) { (void)state; tamper(T_DROP); }

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_sealed_transfers), cmocka_unit_test(test_sealed_keyed),
      cmocka_unit_test(test_mismatch),         cmocka_unit_test(test_wrong_key),
      cmocka_unit_test(test_proxy_clean),      cmocka_unit_test(test_tamper_flip),
      cmocka_unit_test(test_tamper_length),    cmocka_unit_test(test_tamper_tag),
      cmocka_unit_test(test_tamper_replay),    cmocka_unit_test(test_tamper_swap),
      cmocka_unit_test(test_tamper_drop),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
