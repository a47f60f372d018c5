/* Broken and hostile peers in another process (forked before this process
 * starts any thread of the test): a writer stopped mid-write while the
 * target deregisters the region it writes into, a peer that stops reading
 * its control connection, SIGKILL at connect and during a notified write.
 * Expected each time: the affected transfers fail with a clear error within
 * the deadline, nothing lands after it, fds and threads back to baseline. */
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "eng.h"
#include "engine/core.h"

#define BIG (128u << 20)
#define TIMEOUT_MS 1000
#define STALL_LIVENESS_MS 30000

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

enum child_role { WRITER, IDLE, CONNECTOR, OFFER };

struct child {
  pid_t pid;
  int to[2], from[2];
};

/* The peer process: connect to the port it is sent, then act its role. */
static void child_main(int rfd, int wfd, int role, int notif) {
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
  int port = 0;
  if (read(rfd, &port, sizeof(port)) != sizeof(port)) _exit(2);
  tpx_config_t cfg;
  eng_cfg(&cfg);
  cfg.chunk_bytes = 512 << 10;
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.no_listen = 1;
  p.name = "peer";
  tpx_endpoint_t *ep;
  if (tpx_endpoint_create(&p, &ep)) _exit(3);
  char c = 'c';
  if (role == CONNECTOR && write(wfd, &c, 1) != 1) _exit(4);
  tpx_peer_t *peer;
  if (tpx_connect(ep, "127.0.0.1", port, &peer)) _exit(5);
  if (role == OFFER) { /* a writable region for the parent, by notification */
    uint8_t *b = aligned_alloc(4096, BIG);
    if (!b) _exit(12);
    memset(b, 0, BIG);
    tpx_mem_desc_t d = {b, BIG, TPX_MEM_HOST, 0, TPX_ACCESS_WRITE};
    tpx_mem_t *m;
    uint8_t blob[TPX_MD_MAX];
    size_t bl;
    if (tpx_mem_register(ep, &d, &m) || tpx_mem_get_public_data(m, blob, sizeof(blob), &bl) ||
        tpx_notify(peer, blob, bl))
      _exit(13);
  }
  if (role == WRITER) {
    tpx_notif_t n;
    if (tpx_wait_notif(ep, 20000, &n) != 1) _exit(6);
    tpx_rmem_t *rm;
    if (tpx_load_remote_md(n.msg, n.len, &rm)) _exit(7);
    uint8_t *src = aligned_alloc(4096, BIG);
    if (!src) _exit(8);
    memset(src, 0x11, BIG);
    tpx_mem_desc_t d = {src, BIG, TPX_MEM_HOST, 0, 0};
    tpx_mem_t *m;
    if (tpx_mem_register(ep, &d, &m)) _exit(9);
    tpx_xfer_t *x;
    if (tpx_write(peer, m, 0, rm, 0, BIG, notif ? "landed" : NULL, notif ? 6 : 0, &x)) _exit(10);
  }
  c = 'w';
  if (role != CONNECTOR && write(wfd, &c, 1) != 1) _exit(11);
  for (;;) pause();
}

static void child_start(struct child *k, int role, int notif) {
  if (pipe(k->to) != 0 || pipe(k->from) != 0) fail_msg("pipe");
  k->pid = fork();
  assert_true(k->pid >= 0);
  if (k->pid == 0) {
    close(k->to[1]);
    close(k->from[0]);
    child_main(k->to[0], k->from[1], role, notif);
  }
  close(k->to[0]);
  close(k->from[1]);
}

static void child_go(struct child *k, int port) {
  assert_int_equal(write(k->to[1], &port, sizeof(port)), sizeof(port));
}

static char child_said(struct child *k) {
  char c = 0;
  if (read(k->from[0], &c, 1) != 1) fail_msg("child %d went away", (int)k->pid);
  return c;
}

static void child_end(struct child *k) {
  if (k->pid > 0) {
    kill(k->pid, SIGKILL);
    waitpid(k->pid, NULL, 0);
    k->pid = 0;
  }
  close(k->to[1]);
  close(k->from[0]);
}

/* peer_timeout_ms 0: the default */
static tpx_endpoint_t *target_liveness(tpx_config_t *cfg, int peer_timeout_ms) {
  eng_cfg(cfg);
  cfg->max_ctl_out_bytes = 1 << 20;
  cfg->timeout_ms = TIMEOUT_MS;
  cfg->connect_timeout_ms = TIMEOUT_MS;
  cfg->chunk_bytes = 512 << 10;
  if (peer_timeout_ms) cfg->peer_timeout_ms = peer_timeout_ms;
  return eng_ep_open(cfg, "target");
}

static tpx_endpoint_t *target(tpx_config_t *cfg) { return target_liveness(cfg, 0); }

/* Whether any byte of the page has landed yet: a peek (tu_peek), since the
 * transport may be writing it right now. */
static int page_landed(const uint8_t *pg) {
  uint8_t copy[4096];
  assert_int_equal(tu_peek(copy, pg, sizeof(copy)), 0);
  for (int i = 0; i < 4096; i++)
    if (copy[i]) return 1;
  return 0;
}

static uint8_t first_byte(const uint8_t *p) {
  uint8_t b = 0;
  assert_int_equal(tu_peek(&b, p, 1), 0);
  return b;
}

/* The target hands its region to the writer and waits for the first byte. */
static tpx_peer_t *offer_region(tpx_endpoint_t *ep, struct child *k, uint8_t *dst, tpx_mem_t **m) {
  child_go(k, tpx_endpoint_port(ep));
  tpx_peer_t *peer;
  assert_int_equal(tpx_accept(ep, 20000, &peer), 0);
  tpx_mem_desc_t d = {dst, BIG, TPX_MEM_HOST, 0, TPX_ACCESS_WRITE};
  assert_int_equal(tpx_mem_register(ep, &d, m), 0);
  uint8_t blob[TPX_MD_MAX];
  size_t bl;
  assert_int_equal(tpx_mem_get_public_data(*m, blob, sizeof(blob), &bl), 0);
  assert_int_equal(tpx_notify(peer, blob, bl), 0);
  assert_int_equal(child_said(k), 'w');
  for (int i = 0; i < 100000 && first_byte(dst) == 0; i++) usleep(100);
  assert_int_equal(first_byte(dst), 0x11);
  return peer;
}

/* A forked writer, and the target whose region it writes into. */
struct wfix {
  struct child k;
  eng_res_t base;
  tpx_config_t cfg;
  tpx_endpoint_t *ep;
  uint8_t *dst;
  tpx_mem_t *m;
  tpx_peer_t *peer;
  int whole; /* the last page had landed when the test acted (the write may have finished) */
};

static void wfix_open(struct wfix *f, int notif) {
  child_start(&f->k, WRITER, notif);
  eng_res_now(&f->base);
  f->ep = target(&f->cfg);
  f->dst = aligned_alloc(4096, BIG);
  assert_non_null(f->dst);
  memset(f->dst, 0, BIG);
  f->peer = offer_region(f->ep, &f->k, f->dst, &f->m);
}

static void wfix_close(struct wfix *f) {
  child_end(&f->k);
  tpx_peer_close(f->peer);
  tpx_endpoint_destroy(f->ep);
  free(f->dst);
  eng_res_settled(&f->base, 1 << 30); /* fds and threads; the big buffers may stay in RSS */
}

/* The use-after-free of issue 10, as the owner sees it: the writer stops
 * mid-write (SIGSTOP), the owner deregisters the region (it waits for the
 * requests that can still write into it, which fail at the deadline), then
 * reuses the memory; the writer resumes, and not one byte lands. */
static void test_attack_dereg_while_writer_stalls(void **state) {
  (void)state;
  struct wfix f;
  wfix_open(&f, 0);
  kill(f.k.pid, SIGSTOP);
  f.whole = page_landed(f.dst + BIG - 4096);
  double t0 = now_ms();
  int rc = tpx_mem_deregister(f.m);
  double dt = now_ms() - t0;
  print_message("deregister with a stalled writer: %s after %.0f ms (peer %s)%s\n", tpx_strerror(rc), dt,
                tpx_strerror(tpx_peer_status(f.peer)), f.whole ? " [write had finished]" : "");
  assert_int_equal(rc, 0);
  assert_true(dt < TIMEOUT_MS + 3000);
  if (!f.whole) assert_int_equal(tpx_peer_status(f.peer), TPX_ETIMEDOUT);
  memset(f.dst, 0xa5, BIG); /* the owner reuses its memory */
  kill(f.k.pid, SIGCONT);
  usleep(300 * 1000);
  for (size_t i = 0; i < BIG; i += 512)
    if (f.dst[i] != 0xa5) fail_msg("byte %zu written after the deregistration", i);
  wfix_close(&f);
}

/* SIGKILL while a notified write is in flight: the notification never
 * shows (its data did not all land), the peer fails at once. */
static void test_sigkill_during_notified_write(void **state) {
  (void)state;
  struct wfix f;
  wfix_open(&f, 1);
  f.whole = page_landed(f.dst + BIG - 4096);
  double t0 = now_ms();
  child_end(&f.k);
  tpx_notif_t n;
  int got = tpx_wait_notif(f.ep, 300, &n);
  if (!f.whole) assert_int_equal(got, 0);
  for (int i = 0; i < 500 && tpx_peer_status(f.peer) == 0; i++) usleep(10000);
  print_message("peer killed mid-write: %s after %.0f ms\n", tpx_strerror(tpx_peer_status(f.peer)), now_ms() - t0);
  assert_true(tpx_peer_status(f.peer) < 0);
  assert_true(now_ms() - t0 < TIMEOUT_MS + 3000);
  assert_int_equal(tpx_mem_deregister(f.m), 0);
  wfix_close(&f);
}

/* A peer that stops reading its control connection (stopped process):
 * control bytes for it are bounded (TPX_MAX_CTL_OUT_BYTES); past that the
 * caller gets an error and the peer is dropped. */
static void test_receiver_stops_reading(void **state) {
  (void)state;
  struct child k;
  child_start(&k, IDLE, 0);
  eng_res_t base;
  eng_res_now(&base);
  tpx_config_t cfg;
  tpx_endpoint_t *ep = target(&cfg);
  child_go(&k, tpx_endpoint_port(ep));
  tpx_peer_t *peer;
  assert_int_equal(tpx_accept(ep, 20000, &peer), 0);
  assert_int_equal(child_said(&k), 'w');
  kill(k.pid, SIGSTOP);
  static uint8_t msg[TPX_NOTIF_MAX];
  int rc = 0, n = 0;
  for (; n < 40000 && (rc = tpx_notify(peer, msg, sizeof(msg))) == 0; n++) {}
  print_message("stopped reader: notify failed after %d notifications (%.1f MiB): %s\n", n,
                n * (double)sizeof(msg) / (1 << 20), tpx_strerror(rc));
  assert_true(rc < 0);
  assert_int_equal(tpx_peer_status(peer), TPX_EAGAIN);
  child_end(&k);
  tpx_peer_close(peer);
  tpx_endpoint_destroy(ep);
  eng_res_settled(&base, 1 << 30);
}

/* A stopped peer (SIGSTOP; the same as a half-open connection or a receiver
 * that stops reading its data sockets): a write to it fails at the deadline
 * naming peer, channel and chunk; another peer of the same endpoint keeps
 * working meanwhile and after. */
/* The bystander's write landed on its side: its notification, which (unlike
 * the writer's completion, that came over TCP) orders the bytes before this
 * thread's check of them. */
static void bystander_landed(tpx_endpoint_t *other) {
  tpx_notif_t n;
  assert_int_equal(tpx_wait_notif(other, 20000, &n), 1);
  assert_int_equal(n.len, 1);
}

static void test_sigstop_peer_fails_at_deadline(void **state) {
  (void)state;
  struct child k;
  child_start(&k, OFFER, 0);
  eng_res_t base;
  eng_res_now(&base);
  tpx_config_t cfg;
  /* The liveness check (pings, 4 s by default) would fail a stopped peer too:
   * far off, so that the chunk deadline is what fails the write even when a
   * loaded machine's kernel lets the stopped peer's socket buffers take bytes
   * in a trickle (a chunk's deadline runs from its post). */
  tpx_endpoint_t *ep = target_liveness(&cfg, STALL_LIVENESS_MS);
  child_go(&k, tpx_endpoint_port(ep));
  tpx_peer_t *peer;
  assert_int_equal(tpx_accept(ep, 20000, &peer), 0);
  tpx_notif_t n;
  assert_int_equal(tpx_wait_notif(ep, 20000, &n), 1);
  assert_int_equal(child_said(&k), 'w');
  tpx_rmem_t *rm;
  assert_int_equal(tpx_load_remote_md(n.msg, n.len, &rm), 0);
  tpx_endpoint_params_t p; /* the bystander */
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.no_listen = 1;
  p.name = "bystander";
  tpx_endpoint_t *other;
  assert_int_equal(tpx_endpoint_create(&p, &other), 0);
  tpx_peer_t *ob, *bo;
  eng_connect(other, ep, &ob, &bo);
  eng_buf_t src, bsrc, obuf; /* the hung write's source, the bystander's own */
  eng_buf(ep, BIG / 2, 0, &src);
  eng_buf(ep, 1 << 20, 0, &bsrc);
  eng_buf(other, 1 << 20, TPX_ACCESS_WRITE, &obuf);
  kill(k.pid, SIGSTOP);
  tpx_xfer_t *x;
  double t0 = now_ms();
  assert_int_equal(tpx_write(peer, src.mem, 0, rm, 0, src.len, NULL, 0, &x), 0);
  for (int i = 0; i < 3; i++) { /* the bystander while the write hangs */
    tpx_xfer_t *y;
    tu_fill(bsrc.p, 1 << 20, 40 + (uint32_t)i, 0);
    assert_int_equal(tpx_write(bo, bsrc.mem, 0, obuf.rmem, 0, 1 << 20, "b", 1, &y), 0);
    eng_wait(y, 0);
    tpx_xfer_free(y);
    bystander_landed(other);
    assert_int_equal(tu_check(obuf.p, 1 << 20, 40 + (uint32_t)i, 0), SIZE_MAX);
  }
  int rc = tpx_xfer_wait(x, STALL_LIVENESS_MS);
  double dt = now_ms() - t0;
  print_message("write to a stopped peer: %s after %.0f ms: %s\n", tpx_strerror(rc), dt, tpx_last_error());
  assert_int_equal(rc, TPX_ETIMEDOUT);
  assert_non_null(strstr(tpx_last_error(), "channel"));
  assert_non_null(strstr(tpx_last_error(), "chunk"));
  assert_true(dt < STALL_LIVENESS_MS / 2); /* about TIMEOUT_MS on an idle machine */
  tpx_xfer_free(x);
  tu_fill(bsrc.p, 1 << 20, 47, 0); /* and after */
  assert_int_equal(tpx_write(bo, bsrc.mem, 0, obuf.rmem, 0, 1 << 20, "b", 1, &x), 0);
  eng_wait(x, 0);
  tpx_xfer_free(x);
  bystander_landed(other);
  assert_int_equal(tu_check(obuf.p, 1 << 20, 47, 0), SIZE_MAX);
  assert_int_equal(tpx_peer_status(bo), 0);
  child_end(&k);
  tpx_rmem_free(rm);
  tpx_peer_close(peer);
  tpx_peer_close(ob);
  tpx_peer_close(bo);
  eng_buf_free(&src);
  eng_buf_free(&bsrc);
  eng_buf_free(&obuf);
  tpx_endpoint_destroy(other);
  tpx_endpoint_destroy(ep);
  eng_res_settled(&base, 1 << 30);
}

/* SIGKILL at connect, at several points of the handshake: nothing is left
 * behind (no peer in setup, fds back), and peers still connect. */
static void test_sigkill_at_connect(void **state) {
  (void)state;
  enum { N = 4 };
  static const int delay_us[N] = {0, 500, 2000, 8000};
  struct child k[N];
  for (int i = 0; i < N; i++) child_start(&k[i], CONNECTOR, 0);
  eng_res_t base;
  eng_res_now(&base);
  tpx_config_t cfg;
  tpx_endpoint_t *ep = target(&cfg);
  for (int i = 0; i < N; i++) {
    child_go(&k[i], tpx_endpoint_port(ep));
    assert_int_equal(child_said(&k[i]), 'c');
    usleep((useconds_t)delay_us[i]);
    child_end(&k[i]);
  }
  for (int i = 0; i < 300; i++) { /* setups end: at EOF, or at the deadline */
    pthread_mutex_lock(&ep->lock);
    int n = ep->setups;
    pthread_mutex_unlock(&ep->lock);
    if (n == 0) break;
    usleep(10000);
  }
  pthread_mutex_lock(&ep->lock);
  assert_int_equal(ep->setups, 0);
  pthread_mutex_unlock(&ep->lock);
  tpx_peer_t *p;
  while (tpx_accept(ep, 0, &p) == 0) { /* handshakes that finished before the kill */
    for (int i = 0; i < 300 && tpx_peer_status(p) == 0; i++) usleep(10000);
    assert_true(tpx_peer_status(p) < 0);
    tpx_peer_close(p);
  }
  tpx_endpoint_params_t pp; /* a peer still connects */
  tpx_endpoint_params_init(&pp);
  pp.cfg = &cfg;
  pp.no_listen = 1;
  tpx_endpoint_t *other;
  assert_int_equal(tpx_endpoint_create(&pp, &other), 0);
  tpx_peer_t *ob, *bo;
  eng_connect(other, ep, &ob, &bo);
  tpx_peer_close(ob);
  tpx_peer_close(bo);
  tpx_endpoint_destroy(other);
  tpx_endpoint_destroy(ep);
  eng_res_settled(&base, 1 << 30);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attack_dereg_while_writer_stalls),
      cmocka_unit_test(test_sigkill_during_notified_write),
      cmocka_unit_test(test_receiver_stops_reading),
      cmocka_unit_test(test_sigstop_peer_fails_at_deadline),
      cmocka_unit_test(test_sigkill_at_connect),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
