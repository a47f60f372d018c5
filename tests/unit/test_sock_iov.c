/* The built-in transport's vectored requests (isendv / irecvv, sock/iov.c):
 * the slicing helper against a byte-level reference, bad lists refused, the
 * capability where it is offered, and messages between a list on one end
 * and a buffer (or another list) on the other over 1..4 data sockets,
 * byte-verified. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "sock/sock.h"
#include "test_sock_util.h"
#include "testutil.h"

static uint32_t rnd_state = 12345;
static uint32_t rnd(void) { /* xorshift: reproducible lists */
  rnd_state ^= rnd_state << 13;
  rnd_state ^= rnd_state >> 17;
  rnd_state ^= rnd_state << 5;
  return rnd_state;
}

/* A list of cnt pieces over buf: sizes from a mix of empty, 1-byte, small
 * and large pieces, laid out with gaps (so a wrong piece shows). Returns
 * the total. */
static size_t make_list(unsigned char *buf, size_t cap, struct iovec *iov, int cnt, size_t big) {
  size_t at = 0, total = 0;
  for (int i = 0; i < cnt; i++) {
    uint32_t k = rnd() % 8;
    size_t l = k == 0 ? 0 : k == 1 ? 1 : k < 5 ? 1 + rnd() % 4096 : 1 + rnd() % big;
    if (at + l + 64 > cap) l = 0;
    iov[i].iov_base = l ? buf + at : NULL;
    iov[i].iov_len = l;
    at += l + (rnd() % 64);
    total += l;
  }
  return total;
}

enum { MSGS = 6, PIECES = 300 };

/* Another cut of `total` bytes into at most PIECES pieces over buf (gaps
 * only where they still leave room). Returns the count. */
static int make_cut(unsigned char *buf, size_t cap, struct iovec *iov, size_t total, size_t big) {
  size_t at = 0, left = total;
  int n = 0;
  while (n < PIECES - 1 && left > 0) {
    uint32_t k = rnd() % 8;
    size_t l = k == 0 ? 0 : k == 1 ? 1 : k < 5 ? 1 + rnd() % 4096 : 1 + rnd() % big;
    if (l > left) l = left;
    iov[n].iov_base = l ? buf + at : NULL;
    iov[n++].iov_len = l;
    at += l;
    left -= l;
    size_t gap = rnd() % 64;
    if (at + gap + left <= cap) at += gap;
  }
  iov[n].iov_base = buf + at;
  iov[n++].iov_len = left;
  return n;
}

static void test_slice(void **state) {
  (void)state;
  unsigned char buf[4096];
  struct iovec iov[40], out[40];
  for (int round = 0; round < 300; round++) {
    int cnt = 1 + (int)(rnd() % 40);
    size_t total = make_list(buf, sizeof(buf), iov, cnt, 200);
    size_t off = total ? rnd() % (total + 1) : 0;
    size_t len = rnd() % (total - off + 2); /* sometimes one past the end */
    int max = 1 + (int)(rnd() % 40);
    size_t got = 0;
    int n = tpx__sock_iov_slice(iov, cnt, off, len, out, max, &got);
    assert_true(n <= max);
    assert_true(got <= len);
    if (n < max) assert_int_equal(got, TPX_MIN(len, total - off)); /* only max stops it early */
    /* The slice's bytes are the list's bytes [off, off + got), in order. */
    size_t pos = 0, sum = 0;
    for (int i = 0; i < n; i++) {
      assert_true(out[i].iov_len > 0);
      for (size_t b = 0; b < out[i].iov_len; b++, pos++) {
        size_t want = off + pos, j = 0;
        while (want >= iov[j].iov_len)
          want -= iov[j++].iov_len;
        assert_ptr_equal((unsigned char *)out[i].iov_base + b,
                         (unsigned char *)iov[j].iov_base + want);
      }
      sum += out[i].iov_len;
    }
    assert_int_equal(sum, got);
  }
}

static void test_check(void **state) {
  (void)state;
  char a[8];
  size_t total = 0;
  struct iovec ok[3] = {{a, 3}, {NULL, 0}, {a + 3, 5}};
  assert_int_equal(tpx__sock_iov_check(ok, 3, &total, "t"), 0);
  assert_int_equal(total, 8);
  assert_int_equal(tpx__sock_iov_check(NULL, 0, &total, "t"), 0);
  assert_int_equal(total, 0);
  assert_int_equal(tpx__sock_iov_check(ok, -1, &total, "t"), TPX_EINVAL);
  assert_int_equal(tpx__sock_iov_check(ok, TPX_NET_IOV_MAX + 1, &total, "t"), TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "at most 1024"));
  assert_int_equal(tpx__sock_iov_check(NULL, 2, &total, "t"), TPX_EINVAL);
  struct iovec null_piece[2] = {{a, 1}, {NULL, 4}};
  assert_int_equal(tpx__sock_iov_check(null_piece, 2, &total, "t"), TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "piece 1 is NULL"));
  struct iovec wrap[1] = {{(void *)(UINTPTR_MAX - 2), 8}};
  assert_int_equal(tpx__sock_iov_check(wrap, 1, &total, "t"), TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "wraps"));
  struct iovec huge[2] = {{a, (size_t)TPX_SOCK_MAX_MSG}, {a, 1}};
  assert_int_equal(tpx__sock_iov_check(huge, 2, &total, "t"), TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "maximum message"));
}

/* Plain mode offers the calls; strict mode refuses them (TCPX's one buffer
 * per request) and says so in its caps; bad lists are refused at the call. */
static void test_caps_and_refusals(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 2, 2);
  assert_int_equal(net->caps.iov, 1);
  assert_non_null(net->ops->isendv);
  void *s, *r, *req = (void *)1;
  ts_pair(net, &s, &r);
  char a[16];
  struct iovec bad[1] = {{NULL, 4}};
  assert_int_equal(net->ops->isendv(net, s, bad, 1, 0, NULL, &req), TPX_EINVAL);
  assert_int_equal(net->ops->irecvv(net, r, bad, 1, 0, NULL, &req), TPX_EINVAL);
  struct iovec one[1] = {{a, sizeof(a)}};
  assert_int_equal(net->ops->isendv(net, r, one, 1, 0, NULL, &req), TPX_EINVAL); /* a recv comm */
  assert_int_equal(net->ops->irecvv(net, r, one, TPX_NET_IOV_MAX + 1, 0, NULL, &req), TPX_EINVAL);
  assert_int_equal(net->ops->isendv(net, s, one, 1, 0, NULL, NULL), TPX_EINVAL);
  ts_close_pair(net, s, r);

  net = ts_open(1, 2, 2);
  assert_int_equal(net->caps.iov, 0);
  ts_pair(net, &s, &r);
  assert_int_equal(net->ops->isendv(net, s, one, 1, 0, NULL, &req), TPX_EUSAGE);
  assert_non_null(strstr(tpx_last_error(), "strict mode"));
  assert_int_equal(net->ops->irecvv(net, r, one, 1, 0, NULL, &req), TPX_EUSAGE);
  ts_close_pair(net, s, r);
}

#define BUF_BYTES (6u << 20)

struct side {
  unsigned char *buf;
  struct iovec iov[PIECES];
  int cnt; /* 0: contiguous buffer */
  size_t total;
};

/* Gather what a list holds (the sender's message, the receiver's result). */
static void gather(const struct side *x, unsigned char *out) {
  size_t at = 0;
  for (int i = 0; i < x->cnt; i++) {
    if (x->iov[i].iov_len == 0) continue; /* NULL base */
    memcpy(out + at, x->iov[i].iov_base, x->iov[i].iov_len);
    at += x->iov[i].iov_len;
  }
}

static void post(tpx_net_t *net, void *comm, struct side *x, int is_send, void **req) {
  int rc;
  do { /* back-pressure is allowed: a few in flight only */
    if (is_send && x->cnt)
      rc = net->ops->isendv(net, comm, x->iov, x->cnt, 0, NULL, req);
    else if (is_send)
      rc = net->ops->isend(net, comm, x->buf, x->total, 0, NULL, req);
    else if (x->cnt)
      rc = net->ops->irecvv(net, comm, x->iov, x->cnt, 0, NULL, req);
    else {
      void *d[1] = {x->buf};
      size_t n[1] = {x->total};
      rc = net->ops->irecv(net, comm, 1, d, n, NULL, NULL, req);
    }
    assert_int_equal(rc, 0);
  } while (*req == NULL);
}

/* MSGS messages in flight at once, the sender (svec) and/or the receiver
 * (rvec) through lists of random pieces, byte-verified. */
static void roundtrip(tpx_net_t *net, void *s, void *r, int svec, int rvec, size_t big) {
  static struct side snd[MSGS], rcv[MSGS];
  void *sreq[MSGS], *rreq[MSGS];
  unsigned char *want = malloc(BUF_BYTES), *have = malloc(BUF_BYTES);
  assert_non_null(want);
  assert_non_null(have);
  for (int k = 0; k < MSGS; k++) {
    struct side *a = &snd[k], *b = &rcv[k];
    a->buf = malloc(BUF_BYTES);
    b->buf = malloc(BUF_BYTES);
    assert_non_null(a->buf);
    assert_non_null(b->buf);
    tu_fill(a->buf, BUF_BYTES, 100 + (uint32_t)k, 0);
    memset(b->buf, 0xEE, BUF_BYTES);
    /* The shape of the message comes from whichever side is vectored. */
    struct side *v = svec ? a : b;
    v->cnt = 1 + (int)(rnd() % PIECES);
    v->total = make_list(v->buf, BUF_BYTES, v->iov, v->cnt, big);
    struct side *o = svec ? b : a;
    o->total = v->total;
    b->total = v->total;
    if (svec && rvec) { /* both lists: the receiver's own cut of the same bytes */
      b->cnt = make_cut(b->buf, BUF_BYTES, b->iov, a->total, big);
    } else {
      o->cnt = 0;
    }
    post(net, r, b, 0, &rreq[k]);
    post(net, s, a, 1, &sreq[k]);
  }
  for (int k = 0; k < MSGS; k++) {
    size_t got = 0;
    assert_int_equal(ts_wait(net, sreq[k], NULL), 0);
    assert_int_equal(ts_wait(net, rreq[k], &got), 0);
    assert_int_equal(got, snd[k].total);
    if (snd[k].cnt)
      gather(&snd[k], want);
    else
      memcpy(want, snd[k].buf, snd[k].total);
    if (rcv[k].cnt)
      gather(&rcv[k], have);
    else
      memcpy(have, rcv[k].buf, rcv[k].total);
    assert_memory_equal(want, have, snd[k].total);
    free(snd[k].buf);
    free(rcv[k].buf);
  }
  free(want);
  free(have);
}

static void test_roundtrip(void **state) {
  (void)state;
  for (int nsocks = 1; nsocks <= 4; nsocks++) {
    tpx_net_t *net = ts_open(0, nsocks, 2);
    void *s, *r;
    ts_pair(net, &s, &r);
    for (int big = 0; big < 2; big++) { /* small pieces (socket 0 messages too) and large ones */
      size_t bigsz = big ? 64 * 1024 : 200;
      roundtrip(net, s, r, 1, 0, bigsz); /* list -> buffer */
      roundtrip(net, s, r, 0, 1, bigsz); /* buffer -> list */
      roundtrip(net, s, r, 1, 1, bigsz); /* list -> another cut of the same bytes */
    }
    ts_close_pair(net, s, r);
  }
}

/* A message longer than the posted pieces: TPX_ETRUNC, the pieces filled,
 * nothing written past them, and the next message intact. */
static void test_truncation(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 2, 2);
  void *s, *r, *sreq, *rreq;
  ts_pair(net, &s, &r);
  size_t ss = 300000;
  unsigned char *sb = malloc(ss), *rb = malloc(ss);
  tu_fill(sb, ss, 5, 0);
  memset(rb, 0xAB, ss);
  struct iovec iov[3] = {{rb, 1000}, {rb + 2000, 0}, {rb + 4000, 100000}};
  assert_int_equal(net->ops->irecvv(net, r, iov, 3, 0, NULL, &rreq), 0);
  assert_int_equal(net->ops->isend(net, s, sb, ss, 0, NULL, &sreq), 0);
  size_t got = 0;
  assert_int_equal(ts_wait(net, rreq, &got), TPX_ETRUNC);
  assert_int_equal(got, ss);
  assert_memory_equal(rb, sb, 1000);
  assert_memory_equal(rb + 4000, sb + 1000, 100000);
  for (size_t i = 1000; i < 4000; i++)
    assert_int_equal(rb[i], 0xAB);
  for (size_t i = 104000; i < ss; i++)
    assert_int_equal(rb[i], 0xAB);
  assert_int_equal(ts_wait(net, sreq, NULL), 0);
  ts_xfer(net, s, r, 70000, 70000, 9);
  free(sb);
  free(rb);
  ts_close_pair(net, s, r);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_slice),
      cmocka_unit_test(test_check),
      cmocka_unit_test_setup_teardown(test_caps_and_refusals, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_roundtrip, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_truncation, tu_fd_setup, tu_fd_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
