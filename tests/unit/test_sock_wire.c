/* Built-in transport, wire version 2 (src/sock/wire.h): every part carries
 * its own header, so receivers follow whatever cut and socket order a sender
 * chose. Checked here: the sender's cut (tpx__sock_split); parts of later
 * messages that arrive long before their receives are posted; a forged
 * connector that sends parts in its own order (reversed over two sockets, an
 * empty message) and then malformed ones (bad magic, sizes that disagree, a
 * sequence number going back), each failing the comm with a reason and no
 * crash; and the rule that receives whose bytes can no longer come (every
 * socket ended, or stopped past them) fail instead of waiting. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "sock/sock.h"
#include "sock/wire.h"
#include "test_sock_forge.h"
#include "test_sock_util.h"

/* ---- the sender's cut -------------------------------------------------------------- */

static void test_split_policy(void **state) {
  (void)state;
  size_t per = 0;
  /* Small messages: whole, on socket 0. */
  assert_int_equal(tpx__sock_split(0, 4, 0, &per), 0);
  assert_int_equal(tpx__sock_split(TPX_SOCK_INLINE_MAX, 4, 0, &per), 0);
  /* An idle comm: cut over the data sockets, parts of 4 KiB multiples, at
   * least TPX_SOCK_MIN_PART, covering the message. */
  const size_t sizes[] = {TPX_SOCK_INLINE_MAX + 1, 100000, 512 * 1024, 1000003, 64u << 20};
  for (size_t i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
    for (int nsocks = 1; nsocks <= 8; nsocks++) {
      int np = tpx__sock_split(sizes[i], nsocks, 0, &per);
      assert_true(np >= 1 && np <= nsocks);
      assert_int_equal(per % 4096, 0);
      assert_true(per >= TPX_SOCK_MIN_PART);
      assert_true((size_t)np * per >= sizes[i]);
      assert_true((size_t)(np - 1) * per < sizes[i]);
      /* As many requests in flight as data sockets: whole. */
      assert_int_equal(tpx__sock_split(sizes[i], nsocks, (uint64_t)nsocks, &per), 1);
      assert_int_equal(per, sizes[i]);
    }
  }
  /* 64 MiB over 4 sockets, idle: four 16 MiB parts. */
  assert_int_equal(tpx__sock_split(64u << 20, 4, 0, &per), 4);
  assert_int_equal(per, 16u << 20);
}

/* ---- receives posted late ------------------------------------------------------------ */

/* Sends of mixed sizes (empty, small, just over small, several parts) are all
 * posted first; the receives follow one at a time, after the parts of later
 * messages have piled up in the kernel. Every byte is checked. */
#define LATE_N 24
static void test_late_receives(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 3, 2);
  void *s, *r;
  ts_pair(net, &s, &r);
  const size_t sizes[8] = {0, 1, TPX_SOCK_INLINE_MAX, TPX_SOCK_INLINE_MAX + 1, 200000, 1u << 20,
                           3000001, 4096};
  unsigned char *sb[LATE_N], *rb[LATE_N];
  void *sreq[LATE_N];
  for (int k = 0; k < LATE_N; k++) {
    size_t n = sizes[k % 8];
    sb[k] = malloc(n ? n : 1);
    rb[k] = malloc(n ? n : 1);
    assert_non_null(sb[k]);
    assert_non_null(rb[k]);
    tu_fill(sb[k], n, (uint32_t)k + 1, 0);
    memset(rb[k], 0xEE, n ? n : 1);
    assert_int_equal(net->ops->isend(net, s, sb[k], n, 0, NULL, &sreq[k]), 0);
    assert_non_null(sreq[k]);
  }
  usleep(50000); /* let the first parts arrive and the rest pile up */
  for (int k = 0; k < LATE_N; k++) {
    size_t n = sizes[k % 8], got = SIZE_MAX;
    void *d[1] = {rb[k]}, *req = NULL;
    size_t cap[1] = {n};
    int tag[1] = {0};
    assert_int_equal(net->ops->irecv(net, r, 1, d, cap, tag, NULL, &req), 0);
    assert_non_null(req);
    assert_int_equal(ts_wait(net, req, &got), 0);
    assert_int_equal(got, n);
    assert_int_equal(tu_check(rb[k], n, (uint32_t)k + 1, 0), SIZE_MAX);
  }
  for (int k = 0; k < LATE_N; k++) {
    assert_int_equal(ts_wait(net, sreq[k], NULL), 0);
    free(sb[k]);
    free(rb[k]);
  }
  ts_close_pair(net, s, r);
}

/* ---- the last socket ends ------------------------------------------------------------- */

static void test_all_sockets_end(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 2, 2);
  void *s, *r;
  ts_pair(net, &s, &r);
  const size_t n = 300000;
  unsigned char *sb = malloc(n), *rb[3];
  assert_non_null(sb);
  tu_fill(sb, n, 7, 0);
  void *rq[3];
  for (int k = 0; k < 3; k++) {
    rb[k] = malloc(n);
    assert_non_null(rb[k]);
    void *d[1] = {rb[k]};
    size_t cap[1] = {n};
    int tag[1] = {0};
    assert_int_equal(net->ops->irecv(net, r, 1, d, cap, tag, NULL, &rq[k]), 0);
  }
  void *sr = NULL;
  assert_int_equal(net->ops->isend(net, s, sb, n, 0, NULL, &sr), 0);
  assert_int_equal(ts_wait(net, sr, NULL), 0);
  assert_int_equal(net->ops->close_send(net, s), 0);
  /* Sent before the close: arrives. */
  size_t got = 0;
  assert_int_equal(ts_wait(net, rq[0], &got), 0);
  assert_int_equal(got, n);
  assert_int_equal(tu_check(rb[0], n, 7, 0), SIZE_MAX);
  /* Never sent: fail (an error, not the wait's timeout). */
  for (int k = 1; k < 3; k++) {
    int rc = ts_wait(net, rq[k], NULL);
    assert_true(rc < 0 && rc != TPX_ETIMEDOUT);
  }
  /* Posted after the end: fails as well. */
  void *d[1] = {rb[1]}, *late = NULL;
  size_t cap[1] = {n};
  int tag[1] = {0};
  assert_int_equal(net->ops->irecv(net, r, 1, d, cap, tag, NULL, &late), 0);
  assert_non_null(late);
  int rc = ts_wait(net, late, NULL);
  assert_true(rc < 0 && rc != TPX_ETIMEDOUT);
  assert_int_equal(net->ops->close_recv(net, r), 0);
  net->ops->destroy(net);
  free(sb);
  for (int k = 0; k < 3; k++)
    free(rb[k]);
}

/* ---- a forged connector ------------------------------------------------------------------ */

#define FORGE_NSOCKS 2
typedef struct forge {
  tpx_net_t *net;
  void *lc, *r;
  int fd[FORGE_NSOCKS + 1];
} forge_t;

/* Connect FORGE_NSOCKS + 1 raw sockets to a fresh listen comm with valid
 * hellos and accept the recv comm they form. */
static void forge_open(forge_t *f, int strict) {
  memset(f, 0, sizeof(*f));
  f->net = ts_open(strict, FORGE_NSOCKS, 2);
  f->r = ts_forge_accept(f->net, FORGE_NSOCKS, f->fd, 0x5eed, NULL, &f->lc);
}

static void forge_part(forge_t *f, int sock, uint64_t seq, uint64_t size, uint64_t off,
                       const unsigned char *bytes, uint64_t len) {
  uint8_t hdr[TPX_WIRE_PART_BYTES];
  tpx__wire_part_encode(hdr, seq, size, off, len);
  ts_send_all(f->fd[sock], hdr, sizeof(hdr));
  if (len) ts_send_all(f->fd[sock], bytes, (size_t)len);
}

static void *forge_recv(forge_t *f, void *buf, size_t cap) {
  void *d[1] = {buf}, *req = NULL;
  size_t n[1] = {cap};
  int tag[1] = {0};
  assert_int_equal(f->net->ops->irecv(f->net, f->r, 1, d, n, tag, NULL, &req), 0);
  assert_non_null(req);
  return req;
}

static void forge_close(forge_t *f) {
  for (int i = 0; i <= FORGE_NSOCKS; i++)
    if (f->fd[i] >= 0) close(f->fd[i]);
  assert_int_equal(f->net->ops->close_recv(f->net, f->r), 0);
  assert_int_equal(f->net->ops->close_listen(f->net, f->lc), 0);
  f->net->ops->destroy(f->net);
}

/* Parts in an order our sender never uses: message 0 in two parts, the second
 * first and on socket 1, the first on socket 2; message 1 empty on socket 2;
 * message 2 small on socket 1. */
static void test_forged_order(void **state) {
  (void)state;
  forge_t f;
  forge_open(&f, 0);
  const size_t n0 = 300000, half = 147456; /* 36 pages */
  unsigned char *src = malloc(n0), *b0 = malloc(n0), b2[100];
  assert_non_null(src);
  assert_non_null(b0);
  tu_fill(src, n0, 11, 0);
  memset(b0, 0xEE, n0);
  void *r0 = forge_recv(&f, b0, n0), *r1 = forge_recv(&f, b2, 0), *r2 = forge_recv(&f, b2, 100);
  forge_part(&f, 1, 0, n0, half, src + half, n0 - half);
  forge_part(&f, 2, 0, n0, 0, src, half);
  forge_part(&f, 2, 1, 0, 0, NULL, 0);
  forge_part(&f, 1, 2, 100, 0, src, 100);
  size_t got = 0;
  assert_int_equal(ts_wait(f.net, r0, &got), 0);
  assert_int_equal(got, n0);
  assert_int_equal(tu_check(b0, n0, 11, 0), SIZE_MAX);
  assert_int_equal(ts_wait(f.net, r1, &got), 0);
  assert_int_equal(got, 0);
  assert_int_equal(ts_wait(f.net, r2, &got), 0);
  assert_int_equal(got, 100);
  assert_int_equal(tu_check(b2, 100, 11, 0), SIZE_MAX);
  forge_close(&f);
  free(src);
  free(b0);
}

/* The peer is gone while this side is behind: message 0 (its part would have
 * come on socket 1) never came, message 1 waits on socket 2 for its receive.
 * Sockets 0 and 1 end: the receive of message 0 fails at once (socket 2 is
 * past it, the others bring nothing more) instead of waiting forever, and
 * message 1, already on its way, still arrives once its receive is posted. */
static void test_lost_receive(void **state) {
  (void)state;
  forge_t f;
  forge_open(&f, 0);
  unsigned char src[100], b0[100], b1[100];
  tu_fill(src, sizeof(src), 21, 0);
  void *r0 = forge_recv(&f, b0, sizeof(b0));
  forge_part(&f, 2, 1, 100, 0, src, 100);
  usleep(20000); /* socket 2 reads the header of message 1 and stops */
  close(f.fd[0]);
  close(f.fd[1]);
  f.fd[0] = f.fd[1] = -1;
  int rc = ts_wait(f.net, r0, NULL);
  assert_true(rc < 0 && rc != TPX_ETIMEDOUT);
  void *r1 = forge_recv(&f, b1, sizeof(b1));
  size_t got = 0;
  assert_int_equal(ts_wait(f.net, r1, &got), 0);
  assert_int_equal(got, 100);
  assert_int_equal(tu_check(b1, 100, 21, 0), SIZE_MAX);
  forge_close(&f);
}

/* One malformed stream per case (strict mode: test() says rc 2 as soon as a
 * socket failed): the receive fails (a bad header breaks the whole comm:
 * test_sock_hostile.c), at the latest once the forger is gone, and the
 * comm's error names the fault. */
enum { BAD_MAGIC, BAD_SIZES, BAD_SEQUENCE, BAD_OFFSET };
static void forged_bad(int kind, const char *why) {
  forge_t f;
  forge_open(&f, 1);
  unsigned char src[8192], buf[8192], buf1[128];
  tu_fill(src, sizeof(src), 3, 0);
  void *r0 = forge_recv(&f, buf, sizeof(buf));
  switch (kind) {
  case BAD_MAGIC: {
    uint8_t junk[TPX_WIRE_PART_BYTES];
    memset(junk, 0x5a, sizeof(junk));
    ts_send_all(f.fd[1], junk, sizeof(junk));
    break;
  }
  case BAD_SIZES: /* two parts of message 0 that disagree on its size */
    forge_part(&f, 1, 0, 8192, 0, src, 4096);
    forge_part(&f, 2, 0, 8000, 4096, src + 4096, 3904);
    break;
  case BAD_SEQUENCE: /* message 1, then message 0 on the same socket */
    (void)forge_recv(&f, buf1, sizeof(buf1));
    forge_part(&f, 1, 1, 100, 0, src, 100);
    forge_part(&f, 1, 0, 100, 0, src, 100);
    break;
  case BAD_OFFSET: /* a part not on a 4 KiB boundary */
    forge_part(&f, 1, 0, 8192, 100, src, 4096);
    break;
  }
  int rc = ts_wait(f.net, r0, NULL); /* rc 2: the socket failed, or the receive already did */
  assert_true(rc == TPX_ESYSTEM || (rc < 0 && rc != TPX_ETIMEDOUT));
  for (int i = 0; i <= FORGE_NSOCKS; i++) {
    close(f.fd[i]);
    f.fd[i] = -1;
  }
  if (rc == TPX_ESYSTEM) rc = ts_wait(f.net, r0, NULL);
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  while (rc == TPX_ESYSTEM && tpx__now_ns() < end) /* rc 2 until every socket ended */
    rc = ts_wait(f.net, r0, NULL);
  assert_true(rc < 0 && rc != TPX_ETIMEDOUT && rc != TPX_ESYSTEM);
  if (strstr(tpx_last_error(), why) == NULL)
    fail_msg("error '%s' does not mention '%s'", tpx_last_error(), why);
  forge_close(&f);
}

static void test_forged_bad(void **state) {
  (void)state;
  forged_bad(BAD_MAGIC, "bad part header (magic");
  forged_bad(BAD_SIZES, "size differs");
  forged_bad(BAD_SEQUENCE, "bad part header (sequence");
  forged_bad(BAD_OFFSET, "bad part header (range");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_split_policy),
      cmocka_unit_test_setup_teardown(test_late_receives, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_all_sockets_end, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_forged_order, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_forged_bad, tu_fd_setup, tu_fd_teardown),
      cmocka_unit_test_setup_teardown(test_lost_receive, tu_fd_setup, tu_fd_teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
