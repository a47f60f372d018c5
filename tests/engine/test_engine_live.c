/* Liveness (src/engine/live.h, TPX_PEER_TIMEOUT_MS): a peer in another
 * process that stops (SIGSTOP) fails within the setting, long before the
 * request deadline; one stopped for a second and resumed does not; one whose
 * CPUs are all taken (stress-ng, else busy loops) does not; a peer that does
 * not offer HELLO_F_LIVE (no progress thread: what an older peer looks like
 * on the wire) is never pinged nor judged by its silence, and works; in a
 * network namespace of its own, with every TCP packet dropped (a blackholed
 * route), a peer fails within the setting, pinged or, without the flag,
 * through the kernel's keepalive and TCP_USER_TIMEOUT; over a slow link (tbf)
 * a write that takes several timeouts fails nobody.
 * The peer process is forked before this process starts any thread of the
 * test (each test's endpoints are gone before the next test forks). */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "eng.h"
#include "engine/core.h"
#include "engine/peer.h"

#define REGION (16u << 20)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static void nap_ms(int ms) {
  struct timespec ts = {ms / 1000, (long)(ms % 1000) * 1000000L};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

struct child {
  pid_t pid;
  int to[2], from[2];
};

/* The peer process: connect to the port it is sent (its configuration's
 * peer timeout too), offer a region for reading and writing by
 * notification, then wait to be stopped or killed. Its progress thread does
 * the rest. */
static void child_main(int rfd, int wfd) {
  prctl(PR_SET_PDEATHSIG, SIGKILL); /* never outlive a failed test */
  alarm(120);                       /* nor a hung one */
  int arg[2];
  if (read(rfd, arg, sizeof(arg)) != sizeof(arg)) _exit(2);
  tpx_config_t cfg;
  eng_cfg(&cfg);
  cfg.peer_timeout_ms = arg[1];
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.no_listen = 1;
  p.name = "live-peer";
  tpx_endpoint_t *ep;
  if (tpx_endpoint_create(&p, &ep)) _exit(3);
  tpx_peer_t *peer;
  if (tpx_connect(ep, "127.0.0.1", arg[0], &peer)) _exit(4);
  uint8_t *b = aligned_alloc(4096, REGION);
  if (!b) _exit(5);
  memset(b, 0, REGION);
  tpx_mem_desc_t d = {b, REGION, TPX_MEM_HOST, 0, TPX_ACCESS_WRITE | TPX_ACCESS_READ};
  tpx_mem_t *m;
  uint8_t blob[TPX_MD_MAX];
  size_t bl;
  if (tpx_mem_register(ep, &d, &m) || tpx_mem_get_public_data(m, blob, sizeof(blob), &bl) ||
      tpx_notify(peer, blob, bl))
    _exit(6);
  char c = 'w';
  if (write(wfd, &c, 1) != 1) _exit(7);
  for (;;) pause();
}

/* The parent's side: an endpoint with the given peer timeout, the child
 * connected to it, the child's region loaded. */
struct fix {
  struct child k;
  tpx_config_t cfg;
  tpx_endpoint_t *ep;
  tpx_peer_t *peer;
  tpx_rmem_t *rm;
  eng_buf_t buf; /* REGION bytes of ours */
};

static void fix_open(struct fix *f, int peer_timeout_ms) {
  memset(f, 0, sizeof(*f));
  if (pipe(f->k.to) != 0 || pipe(f->k.from) != 0) fail_msg("pipe");
  f->k.pid = fork();
  assert_true(f->k.pid >= 0);
  if (f->k.pid == 0) {
    close(f->k.to[1]);
    close(f->k.from[0]);
    child_main(f->k.to[0], f->k.from[1]);
  }
  close(f->k.to[0]);
  close(f->k.from[1]);
  eng_cfg(&f->cfg);
  if (peer_timeout_ms > 0) f->cfg.peer_timeout_ms = peer_timeout_ms;
  f->ep = eng_ep_open(&f->cfg, "live-owner");
  int arg[2] = {tpx_endpoint_port(f->ep), f->cfg.peer_timeout_ms};
  assert_int_equal(write(f->k.to[1], arg, sizeof(arg)), sizeof(arg));
  int rc = tpx_accept(f->ep, 20000, &f->peer);
  if (rc) fail_msg("the peer process did not connect: %s", tpx_last_error());
  tpx_notif_t n;
  assert_int_equal(tpx_wait_notif(f->ep, 20000, &n), 1);
  char c = 0;
  assert_int_equal(read(f->k.from[0], &c, 1), 1);
  assert_int_equal(tpx_load_remote_md(n.msg, n.len, &f->rm), 0);
  eng_buf(f->ep, REGION, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &f->buf);
}

static void fix_close(struct fix *f) {
  if (f->k.pid > 0) {
    kill(f->k.pid, SIGKILL);
    waitpid(f->k.pid, NULL, 0);
  }
  close(f->k.to[1]);
  close(f->k.from[0]);
  tpx_rmem_free(f->rm);
  eng_buf_free(&f->buf);
  tpx_peer_close(f->peer);
  tpx_endpoint_destroy(f->ep);
}

/* Write a pattern into the peer's region and read it back: every byte. */
static void round_trip(struct fix *f, size_t len, uint32_t seed) {
  tu_fill(f->buf.p, len, seed, 0);
  tpx_xfer_t *x;
  assert_int_equal(tpx_write(f->peer, f->buf.mem, 0, f->rm, 0, len, NULL, 0, &x), 0);
  eng_wait(x, 0);
  tpx_xfer_free(x);
  memset(f->buf.p, 0, len);
  assert_int_equal(tpx_read(f->peer, f->buf.mem, 0, f->rm, 0, len, &x), 0);
  eng_wait(x, 0);
  tpx_xfer_free(x);
  assert_int_equal(tu_check(f->buf.p, len, seed, 0), SIZE_MAX);
}

/* Idle for ms, the peer checked alive every 50 ms. */
static void idle_alive(struct fix *f, int ms) {
  double end = now_ms() + ms;
  while (now_ms() < end) {
    int st = tpx_peer_status(f->peer);
    if (st != 0) fail_msg("peer failed while alive: %s: %s", tpx_strerror(st), tpx_last_error());
    nap_ms(50);
  }
}

/* A stopped peer fails within TPX_PEER_TIMEOUT_MS, not at the request
 * deadline (20 s here): the write in flight and a receive fail with it. */
static void test_sigstop_fails_within_setting(void **state) {
  (void)state;
  enum { TMO = 1500 };
  struct fix f;
  fix_open(&f, TMO);
  assert_true(f.cfg.timeout_ms >= 10 * TMO); /* the request deadline is far (eng_cfg: 20 s) */
  idle_alive(&f, TMO); /* pings answered while it runs */
  kill(f.k.pid, SIGSTOP);
  double t0 = now_ms();
  tpx_xfer_t *w, *r;
  assert_int_equal(tpx_write(f.peer, f.buf.mem, 0, f.rm, 0, REGION, NULL, 0, &w), 0);
  assert_int_equal(tpx_recv(f.peer, f.buf.mem, 0, 4096, 7, &r), 0); /* never matched */
  int rc = tpx_xfer_wait(w, TMO + 10000);
  double dt = now_ms() - t0;
  print_message("stopped peer: %s after %.0f ms (TPX_PEER_TIMEOUT_MS=%d): %s\n", tpx_strerror(rc), dt, TMO,
                tpx_last_error());
  assert_int_equal(rc, TPX_ETIMEDOUT);
  assert_non_null(strstr(tpx_last_error(), "no sign of life"));
  /* Silence is counted from the last answer, about a quarter of the
   * timeout before the stop (more on a loaded machine); the step runs
   * every 100 ms at most. */
  assert_true(dt >= TMO / 2);
  assert_true(dt < TMO + 1000);
  assert_true(tpx_xfer_wait(r, 5000) < 0);
  assert_int_equal(tpx_peer_status(f.peer), TPX_ETIMEDOUT);
  tpx_xfer_free(w);
  tpx_xfer_free(r);
  fix_close(&f);
}

/* A peer descheduled for a second (stopped, then resumed within the
 * timeout) with a write in flight: nothing fails, on either side (its
 * failing us would show here as its report), and transfers go on. */
static void test_descheduled_not_failed(void **state) {
  (void)state;
  enum { TMO = 3000 };
  struct fix f;
  fix_open(&f, TMO);
  round_trip(&f, 1 << 20, 1);
  for (int i = 0; i < 2; i++) {
    kill(f.k.pid, SIGSTOP);
    tpx_xfer_t *w;
    tu_fill(f.buf.p, REGION, 10 + (uint32_t)i, 0);
    assert_int_equal(tpx_write(f.peer, f.buf.mem, 0, f.rm, 0, REGION, NULL, 0, &w), 0);
    nap_ms(1000);
    assert_int_equal(tpx_peer_status(f.peer), 0);
    kill(f.k.pid, SIGCONT);
    eng_wait(w, 0);
    tpx_xfer_free(w);
    idle_alive(&f, TMO + 500); /* a wrong judgement of either side has come by then */
    round_trip(&f, REGION, 20 + (uint32_t)i);
  }
  fix_close(&f);
}

/* Something that takes every CPU for secs seconds: stress-ng when
 * installed, else busy loops; which one is said. Returns the count of
 * processes started into pids. */
static int load_start(pid_t *pids, int max, int secs) {
  long ncpu = sysconf(_SC_NPROCESSORS_ONLN);
  if (ncpu < 1) ncpu = 1;
  int n = 0, stress = system("stress-ng --version > /dev/null 2>&1") == 0; /* on PATH, as execlp finds it */
  int procs = stress ? 1 : (int)(2 * ncpu < max ? 2 * ncpu : max);
  print_message("load: %s on %ld CPU(s) for %d s\n", stress ? "stress-ng --cpu 2xCPUs" : "busy loops, 2 per CPU",
                ncpu, secs);
  for (int i = 0; i < procs; i++) {
    pid_t pid = fork();
    assert_true(pid >= 0);
    if (pid == 0) {
      prctl(PR_SET_PDEATHSIG, SIGKILL);
      alarm((unsigned)secs + 30);
      if (stress) {
        char cpus[32], tmo[32];
        snprintf(cpus, sizeof(cpus), "%ld", 2 * ncpu);
        snprintf(tmo, sizeof(tmo), "%ds", secs);
        execlp("stress-ng", "stress-ng", "--cpu", cpus, "--timeout", tmo, "--quiet", (char *)NULL);
        _exit(127);
      }
      volatile unsigned long x = 0;
      for (;;) x++;
    }
    pids[n++] = pid;
  }
  return n;
}

static void load_stop(pid_t *pids, int n) {
  for (int i = 0; i < n; i++) {
    kill(pids[i], SIGTERM); /* stress-ng stops its workers */
    int st = 0;
    waitpid(pids[i], &st, 0);
    if (WIFEXITED(st) && WEXITSTATUS(st) == 127) fail_msg("stress-ng did not start");
  }
}

/* Every CPU taken, for twice the timeout and more: transfers with every
 * byte checked, then idle (only pings show life), the default timeout. */
static void test_loaded_not_failed(void **state) {
  (void)state;
  struct fix f;
  fix_open(&f, 0); /* the configured timeout (4000 ms unless TPX_PEER_TIMEOUT_MS says) */
  int tmo = f.cfg.peer_timeout_ms;
  assert_true(tmo > 0);
  pid_t pids[64];
  int n = load_start(pids, 64, 2 * tmo / 1000 + 4);
  double t0 = now_ms();
  uint32_t rounds = 0;
  while (now_ms() - t0 < tmo) round_trip(&f, 4 << 20, 100 + rounds++);
  idle_alive(&f, tmo + 1000);
  round_trip(&f, REGION, 99);
  load_stop(pids, n);
  print_message("under load: %u round trips, then %d ms idle: peer %s\n", rounds, tmo + 1000,
                tpx_strerror(tpx_peer_status(f.peer)));
  assert_int_equal(tpx_peer_status(f.peer), 0);
  fix_close(&f);
}

/* An endpoint without a progress thread does not offer HELLO_F_LIVE, as an
 * older peer does not: it is never pinged (it would refuse a ping, as an
 * older one fails on the unknown type) nor failed for its silence, even
 * when nothing drives its progress for three timeouts; it pings the other,
 * whose answers it reads whenever it drives progress. */
static void test_older_peer(void **state) {
  (void)state;
  enum { TMO = 1000 };
  tpx_config_t ca, cb;
  eng_cfg(&ca);
  eng_cfg(&cb);
  ca.progress_thread = 0;
  ca.peer_timeout_ms = cb.peer_timeout_ms = TMO;
  eng_pair_t P;
  eng_pair_open2(&P, &ca, &cb, 0);
  eng_buf_t x, y;
  eng_buf(P.a, 1 << 20, 0, &x);
  eng_buf(P.b, 1 << 20, TPX_ACCESS_WRITE | TPX_ACCESS_READ, &y);
  for (int round = 0; round < 2; round++) {
    nap_ms(3 * TMO); /* A silent: nothing drives its progress */
    assert_int_equal(tpx_peer_status(P.ba), 0);
    double end = now_ms() + 3 * TMO; /* then driven: it pings B */
    while (now_ms() < end) {
      assert_true(tpx_progress(P.a) >= 0);
      nap_ms(1);
    }
    assert_int_equal(tpx_peer_status(P.ab), 0);
    assert_int_equal(tpx_peer_status(P.ba), 0);
    tu_fill(x.p, x.len, (uint32_t)round, 0);
    tpx_xfer_t *w;
    assert_int_equal(tpx_write(P.ab, x.mem, 0, y.rmem, 0, x.len, "n", 1, &w), 0);
    eng_wait(w, 0);
    tpx_xfer_free(w);
    tpx_notif_t nt;
    assert_int_equal(tpx_wait_notif(P.b, 5000, &nt), 1);
    assert_int_equal(tu_check(y.p, y.len, (uint32_t)round, 0), SIZE_MAX);
  }
  /* What each side agreed: B never judges A; A judges B, and B answered
   * (B's state read under its lock: its progress thread runs). */
  pthread_mutex_lock(&P.b->lock);
  struct tpx__live b_live = P.ba->live;
  pthread_mutex_unlock(&P.b->lock);
  assert_int_equal(b_live.judged, 0);
  assert_int_equal(b_live.seq, 0);
  assert_int_equal(P.ab->live.judged, 1);
  assert_true(P.ab->live.answered >= 1 && P.ab->live.answered <= P.ab->live.seq);
  assert_true(b_live.asks_in >= P.ab->live.answered);
  print_message("older peer: %u ping(s) from it answered, none to it\n", P.ab->live.answered);
  eng_buf_free(&x);
  eng_buf_free(&y);
  eng_pair_close(&P);
}

/* TPX_PEER_TIMEOUT_MS: the same range from the environment, by name, and
 * in a configuration handed to an endpoint (0..86400000, 0 = off). */
static void test_setting_range(void **state) {
  (void)state;
  tpx_config_t c;
  tpx_config_defaults(&c);
  assert_int_equal(c.peer_timeout_ms, 4000);
  assert_int_equal(tpx_config_set(&c, "TPX_PEER_TIMEOUT_MS", "0"), 0);
  assert_int_equal(c.peer_timeout_ms, 0);
  assert_int_equal(tpx_config_set(&c, "peer_timeout_ms", "86400000"), 0);
  assert_int_equal(tpx_config_set(&c, "peer_timeout_ms", "86400001"), TPX_EINVAL);
  assert_int_equal(tpx_config_set(&c, "peer_timeout_ms", "-1"), TPX_EINVAL);
  assert_int_equal(c.peer_timeout_ms, 86400000);
  assert_int_equal(tpx_config_check(&c), 0);
  c.peer_timeout_ms = -1;
  assert_int_equal(tpx_config_check(&c), TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "TPX_PEER_TIMEOUT_MS"));
  char *old = getenv("TPX_PEER_TIMEOUT_MS") ? strdup(getenv("TPX_PEER_TIMEOUT_MS")) : NULL;
  assert_int_equal(setenv("TPX_PEER_TIMEOUT_MS", "86400001", 1), 0);
  assert_int_equal(tpx_config_from_env(&c), TPX_EINVAL);
  assert_int_equal(c.peer_timeout_ms, 4000); /* refused: the default kept */
  assert_int_equal(setenv("TPX_PEER_TIMEOUT_MS", "2500", 1), 0);
  assert_int_equal(tpx_config_from_env(&c), 0);
  assert_int_equal(c.peer_timeout_ms, 2500);
  if (old) assert_int_equal(setenv("TPX_PEER_TIMEOUT_MS", old, 1), 0);
  else assert_int_equal(unsetenv("TPX_PEER_TIMEOUT_MS"), 0);
  free(old);
}

/* ---- a network namespace of the test's own (root) ---- */
#define NS_SKIP 77

/* In a forked child, single-threaded until here: a fresh network namespace
 * with only lo, endpoints A (progress thread) and B (with one when live_b,
 * else none: no HELLO_F_LIVE), B dialled A. Plain return codes: cmocka's
 * asserts belong to the parent. */
struct ns_pair {
  tpx_endpoint_t *a, *b;
  tpx_peer_t *ab, *ba;
};

static int ns_pair_open(struct ns_pair *n, int live_b, int tmo, const char *tc) {
  prctl(PR_SET_PDEATHSIG, SIGKILL);
  alarm(60);
  if (unshare(CLONE_NEWNET) != 0) {
    fprintf(stderr, "SKIPPED: unshare(CLONE_NEWNET): %s\n", strerror(errno));
    return NS_SKIP;
  }
  if (system("nft --version > /dev/null 2>&1") != 0 || system("ip link set lo up") != 0 ||
      (tc && system(tc) != 0)) {
    fprintf(stderr, "SKIPPED: nft (nftables), ip or tc (iproute2) not usable\n");
    return NS_SKIP;
  }
  tpx_config_t ca, cb;
  eng_cfg(&ca);
  eng_cfg(&cb);
  ca.peer_timeout_ms = cb.peer_timeout_ms = tmo;
  cb.progress_thread = live_b;
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &ca;
  p.port = TPX_PORT_EPHEMERAL;
  p.listen_host = "127.0.0.1";
  p.name = "A";
  if (tpx_endpoint_create(&p, &n->a)) return 2;
  p.cfg = &cb;
  p.no_listen = 1;
  p.name = "B";
  if (tpx_endpoint_create(&p, &n->b)) return 3;
  if (tpx_connect(n->b, "127.0.0.1", tpx_endpoint_port(n->a), &n->ba) || tpx_accept(n->a, 10000, &n->ab)) {
    fprintf(stderr, "connect: %s\n", tpx_last_error());
    return 4;
  }
  return 0;
}

/* nftables drops every TCP packet on input (a blackholed route, no error
 * anywhere): A must fail B within the setting, plus the kernel's probe
 * second without the flag. */
static int blackhole_child(int live_b, int tmo) {
  struct ns_pair n;
  int rc = ns_pair_open(&n, live_b, tmo, NULL);
  if (rc) return rc;
  nap_ms(tmo / 2); /* pings (or nothing) go back and forth */
  if (tpx_peer_status(n.ab) != 0) return 5;
  if (system("nft add table inet tpxlive && nft add chain inet tpxlive in '{ type filter hook input priority 0; }' "
             "&& nft add rule inet tpxlive in meta l4proto tcp drop") != 0) {
    fprintf(stderr, "nft rule refused\n");
    return 6;
  }
  double t0 = now_ms();
  tpx_mem_desc_t d = {&t0, 8, TPX_MEM_HOST, 0, TPX_ACCESS_WRITE};
  tpx_mem_t *m;
  tpx_xfer_t *r;
  if (tpx_mem_register(n.a, &d, &m) || tpx_recv(n.ab, m, 0, 8, 1, &r)) return 7; /* fails with the peer */
  rc = tpx_xfer_wait(r, tmo + 5000);
  double dt = now_ms() - t0;
  fprintf(stderr, "blackholed %s: %s after %.0f ms (TPX_PEER_TIMEOUT_MS=%d): %s\n",
          live_b ? "peer with HELLO_F_LIVE" : "peer without HELLO_F_LIVE", tpx_strerror(rc), dt, tmo,
          tpx_last_error());
  if (rc != TPX_ETIMEDOUT || !strstr(tpx_last_error(), "no sign of life")) return 8;
  /* With the flag: T after the last answer, at most T after the drop. Without:
   * the kernel's first probe (each second once idle) past T of nothing. */
  if (dt > tmo + (live_b ? 0 : 1000) + 1000) return 9;
  _exit(0); /* B may be stuck in the blackhole: the process ends it */
}

/* lo shaped to 100 Mbit/s (tbf, 50 ms of queue, which the pings and their
 * answers wait in too; MTU 1500, as tbf drops packets larger than its
 * bucket, and lo's 64 KiB ones broke the transfer with "remote error" in
 * about 8 s, liveness on or off): a 64 MiB write takes about five timeouts, its
 * control connection quiet all along but for pings; nobody fails, and the
 * bytes are right. */
static int slow_link_child(int tmo) {
  struct ns_pair n;
  int rc = ns_pair_open(&n, 1, tmo,
                        "ip link set lo mtu 1500 && tc qdisc add dev lo root tbf rate 100mbit burst 32kb latency 50ms");
  if (rc) return rc;
  size_t len = 64u << 20;
  uint8_t *src = aligned_alloc(4096, len), *dst = aligned_alloc(4096, len);
  if (!src || !dst) return 10;
  tu_fill(src, len, 77, 0);
  memset(dst, 0, len);
  tpx_mem_desc_t ds = {src, len, TPX_MEM_HOST, 0, 0}, dd = {dst, len, TPX_MEM_HOST, 0, TPX_ACCESS_WRITE};
  tpx_mem_t *ms, *md;
  uint8_t blob[TPX_MD_MAX];
  size_t bl;
  tpx_rmem_t *rm;
  tpx_xfer_t *w;
  if (tpx_mem_register(n.a, &ds, &ms) || tpx_mem_register(n.b, &dd, &md) ||
      tpx_mem_get_public_data(md, blob, sizeof(blob), &bl) || tpx_load_remote_md(blob, bl, &rm))
    return 11;
  double t0 = now_ms();
  if (tpx_write(n.ab, ms, 0, rm, 0, len, NULL, 0, &w)) return 12;
  rc = tpx_xfer_wait(w, 60000);
  double dt = now_ms() - t0;
  pthread_mutex_lock(&n.a->lock);
  uint32_t answered = n.ab->live.answered;
  pthread_mutex_unlock(&n.a->lock);
  fprintf(stderr, "64 MiB over lo at 100 Mbit/s: %s after %.0f ms (TPX_PEER_TIMEOUT_MS=%d), %u ping(s) answered\n",
          tpx_strerror(rc), dt, tmo, answered);
  if (rc != 0 || tpx_peer_status(n.ab) != 0 || tpx_peer_status(n.ba) != 0) return 13;
  if (tu_check(dst, len, 77, 0) != SIZE_MAX) return 14;
  if (dt < 2 * tmo || answered < 2) return 15; /* else the link was not slow: nothing shown */
  _exit(0);
}

/* Runs one child mode; 1 when the child could not make its namespace. */
static int ns_run(int (*fn)(int, int), int a1, int a2, const char *what) {
  fflush(NULL);
  pid_t k = fork();
  assert_true(k >= 0);
  if (k == 0) _exit(fn(a1, a2));
  int st = -1;
  double end = now_ms() + 60000;
  while (waitpid(k, &st, WNOHANG) != k) {
    if (now_ms() > end) {
      kill(k, SIGKILL);
      waitpid(k, &st, 0);
      fail_msg("%s: child still running after 60 s", what);
    }
    nap_ms(20);
  }
  if (WIFEXITED(st) && WEXITSTATUS(st) == NS_SKIP) return 1;
  if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) fail_msg("%s: child status 0x%x (its stderr says why)", what, st);
  return 0;
}

static void test_blackholed_route(void **state) {
  (void)state;
  if (ns_run(blackhole_child, 1, 2000, "blackholed route, peer with HELLO_F_LIVE") ||
      ns_run(blackhole_child, 0, 2000, "blackholed route, peer without HELLO_F_LIVE")) {
    print_message("SKIPPED: a network namespace and nftables are needed (root)\n");
    skip();
  }
}

static int slow_link_main(int tmo, int unused) {
  (void)unused;
  return slow_link_child(tmo);
}

static void test_slow_link_not_failed(void **state) {
  (void)state;
  if (ns_run(slow_link_main, 1000, 0, "slow link")) {
    print_message("SKIPPED: a network namespace and tc's tbf are needed (root)\n");
    skip();
  }
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_setting_range),
      cmocka_unit_test(test_sigstop_fails_within_setting),
      cmocka_unit_test(test_descheduled_not_failed),
      cmocka_unit_test(test_loaded_not_failed),
      cmocka_unit_test(test_older_peer),
      cmocka_unit_test(test_blackholed_route),
      cmocka_unit_test(test_slow_link_not_failed),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
