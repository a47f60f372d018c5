/* Built-in transport, receive side against a lying peer (issue 10, item 1:
 * "a data plane that cannot be lied to"). A forged connector (raw sockets,
 * valid hellos) sends part headers our sender never would; each test names
 * the attack it replays. Expected every time: the receive never completes as
 * a success, it fails with a named reason (TPX_EPROTO for a header that
 * breaks the rules, the peer's close otherwise), and nothing is written into
 * its buffer once the failure is reported: the buffer is freed right then
 * (under ASan a later write is a heap-use-after-free) or, without ASan,
 * filled with a canary that must survive the rest of the attack's bytes.
 * Plus the honest cases: parts over every socket in any order, and a real
 * multi-socket pair, every byte checked.
 *
 * Deterministic: where the outcome would depend on which socket's thread
 * reads first, the test waits (white box, bounded) until the receiver has
 * claimed the first part before it sends the next one. */
#define _GNU_SOURCE
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

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_ASAN 1
#endif
#endif
#ifndef HAVE_ASAN
#define HAVE_ASAN 0
#endif

#define NSOCKS 2 /* data sockets: 3 sockets in all */
#define CANARY 0xA5

enum { MODE_PLAIN, MODE_STRICT, MODE_UNPACK };

typedef struct forge {
  tpx_net_t *net;
  void *lc, *r;
  tpx_net_dev_handle_t *dev; /* unpack mode: accept fills it */
  int fd[NSOCKS + 1];
} forge_t;

/* NSOCKS + 1 raw sockets with valid hellos, accepted as one recv comm. */
static void forge_open(forge_t *f, int mode) {
  memset(f, 0, sizeof(*f));
  tpx_config_t cfg;
  ts_cfg(&cfg, mode == MODE_STRICT, NSOCKS, 2);
  cfg.sock_unpack = mode == MODE_UNPACK;
  f->net = ts_open_cfg(&cfg);
  if (mode == MODE_UNPACK) {
    f->dev = calloc(1, sizeof(*f->dev));
    assert_non_null(f->dev);
  }
  f->r = ts_forge_accept(f->net, NSOCKS, f->fd, 0xbad5eed, f->dev, &f->lc);
}

static void forge_hdr(forge_t *f, int sock, uint64_t seq, uint64_t size, uint64_t off,
                      uint64_t len) {
  uint8_t hdr[TPX_WIRE_PART_BYTES];
  tpx__wire_part_encode(hdr, seq, size, off, len);
  ts_send_all(f->fd[sock], hdr, sizeof(hdr));
}

static void forge_part(forge_t *f, int sock, uint64_t seq, uint64_t size, uint64_t off,
                       const unsigned char *bytes, uint64_t len) {
  forge_hdr(f, sock, seq, size, off, len);
  if (len) ts_send_all(f->fd[sock], bytes, (size_t)len);
}

static void *forge_recv(forge_t *f, void *buf, size_t cap) {
  void *d[1] = {buf}, *req = NULL;
  size_t n[1] = {cap};
  int tag[1] = {0};
  int rc = f->net->ops->irecv(f->net, f->r, 1, d, n, tag, NULL, &req);
  if (rc != 0) fail_msg("irecv: %d %s", rc, tpx_last_error());
  assert_non_null(req);
  return req;
}

static void forge_close_sock(forge_t *f, int sock) {
  if (f->fd[sock] >= 0) close(f->fd[sock]);
  f->fd[sock] = -1;
}

static void forge_close(forge_t *f) {
  for (int i = 0; i <= NSOCKS; i++)
    forge_close_sock(f, i);
  assert_int_equal(f->net->ops->close_recv(f->net, f->r), 0);
  assert_int_equal(f->net->ops->close_listen(f->net, f->lc), 0);
  f->net->ops->destroy(f->net);
  free(f->dev);
}

/* White box: the recv comm behind the handle. */
static tpx_sock_comm_t *forge_comm(forge_t *f) {
  tpx_sock_net_t *sn = f->net->impl;
  tpx_sock_comm_t *m = tpx__sock_reg_get(&sn->reg, (uint64_t)(uintptr_t)f->r, TPX_SK_RECV, NULL);
  assert_non_null(m);
  return m;
}

/* Wait (bounded) until receive `seq` has at least `nparts` parts claimed
 * and, when `left` is not UINT64_MAX, exactly `left` bytes outstanding
 * (parts wholly read). */
static void wait_claimed(forge_t *f, uint64_t seq, uint32_t nparts, uint64_t left) {
  tpx_sock_comm_t *m = forge_comm(f);
  tpx_sock_req_t *r = &m->reqs[seq % TPX_SOCK_RING];
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  for (;;) {
    pthread_mutex_lock(&m->rx_mu);
    int ok = r->rx_seq == seq && r->rx_nparts >= nparts &&
             (left == UINT64_MAX || atomic_load(&r->pending) == left);
    pthread_mutex_unlock(&m->rx_mu);
    if (ok) return;
    if (tpx__now_ns() > end)
      fail_msg("receive %llu: %u parts never claimed", (unsigned long long)seq, nparts);
    usleep(1000);
  }
}

/* test() until done or a final error (strict/unpack: rc 2 with done 0 means
 * "peer closed, not finished yet"). TPX_ETIMEDOUT when neither came. */
static int wait_req(tpx_net_t *net, void *req, int *done, size_t *size) {
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  for (;;) {
    *done = 0;
    int rc = net->ops->test(net, req, done, size);
    if (*done || (rc != 0 && rc != TPX_ESYSTEM)) return rc;
    if (tpx__now_ns() > end) return TPX_ETIMEDOUT;
    usleep(200);
  }
}

/* How a receive ended: test()'s last rc, done, size and error text. */
typedef struct outcome {
  int rc, done;
  size_t size;
  char err[512];
} outcome_t;

static outcome_t wait_outcome(tpx_net_t *net, void *req) {
  outcome_t o;
  memset(&o, 0, sizeof(o));
  o.rc = wait_req(net, req, &o.done, &o.size);
  snprintf(o.err, sizeof(o.err), "%s", tpx_last_error());
  return o;
}

/* The receive failed (never done) with `code` (0: any error but a timeout)
 * and an error naming every string in `why` (NULL-terminated). */
static void check_failed(const outcome_t *o, int code, const char *const *why) {
  if (o->done) fail_msg("receive reported done (rc %d, %zu bytes): it must fail", o->rc, o->size);
  if (o->rc == 0 || o->rc == TPX_ETIMEDOUT || (code != 0 && o->rc != code))
    fail_msg("receive: rc %d (%s), expected failure %d", o->rc, o->err, code);
  for (; why && *why; why++)
    if (strstr(o->err, *why) == NULL) fail_msg("error '%s' does not mention '%s'", o->err, *why);
}

static void expect_fail(tpx_net_t *net, void *req, int code, const char *const *why) {
  outcome_t o = wait_outcome(net, req);
  check_failed(&o, code, why);
}

/* For `ms`: test() says not done, with no error. */
static void expect_pending(tpx_net_t *net, void *req, int ms) {
  uint64_t end = tpx__now_ns() + (uint64_t)ms * 1000000ull;
  while (tpx__now_ns() < end) {
    int done = 0;
    int rc = net->ops->test(net, req, &done, NULL);
    if (done || rc != 0)
      fail_msg("receive ended early: done %d, rc %d (%s)", done, rc, tpx_last_error());
    usleep(1000);
  }
}

/* The owner is done with a buffer whose receive was reported: under ASan it
 * is freed (a later write is a use after free), otherwise it gets a canary
 * that buf_check verifies after the rest of the attack. Returns what to
 * hand to buf_check. */
static unsigned char *buf_release(unsigned char *buf, size_t n) {
  if (HAVE_ASAN) {
    free(buf);
    return NULL;
  }
  memset(buf, CANARY, n);
  return buf;
}

static void buf_check(unsigned char *buf, size_t n) {
  if (buf == NULL) return;
  for (size_t i = 0; i < n; i++)
    if (buf[i] != CANARY) fail_msg("byte %zu written after the receive was reported", i);
  free(buf);
}

/* Give a thread that would still write (the bug) time to do it. */
static void settle(void) {
  usleep(50000);
}

/* The comm is broken: a receive posted now fails at once, with TPX_EPROTO. */
static void expect_comm_broken(forge_t *f) {
  unsigned char b[64];
  void *r = forge_recv(f, b, sizeof(b));
  static const char *const why[] = {"bad part header", NULL};
  expect_fail(f->net, r, TPX_EPROTO, why);
}

/* ---- overlapping parts: the use after free ------------------------------------------------- */

/* Socket 1: message 0 (4096 bytes) as one part [0, 4096), then only 2048 of
 * its bytes; socket 0: the same header with all 4096 bytes. Before: socket 0's
 * part made the lengths add up, the receive was reported done while socket 1
 * was still reading, and its last 2048 bytes landed in the freed buffer
 * (ASan: heap-use-after-free WRITE in recv_progress). Now the second header
 * overlaps a claimed part: TPX_EPROTO, the receive fails (socket 1 drops its
 * part), and the rest of socket 1's bytes go nowhere. */
static void overlap_attack(int mode) {
  forge_t f;
  forge_open(&f, mode);
  unsigned char src[4096];
  tu_fill(src, sizeof(src), 1, 0);
  unsigned char *buf = malloc(4096);
  assert_non_null(buf);
  memset(buf, 0xEE, 4096);
  void *r0 = forge_recv(&f, buf, 4096);
  forge_hdr(&f, 1, 0, 4096, 0, 4096);
  ts_send_all(f.fd[1], src, 2048);
  wait_claimed(&f, 0, 1, UINT64_MAX);
  usleep(20000); /* let socket 1 read its 2048 bytes (not needed for the outcome) */
  unsigned char *bounce = NULL, *bounce_copy = NULL;
  size_t bounce_bytes = 0;
  forge_part(&f, 0, 0, 4096, 0, src, 4096);
  /* Whatever the receive's end (before: reported done), the owner frees
   * the buffer at once; the verdict comes after the rest of the attack. */
  outcome_t o = wait_outcome(f.net, r0);
  buf = buf_release(buf, 4096);
  if (mode == MODE_UNPACK) {
    /* The bytes would go to bounce pages (released with the receive). */
    tpx_sock_comm_t *m = forge_comm(&f);
    bounce = (unsigned char *)m->upk->bounce;
    bounce_bytes = m->upk->bounce_bytes;
    bounce_copy = malloc(bounce_bytes);
    assert_non_null(bounce_copy);
    memcpy(bounce_copy, bounce, bounce_bytes);
  }
  /* The rest of the attack: socket 1's other half, and more. */
  ts_send_all(f.fd[1], src + 2048, 2048);
  forge_part(&f, 2, 0, 4096, 0, src, 4096);
  settle();
  buf_check(buf, 4096);
  if (bounce_copy) {
    assert_memory_equal(bounce, bounce_copy, bounce_bytes);
    free(bounce_copy);
  }
  static const char *const why[] = {"overlaps an earlier part", "socket 0", "seq 0", "offset 0",
                                    "length 4096", "peer 127.0.0.1", NULL};
  check_failed(&o, TPX_EPROTO, why);
  expect_comm_broken(&f);
  forge_close(&f);
}

static void test_attack_overlapping_parts_uaf(void **state) {
  (void)state;
  overlap_attack(MODE_PLAIN);
}

static void test_attack_overlapping_parts_strict(void **state) {
  (void)state;
  overlap_attack(MODE_STRICT);
}

static void test_attack_overlapping_parts_unpack(void **state) {
  (void)state;
  overlap_attack(MODE_UNPACK);
}

/* Overlap that is not a copy: message 0 of 3 pages, [0, 8192) on socket 1
 * (wholly read), then [4096, 12288) on socket 2. */
static void test_attack_overlapping_tail(void **state) {
  (void)state;
  forge_t f;
  forge_open(&f, MODE_PLAIN);
  unsigned char src[12288], buf[12288];
  tu_fill(src, sizeof(src), 2, 0);
  void *r0 = forge_recv(&f, buf, sizeof(buf));
  forge_part(&f, 1, 0, 12288, 0, src, 8192);
  wait_claimed(&f, 0, 1, 4096);
  forge_part(&f, 2, 0, 12288, 4096, src + 4096, 8192);
  static const char *const why[] = {"overlaps an earlier part", "socket 2", "offset 4096",
                                    "length 8192", NULL};
  expect_fail(f.net, r0, TPX_EPROTO, why);
  expect_comm_broken(&f);
  forge_close(&f);
}

/* ---- short parts: success for bytes never sent ---------------------------------------------- */

/* Message 0 of 4096 bytes, one part that declares 100 of them. The receive
 * must not complete; once the peer is gone it fails. */
static void test_attack_short_part(void **state) {
  (void)state;
  forge_t f;
  forge_open(&f, MODE_PLAIN);
  unsigned char src[4096], buf[4096];
  tu_fill(src, sizeof(src), 3, 0);
  void *r0 = forge_recv(&f, buf, sizeof(buf));
  forge_part(&f, 1, 0, 4096, 0, src, 100);
  wait_claimed(&f, 0, 1, 3996);
  expect_pending(f.net, r0, 200);
  for (int i = 0; i <= NSOCKS; i++)
    forge_close_sock(&f, i);
  expect_fail(f.net, r0, 0, NULL);
  forge_close(&f);
}

/* The same lie over every socket: 12288 bytes announced, parts of 100,
 * 4096 and 4096 bytes on the three sockets. A socket brings at most one part
 * of a message, so once all three came the message can never be covered:
 * TPX_EPROTO at once, whatever order the parts are read in. */
static void test_attack_short_parts_every_socket(void **state) {
  (void)state;
  forge_t f;
  forge_open(&f, MODE_PLAIN);
  unsigned char src[12288], buf[12288];
  tu_fill(src, sizeof(src), 4, 0);
  void *r0 = forge_recv(&f, buf, sizeof(buf));
  forge_part(&f, 0, 0, 12288, 0, src, 100);
  forge_part(&f, 1, 0, 12288, 4096, src + 4096, 4096);
  forge_part(&f, 2, 0, 12288, 8192, src + 8192, 4096);
  static const char *const why[] = {"parts cannot cover the message", NULL};
  expect_fail(f.net, r0, TPX_EPROTO, why);
  expect_comm_broken(&f);
  forge_close(&f);
}

/* Not an attack on the transport, but what a caller must check: a message
 * of 100 bytes into a receive of 4096 completes with size 100 (the message
 * is what the peer sent), never as 4096. */
static void test_short_message_reports_its_size(void **state) {
  (void)state;
  forge_t f;
  forge_open(&f, MODE_PLAIN);
  unsigned char src[100], buf[4096];
  tu_fill(src, sizeof(src), 5, 0);
  void *r0 = forge_recv(&f, buf, sizeof(buf));
  forge_part(&f, 0, 0, 100, 0, src, 100);
  int done = 0;
  size_t size = 0;
  assert_int_equal(wait_req(f.net, r0, &done, &size), 0);
  assert_true(done);
  assert_int_equal(size, 100);
  assert_int_equal(tu_check(buf, 100, 5, 0), SIZE_MAX);
  forge_close(&f);
}

/* ---- headers out of range ------------------------------------------------------------------- */

static void bad_range(uint64_t size, uint64_t off, uint64_t len, const char *why) {
  forge_t f;
  forge_open(&f, MODE_PLAIN);
  unsigned char buf[8192];
  void *r0 = forge_recv(&f, buf, sizeof(buf));
  forge_hdr(&f, 1, 0, size, off, len);
  const char *const w[] = {why, "socket 1", NULL};
  expect_fail(f.net, r0, TPX_EPROTO, w);
  expect_comm_broken(&f);
  forge_close(&f);
}

static void test_attack_part_beyond_size(void **state) {
  (void)state;
  bad_range(4096, 4096, 4096, "offset + length beyond the size");
  bad_range(4096, 0, 8192, "offset + length beyond the size");
  bad_range(4096, UINT64_MAX - 4095, 8192, "offset + length beyond the size"); /* wraps */
  bad_range(8192, 4096, UINT64_MAX - 100, "offset + length beyond the size");  /* wraps */
  bad_range(1ull << 41, 0, 4096, "size above the largest message");
  bad_range(4096, 0, 0, "empty part of a non-empty message");
  bad_range(8192, 100, 4096, "offset not a multiple of 4 KiB");
}

/* ---- duplicates and stale parts -------------------------------------------------------------- */

/* Message 0 of 8192 bytes: [0, 4096) on socket 1, wholly read, then the
 * same part again on socket 2 (the lengths would add up to the size). */
static void test_attack_duplicate_part(void **state) {
  (void)state;
  forge_t f;
  forge_open(&f, MODE_PLAIN);
  unsigned char src[8192], buf[8192];
  tu_fill(src, sizeof(src), 6, 0);
  void *r0 = forge_recv(&f, buf, sizeof(buf));
  forge_part(&f, 1, 0, 8192, 0, src, 4096);
  wait_claimed(&f, 0, 1, 4096);
  forge_part(&f, 2, 0, 8192, 0, src, 4096);
  static const char *const why[] = {"overlaps an earlier part", "socket 2", NULL};
  expect_fail(f.net, r0, TPX_EPROTO, why);
  expect_comm_broken(&f);
  forge_close(&f);
}

/* Message 0 completes (every byte checked) and its buffer goes back to the
 * owner; then a copy of its part comes on another socket. The comm fails;
 * the buffer is never written again. */
static void test_attack_duplicate_after_complete(void **state) {
  (void)state;
  forge_t f;
  forge_open(&f, MODE_PLAIN);
  unsigned char src[4096];
  tu_fill(src, sizeof(src), 7, 0);
  unsigned char *buf = malloc(4096);
  assert_non_null(buf);
  void *r0 = forge_recv(&f, buf, 4096);
  forge_part(&f, 1, 0, 4096, 0, src, 4096);
  int done = 0;
  size_t size = 0;
  assert_int_equal(wait_req(f.net, r0, &done, &size), 0);
  assert_true(done);
  assert_int_equal(size, 4096);
  assert_int_equal(tu_check(buf, 4096, 7, 0), SIZE_MAX);
  buf = buf_release(buf, 4096);
  forge_part(&f, 2, 0, 4096, 0, src, 4096);
  settle();
  buf_check(buf, 4096);
  static const char *const why[] = {"part of a message already complete", "socket 2", NULL};
  unsigned char b1[64];
  expect_fail(f.net, forge_recv(&f, b1, sizeof(b1)), TPX_EPROTO, why);
  forge_close(&f);
}

/* A part of a message whose ring slot was reused: 65 small messages on
 * socket 0 (slot 0 now belongs to receive 64), then a part of message 0 as
 * the first part on socket 1. */
#define STALE_N (TPX_SOCK_RING + 1)
static void test_attack_stale_seq(void **state) {
  (void)state;
  forge_t f;
  forge_open(&f, MODE_PLAIN);
  unsigned char src[64], buf[64];
  tu_fill(src, sizeof(src), 8, 0);
  for (int k = 0; k < STALE_N; k++) {
    void *r = forge_recv(&f, buf, sizeof(buf));
    forge_part(&f, 0, (uint64_t)k, 64, 0, src, 64);
    int done = 0;
    size_t size = 0;
    assert_int_equal(wait_req(f.net, r, &done, &size), 0);
    assert_true(done);
    assert_int_equal(size, 64);
  }
  memset(buf, CANARY, sizeof(buf));
  void *r = forge_recv(&f, buf, sizeof(buf)); /* receive 65: slot 1 */
  forge_part(&f, 1, 0, 64, 0, src, 64);
  static const char *const why[] = {"part of a message already complete", "socket 1", NULL};
  expect_fail(f.net, r, TPX_EPROTO, why);
  for (size_t i = 0; i < sizeof(buf); i++)
    assert_int_equal(buf[i], CANARY);
  forge_close(&f);
}

/* ---- parts that disagree on the size ----------------------------------------------------------
 */

static void test_attack_different_total_size(void **state) {
  (void)state;
  forge_t f;
  forge_open(&f, MODE_PLAIN);
  unsigned char src[12288], buf[12288];
  tu_fill(src, sizeof(src), 9, 0);
  void *r0 = forge_recv(&f, buf, sizeof(buf));
  forge_part(&f, 1, 0, 8192, 0, src, 4096);
  wait_claimed(&f, 0, 1, UINT64_MAX);
  forge_part(&f, 2, 0, 12288, 4096, src + 4096, 4096);
  static const char *const why[] = {"size differs from an earlier part", "socket 2", "size 12288",
                                    NULL};
  expect_fail(f.net, r0, TPX_EPROTO, why);
  expect_comm_broken(&f);
  forge_close(&f);
}

/* ---- bytes cut off by the sender closing ----------------------------------------------------- */

/* Half a part, then socket 1 closes (the other sockets stay open): the
 * receive fails at once (not done), and nothing more is written. With a
 * smaller receive (the message is truncated) the same: a failure, not
 * "done, truncated". And a close inside a part header. */
static void cut_attack(size_t cap) {
  forge_t f;
  forge_open(&f, MODE_PLAIN);
  unsigned char src[4096];
  tu_fill(src, sizeof(src), 10, 0);
  unsigned char *buf = malloc(cap);
  assert_non_null(buf);
  void *r0 = forge_recv(&f, buf, cap);
  forge_hdr(&f, 1, 0, 4096, 0, 4096);
  ts_send_all(f.fd[1], src, 1024);
  wait_claimed(&f, 0, 1, UINT64_MAX);
  forge_close_sock(&f, 1);
  outcome_t o = wait_outcome(f.net, r0);
  buf = buf_release(buf, cap);
  settle();
  buf_check(buf, cap);
  static const char *const why[] = {"closed by peer", "socket 1", NULL};
  check_failed(&o, TPX_EREMOTE, why);
  forge_close(&f);
}

static void test_attack_part_cut_by_close(void **state) {
  (void)state;
  cut_attack(4096);
  cut_attack(2048); /* truncated receive */
}

static void test_attack_header_cut_by_close(void **state) {
  (void)state;
  forge_t f;
  forge_open(&f, MODE_PLAIN);
  unsigned char buf[4096];
  void *r0 = forge_recv(&f, buf, sizeof(buf));
  uint8_t hdr[TPX_WIRE_PART_BYTES];
  tpx__wire_part_encode(hdr, 0, 4096, 0, 4096);
  ts_send_all(f.fd[1], hdr, 16);
  usleep(20000);
  for (int i = 0; i <= NSOCKS; i++)
    forge_close_sock(&f, i);
  expect_fail(f.net, r0, 0, NULL);
  forge_close(&f);
}

/* ---- junk before the comm is even accepted -----------------------------------------------------
 */

/* Bad part headers right behind the hellos: the first socket attached may
 * break the comm before the others are; the comm still ends cleanly and every
 * receive fails. */
static void test_attack_junk_at_accept(void **state) {
  (void)state;
  forge_t f;
  memset(&f, 0, sizeof(f));
  tpx_config_t cfg;
  ts_cfg(&cfg, 0, NSOCKS, 2);
  f.net = ts_open_cfg(&cfg);
  unsigned char h[TPX_NET_HANDLE_BYTES];
  memset(h, 0, sizeof(h));
  assert_int_equal(f.net->ops->listen(f.net, 0, h, &f.lc), 0);
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  memcpy(&a.sin_addr, h + TPX_WH_ADDR, 4);
  memcpy(&a.sin_port, h + TPX_WH_PORT, 2);
  for (int i = 0; i <= NSOCKS; i++) {
    f.fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(f.fd[i] >= 0);
    assert_int_equal(connect(f.fd[i], (struct sockaddr *)&a, sizeof(a)), 0);
    uint8_t msg[TPX_WIRE_HELLO_BYTES + TPX_WIRE_PART_BYTES];
    memset(msg, 0x5a, sizeof(msg));
    tpx__put32(msg, TPX_WIRE_HELLO_MAGIC);
    tpx__put16(msg + 4, TPX_WIRE_VERSION);
    tpx__put16(msg + 6, TPX_WIRE_HELLO_BYTES);
    tpx__put64(msg + 8, tpx__get64(h + TPX_WH_NONCE));
    tpx__put64(msg + 16, 0x7a7a);
    tpx__put16(msg + 24, (uint16_t)i);
    tpx__put16(msg + 26, NSOCKS);
    memset(msg + 28, 0, TPX_WIRE_HELLO_BYTES - 28);
    ts_send_all(f.fd[i], msg, sizeof(msg));
  }
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  while (f.r == NULL && tpx__now_ns() < end)
    assert_int_equal(f.net->ops->accept(f.net, f.lc, &f.r, NULL), 0);
  assert_non_null(f.r);
  static const char *const why[] = {"bad part header (magic", NULL};
  unsigned char b[64];
  expect_fail(f.net, forge_recv(&f, b, sizeof(b)), TPX_EPROTO, why);
  forge_close(&f);
}

/* ---- honest peers ------------------------------------------------------------------------------
 */

/* A message cut in three parts over all three sockets, sent last part
 * first; one in two parts; an empty one; a small one on a data socket. */
static void test_legit_forged_multisocket(void **state) {
  (void)state;
  forge_t f;
  forge_open(&f, MODE_PLAIN);
  const size_t n0 = 10000, n1 = 300000, half = 151552; /* 37 pages */
  unsigned char *src = malloc(n1), *b0 = malloc(n0), *b1 = malloc(n1), b3[100];
  assert_non_null(src);
  assert_non_null(b0);
  assert_non_null(b1);
  tu_fill(src, n1, 11, 0);
  memset(b0, 0xEE, n0);
  memset(b1, 0xEE, n1);
  void *r0 = forge_recv(&f, b0, n0), *r1 = forge_recv(&f, b1, n1), *r2 = forge_recv(&f, b3, 0),
       *r3 = forge_recv(&f, b3, sizeof(b3));
  forge_part(&f, 2, 0, n0, 8192, src + 8192, n0 - 8192);
  forge_part(&f, 0, 0, n0, 0, src, 4096);
  forge_part(&f, 1, 0, n0, 4096, src + 4096, 4096);
  forge_part(&f, 1, 1, n1, half, src + half, n1 - half);
  forge_part(&f, 2, 1, n1, 0, src, half);
  forge_part(&f, 0, 2, 0, 0, NULL, 0);
  forge_part(&f, 2, 3, 100, 0, src, 100);
  int done = 0;
  size_t got = 0;
  assert_int_equal(wait_req(f.net, r0, &done, &got), 0);
  assert_true(done);
  assert_int_equal(got, n0);
  assert_int_equal(tu_check(b0, n0, 11, 0), SIZE_MAX);
  assert_int_equal(wait_req(f.net, r1, &done, &got), 0);
  assert_true(done);
  assert_int_equal(got, n1);
  assert_int_equal(tu_check(b1, n1, 11, 0), SIZE_MAX);
  assert_int_equal(wait_req(f.net, r2, &done, &got), 0);
  assert_true(done);
  assert_int_equal(got, 0);
  assert_int_equal(wait_req(f.net, r3, &done, &got), 0);
  assert_true(done);
  assert_int_equal(got, 100);
  assert_int_equal(tu_check(b3, 100, 11, 0), SIZE_MAX);
  forge_close(&f);
  free(src);
  free(b0);
  free(b1);
}

/* Our own sender over 4 data sockets: sizes that go whole on socket 0, cut
 * into 1..4 parts, and several messages in flight (cut, then whole once every
 * data socket has work). Every byte checked. */
#define LEGIT_N 12
static void test_legit_multisocket_pair(void **state) {
  (void)state;
  tpx_net_t *net = ts_open(0, 4, 2);
  void *s, *r;
  ts_pair(net, &s, &r);
  const size_t one[] = {
      0, 1, TPX_SOCK_INLINE_MAX, TPX_SOCK_INLINE_MAX + 1, 100000, 1u << 20, 3000001, 8u << 20};
  for (size_t i = 0; i < sizeof(one) / sizeof(one[0]); i++)
    ts_xfer(net, s, r, one[i], one[i], (uint32_t)i + 100);
  unsigned char *sb[LEGIT_N], *rb[LEGIT_N];
  void *sreq[LEGIT_N], *rreq[LEGIT_N];
  for (int k = 0; k < LEGIT_N; k++) {
    size_t n = (size_t)(k + 1) * 300007;
    sb[k] = malloc(n);
    rb[k] = malloc(n);
    assert_non_null(sb[k]);
    assert_non_null(rb[k]);
    tu_fill(sb[k], n, (uint32_t)k + 200, 0);
    memset(rb[k], 0xEE, n);
    void *d[1] = {rb[k]};
    size_t cap[1] = {n};
    int tag[1] = {0};
    assert_int_equal(net->ops->irecv(net, r, 1, d, cap, tag, NULL, &rreq[k]), 0);
    assert_int_equal(net->ops->isend(net, s, sb[k], n, 0, NULL, &sreq[k]), 0);
    assert_non_null(rreq[k]);
    assert_non_null(sreq[k]);
  }
  for (int k = 0; k < LEGIT_N; k++) {
    size_t n = (size_t)(k + 1) * 300007, got = 0;
    assert_int_equal(ts_wait(net, rreq[k], &got), 0);
    assert_int_equal(got, n);
    assert_int_equal(tu_check(rb[k], n, (uint32_t)k + 200, 0), SIZE_MAX);
    assert_int_equal(ts_wait(net, sreq[k], NULL), 0);
    free(sb[k]);
    free(rb[k]);
  }
  ts_close_pair(net, s, r);
}

int main(void) {
#define T(f) cmocka_unit_test_setup_teardown(f, tu_fd_setup, tu_fd_teardown)
  const struct CMUnitTest tests[] = {
      T(test_attack_overlapping_parts_uaf),
      T(test_attack_overlapping_parts_strict),
      T(test_attack_overlapping_parts_unpack),
      T(test_attack_overlapping_tail),
      T(test_attack_short_part),
      T(test_attack_short_parts_every_socket),
      T(test_short_message_reports_its_size),
      T(test_attack_part_beyond_size),
      T(test_attack_duplicate_part),
      T(test_attack_duplicate_after_complete),
      T(test_attack_stale_seq),
      T(test_attack_different_total_size),
      T(test_attack_part_cut_by_close),
      T(test_attack_header_cut_by_close),
      T(test_attack_junk_at_accept),
      T(test_legit_forged_multisocket),
      T(test_legit_multisocket_pair),
  };
#undef T
  return cmocka_run_group_tests(tests, NULL, NULL);
}
