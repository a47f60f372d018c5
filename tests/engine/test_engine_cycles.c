/* 1,005 connect / transfer / disconnect cycles between two endpoints: each
 * cycle connects a fresh peer pair, moves a write (with its notification), a
 * read and a send/recv, checks every byte, and closes both sides. After the
 * first 100 cycles the fds and threads the process holds must stay flat to
 * the end, and RSS must not grow in both halves of the rest: nothing a
 * peer's life takes may stay behind. (A leak grows RSS cycle after cycle;
 * glibc's allocator also takes one-time steps of 8-16 MiB at moments that
 * depend on the allocation history, when it raises its mmap threshold or
 * grows a thread's arena, as the unpack mode's 8 MiB bounce buffers and the
 * I/O threads of each cycle's comms come and go. One half may take a step;
 * a leak of 4 KiB per cycle shows in both.) */
#include <stdlib.h>
#include <string.h>

#include "eng.h"

/* Sanitizer runtimes keep freed memory (ASan's quarantine) and shadow pages:
 * RSS is only flat in a plain build, where the 1,005 cycles run; the
 * sanitizer builds (a cycle costs several to tens of times more there)
 * check fds and threads over fewer. */
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define CYCLES 205
#define RSS_SLACK_KB (1L << 30)
#else
#define CYCLES 1005
#define RSS_SLACK_KB (2L << 10) /* per half: 4 KiB per cycle would be 1.8 MiB */
#endif
#define WARM 100
#define LEN (48 * 1024 + 123) /* several chunks on both channels */

struct side {
  tpx_endpoint_t *ep;
  eng_buf_t buf;
};

static void open_side(struct side *s, const tpx_config_t *cfg, const char *name) {
  s->ep = eng_ep_open(cfg, name);
  eng_buf(s->ep, 4 * LEN, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &s->buf);
}

/* One cycle: a fresh pair, three transfers checked, both sides closed. */
static void cycle(struct side *a, struct side *b, int i) {
  tpx_peer_t *ab, *ba;
  eng_connect(a->ep, b->ep, &ab, &ba);
  uint8_t *pa = a->buf.p, *pb = b->buf.p;
  tu_fill(pa, LEN, (uint32_t)i, 0);           /* A's bytes for the write and the send */
  tu_fill(pb + LEN, LEN, (uint32_t)i + 7, 0); /* B's bytes for the read */
  tpx_xfer_t *w, *r, *s, *v;
  assert_int_equal(tpx_write(ab, a->buf.mem, 0, b->buf.rmem, 0, LEN, &i, sizeof(i), &w), 0);
  tpx_iov_t rv = {a->buf.mem, LEN, b->buf.rmem, LEN, LEN};
  int j = -i - 1;
  assert_int_equal(tpx_xfer_prep_read(ab, &rv, 1, &j, sizeof(j), &r), 0);
  assert_int_equal(tpx_xfer_post(r), 0);
  assert_int_equal(tpx_recv(ba, b->buf.mem, 2 * LEN, LEN, 3, &v), 0);
  assert_int_equal(tpx_send(ab, a->buf.mem, 0, LEN, 3, &s), 0);
  eng_wait(w, 0);
  eng_wait(r, 0);
  eng_wait(s, 0);
  eng_wait(v, 0);
  assert_int_equal(tpx_xfer_received(v), LEN);
  /* B's side of the write and of the read (its transport threads' use of
   * B's buffer) is published to this thread by their notifications, in
   * the order posted; the initiator's completion is not enough. */
  tpx_notif_t nt;
  assert_int_equal(tpx_wait_notif(b->ep, 10000, &nt), 1);
  assert_memory_equal(nt.msg, &i, sizeof(i));
  assert_int_equal(tpx_wait_notif(b->ep, 10000, &nt), 1);
  assert_memory_equal(nt.msg, &j, sizeof(j));
  size_t bad;
  if ((bad = tu_check(pb, LEN, (uint32_t)i, 0)) != SIZE_MAX)
    fail_msg("cycle %d: write byte %zu", i, bad);
  if ((bad = tu_check(pa + LEN, LEN, (uint32_t)i + 7, 0)) != SIZE_MAX)
    fail_msg("cycle %d: read byte %zu", i, bad);
  if ((bad = tu_check(pb + 2 * LEN, LEN, (uint32_t)i, 0)) != SIZE_MAX)
    fail_msg("cycle %d: recv byte %zu", i, bad);
  tpx_xfer_free(w);
  tpx_xfer_free(r);
  tpx_xfer_free(s);
  tpx_xfer_free(v);
  tpx_peer_close(ab);
  tpx_peer_close(ba);
}

static void test_cycles(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  cfg.num_channels = 2;
  cfg.chunk_bytes = 16 * 1024;
  cfg.inline_bytes = 0; /* every byte through the transport's comms */
  struct side a, b;
  open_side(&a, &cfg, "A");
  open_side(&b, &cfg, "B");
  eng_res_t base = {0}, mid = {0}, end;
  int cycles = CYCLES; /* tests/engine/CMakeLists.txt runs fewer in some variants */
  const char *e = getenv("TPX_TEST_CYCLES");
  if (e && atoi(e) > WARM + 1 && atoi(e) < cycles) cycles = atoi(e);
  const int half = WARM + (cycles - WARM) / 2;
  for (int i = 0; i < cycles; i++) {
    if (i == WARM) eng_res_now(&base);
    if (i == half) eng_res_now(&mid);
    cycle(&a, &b, i);
  }
  eng_res_settled(&base, 1L << 30); /* fds and threads; RSS below */
  eng_res_now(&end);
  if (mid.rss_kb > base.rss_kb + RSS_SLACK_KB && end.rss_kb > mid.rss_kb + RSS_SLACK_KB)
    fail_msg("RSS grew in both halves: %ld -> %ld -> %ld KiB (cycles %d, %d, %d)", base.rss_kb, mid.rss_kb,
             end.rss_kb, WARM, half, cycles);
  print_message("%d cycles: fds %d -> %d, threads %d -> %d, RSS %ld -> %ld -> %ld KiB (after cycles %d, %d, "
                "at the end)\n",
                cycles, base.fds, end.fds, base.threads, end.threads, base.rss_kb, mid.rss_kb, end.rss_kb,
                WARM, half);
  eng_buf_free(&a.buf);
  eng_buf_free(&b.buf);
  tpx_endpoint_destroy(a.ep);
  tpx_endpoint_destroy(b.ep);
}

int main(void) {
  const struct CMUnitTest tests[] = {cmocka_unit_test(test_cycles)};
  return cmocka_run_group_tests(tests, NULL, NULL);
}
