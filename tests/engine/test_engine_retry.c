/* Connection setup rides out transient network errors (docs/RELIABILITY.md,
 * "Connection setup"), between two network namespaces joined by two veth
 * links (198.18.1.0/24 carries the control connection and channel 0,
 * 198.18.2.0/24 channel 1). Two forked processes, A (connects) and B
 * (listens):
 * - flap: 100 times, A's second link goes down and up again and A connects
 *   again at once (every tenth time it connects while the link is still
 *   down and a thread brings it up 30 ms later, so the data connect meets
 *   "network unreachable" first); each new peer moves 1 MiB over both
 *   channels, checked byte for byte: 100 of 100 must succeed;
 * - late listener: B creates its endpoint 200 ms after A started
 *   connecting (refused meanwhile): A's tpx_connect succeeds;
 * - lasting outage: A's route to the second link is gone: A's tpx_connect
 *   fails at TPX_CONNECT_TIMEOUT_MS, not before, naming the cause of the
 *   data connect's attempts;
 * - failure told: B's route to A's second link is gone and B does not
 *   retry: B's data connect fails at once, and A's tpx_connect names B's
 *   reason (channel, net device, address, cause), long before A's deadline.
 * Needs root and iproute2; skipped otherwise. */
#define _GNU_SOURCE
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include "eng.h"
#include "netns.h"

#define NLINK 2
#define NCH 2
#define FLAPS 100
#define XFER (1u << 20)
#define STEP_MS 60000 /* bound of any one wait for the other side */
#define CHILD_LIMIT_MS 240000
#define OUTAGE_TIMEOUT_MS 1500

#define CK(tag, cond, ...) NN_CK_AT("retry", tag, cond, __VA_ARGS__)

static nn_topo_t topo;

struct side {
  int me; /* 0: A, 1: B */
  char tag;
  int port; /* B's control port */
  int rd, wr; /* pipe ends to the other side */
  tpx_endpoint_t *ep;
  uint8_t *buf;
  tpx_mem_t *mem;
};

static void say(struct side *s, char c) { CK(s->tag, write(s->wr, &c, 1) == 1, "pipe write"); }
static char hear(struct side *s) {
  struct pollfd pf = {s->rd, POLLIN, 0};
  char c = 0;
  CK(s->tag, poll(&pf, 1, STEP_MS) == 1 && read(s->rd, &c, 1) == 1, "the other side went silent");
  return c;
}

/* retries: TPX_SOCKET_RETRY_CNT, or -1 for the default. */
static void open_ep(struct side *s, int timeout_ms, int retries) {
  tpx_config_t cfg;
  eng_cfg(&cfg);
  if (retries >= 0) cfg.socket_retry_cnt = retries;
  cfg.num_channels = NCH;
  cfg.connect_timeout_ms = timeout_ms;
  char why[256];
  int rc = nn_ep_open(&topo, s->me, 2, &cfg, s->port, XFER, &s->ep, &s->buf, &s->mem, why, sizeof(why));
  CK(s->tag, rc == 0, "%s", why);
}

static void close_ep(struct side *s) {
  char why[128];
  CK(s->tag, nn_ep_close(s->ep, s->buf, s->mem, why, sizeof(why)) == 0, "%s", why);
}

/* ---- flap ---- */

struct upper {
  const char *dev;
  int rc;
};
static void *bring_up_later(void *arg) {
  struct upper *u = arg;
  usleep(30000); /* the connect below is under way by then (a stimulus, not a check) */
  u->rc = nn_link_set(u->dev, 1);
  return NULL;
}

static void flap_a(struct side *s) {
  const char *dev = topo.ifname[0][1];
  int ok = 0;
  open_ep(s, 10000, -1);
  CK(s->tag, hear(s) == 'r', "B not ready");
  for (int i = 0; i < FLAPS; i++) {
    CK(s->tag, nn_link_set(dev, 0) == 0, "set %s down", dev);
    tpx_peer_t *peer = NULL;
    int rc;
    double t0 = nn_now_ms();
    if (i % 10 == 9) { /* connect while the link is down; it comes up meanwhile */
      struct upper u = {dev, -1};
      pthread_t th;
      CK(s->tag, pthread_create(&th, NULL, bring_up_later, &u) == 0, "thread");
      rc = tpx_connect(s->ep, topo.addr[1][0], s->port, &peer);
      pthread_join(th, NULL);
      CK(s->tag, u.rc == 0, "set %s up", dev);
    } else { /* up, running, and connect at once */
      CK(s->tag, nn_link_set(dev, 1) == 0, "set %s up", dev);
      CK(s->tag, nn_wait_running(dev, 10000) == 0, "%s not running again", dev);
      rc = tpx_connect(s->ep, topo.addr[1][0], s->port, &peer);
    }
    CK(s->tag, rc == 0, "flap %d: reconnect failed after %.0f ms: %s", i, nn_now_ms() - t0, tpx_strerror(rc));
    CK(s->tag, tpx_peer_num_channels(peer) == NCH, "%d channels", tpx_peer_num_channels(peer));
    CK(s->tag, nn_wait_running(dev, 10000) == 0, "%s not running", dev);
    tu_fill(s->buf, XFER, 1000 + (uint32_t)i, 0);
    tpx_xfer_t *x = NULL;
    rc = tpx_send(peer, s->mem, 0, XFER, (uint64_t)i, &x);
    CK(s->tag, rc == 0, "flap %d: post send: %s", i, tpx_strerror(rc));
    rc = tpx_xfer_wait(x, STEP_MS);
    CK(s->tag, rc == 0, "flap %d: send: %s", i, tpx_strerror(rc));
    tpx_xfer_free(x);
    CK(s->tag, hear(s) == 'v', "flap %d: B did not verify", i);
    tpx_peer_close(peer);
    ok++;
  }
  printf("[retry A] flap and reconnect at once: %d of %d succeeded\n", ok, FLAPS);
  close_ep(s);
}

static void flap_b(struct side *s) {
  open_ep(s, 10000, -1);
  say(s, 'r');
  for (int i = 0; i < FLAPS; i++) {
    tpx_peer_t *peer = NULL;
    int rc = tpx_accept(s->ep, STEP_MS, &peer);
    CK(s->tag, rc == 0, "flap %d: accept: %s", i, tpx_strerror(rc));
    memset(s->buf, 0, XFER);
    tpx_xfer_t *x = NULL;
    rc = tpx_recv(peer, s->mem, 0, XFER, (uint64_t)i, &x);
    CK(s->tag, rc == 0, "flap %d: post recv: %s", i, tpx_strerror(rc));
    rc = tpx_xfer_wait(x, STEP_MS);
    CK(s->tag, rc == 0, "flap %d: recv: %s", i, tpx_strerror(rc));
    CK(s->tag, tpx_xfer_received(x) == XFER, "flap %d: received %zu", i, tpx_xfer_received(x));
    tpx_xfer_free(x);
    size_t bad = tu_check(s->buf, XFER, 1000 + (uint32_t)i, 0);
    CK(s->tag, bad == SIZE_MAX, "flap %d: byte %zu differs", i, bad);
    say(s, 'v');
    tpx_peer_close(peer);
  }
  close_ep(s);
}

/* ---- late listener ---- */

static void late_a(struct side *s) {
  open_ep(s, 10000, -1);
  CK(s->tag, hear(s) == 'r', "B not ready"); /* B is ready to time its 200 ms */
  double t0 = nn_now_ms();
  say(s, 'c'); /* B starts its 200 ms now */
  tpx_peer_t *peer = NULL;
  int rc = tpx_connect(s->ep, topo.addr[1][0], s->port, &peer);
  double took = nn_now_ms() - t0;
  printf("[retry A] listener 200 ms late: %s after %.0f ms\n", tpx_strerror(rc), took);
  CK(s->tag, rc == 0, "connect: %s", tpx_strerror(rc));
  CK(s->tag, took >= 200, "connected after %.0f ms, before the listener existed", took);
  rc = tpx_notify(peer, "hi", 2);
  CK(s->tag, rc == 0, "notify: %s", tpx_strerror(rc));
  CK(s->tag, hear(s) == 'v', "B got no notification");
  tpx_peer_close(peer);
  close_ep(s);
}

static void late_b(struct side *s) {
  say(s, 'r');
  CK(s->tag, hear(s) == 'c', "A never started");
  usleep(200000); /* the listener appears 200 ms after A began (a stimulus, not a check) */
  open_ep(s, 10000, -1);
  tpx_peer_t *peer = NULL;
  int rc = tpx_accept(s->ep, STEP_MS, &peer);
  CK(s->tag, rc == 0, "accept: %s", tpx_strerror(rc));
  tpx_notif_t n;
  rc = tpx_wait_notif(s->ep, STEP_MS, &n);
  CK(s->tag, rc == 1 && n.len == 2 && memcmp(n.msg, "hi", 2) == 0, "notification");
  say(s, 'v');
  tpx_peer_close(peer);
  close_ep(s);
}

/* ---- lasting outage ---- */

static void outage_a(struct side *s) {
  open_ep(s, OUTAGE_TIMEOUT_MS, -1);
  CK(s->tag, hear(s) == 'r', "B not ready");
  /* The second link's route goes for good: its data connect meets ENETUNREACH. */
  CK(s->tag, nn_ip(1, "route del 198.18.2.0/24 dev %s", topo.ifname[0][1]) == 0, "route del");
  tpx_peer_t *peer = NULL;
  double t0 = nn_now_ms();
  int rc = tpx_connect(s->ep, topo.addr[1][0], s->port, &peer);
  double took = nn_now_ms() - t0;
  printf("[retry A] lasting outage: %s after %.0f ms: %s\n", tpx_strerror(rc), took, tpx_last_error());
  CK(s->tag, rc == TPX_ETIMEDOUT, "connect: %s, expected a timeout", tpx_strerror(rc));
  CK(s->tag, took >= OUTAGE_TIMEOUT_MS, "failed after %.0f ms, before the deadline", took);
  CK(s->tag, took < OUTAGE_TIMEOUT_MS + 10000, "failed after %.0f ms", took);
  CK(s->tag, strstr(tpx_last_error(), "Network is unreachable (attempts 1-") != NULL, "cause not named");
  say(s, 'd');
  close_ep(s);
  CK(s->tag, nn_ip(1, "route add 198.18.2.0/24 dev %s src %s", topo.ifname[0][1], topo.addr[0][1]) == 0,
     "route add");
}

/* ---- B's data connect fails at once: A's error names B's reason ---- */

static void told_a(struct side *s) {
  open_ep(s, 20000, -1); /* B's report, not this deadline, must end it */
  CK(s->tag, hear(s) == 'r', "B not ready");
  tpx_peer_t *peer = NULL;
  double t0 = nn_now_ms();
  int rc = tpx_connect(s->ep, topo.addr[1][0], s->port, &peer);
  double took = nn_now_ms() - t0;
  printf("[retry A] B's data connect fails: %s after %.0f ms: %s\n", tpx_strerror(rc), took, tpx_last_error());
  CK(s->tag, rc == TPX_EREMOTE, "connect: %s", tpx_strerror(rc));
  CK(s->tag, strstr(tpx_last_error(), "peer nsB (198.18.1.2:") != NULL, "peer not named");
  CK(s->tag, strstr(tpx_last_error(), "reported: channel 1: connect on net device 1 failed: connect to 198.18.2.1:"),
     "channel, device and address not named");
  CK(s->tag, strstr(tpx_last_error(), "Network is unreachable") != NULL, "cause not named");
  CK(s->tag, took < 15000, "told after %.0f ms: a deadline, not the report", took);
  say(s, 'd');
  close_ep(s);
}

static void told_b(struct side *s) {
  open_ep(s, 20000, 0); /* no retries: the first failure decides */
  CK(s->tag, nn_ip(1, "route del 198.18.2.0/24 dev %s", topo.ifname[1][1]) == 0, "route del");
  say(s, 'r');
  CK(s->tag, hear(s) == 'd', "A did not finish");
  tpx_peer_t *peer = NULL;
  CK(s->tag, tpx_accept(s->ep, 0, &peer) == TPX_ETIMEDOUT, "a peer came out of accept");
  close_ep(s);
}

static void outage_b(struct side *s) {
  open_ep(s, 4 * OUTAGE_TIMEOUT_MS, -1); /* A's deadline decides */
  say(s, 'r');
  CK(s->tag, hear(s) == 'd', "A did not finish");
  tpx_peer_t *peer = NULL;
  CK(s->tag, tpx_accept(s->ep, 0, &peer) == TPX_ETIMEDOUT, "a peer came out of accept");
  close_ep(s);
}

/* ---- the parent ---- */

typedef void (*side_fn)(struct side *);

static void side_main(int me, int port, int rd, int wr, side_fn fn) {
  struct side s = {.me = me, .tag = me ? 'B' : 'A', .port = port, .rd = rd, .wr = wr};
  CK(s.tag, nn_enter(topo.ns[me]) == 0, "cannot enter %s", topo.ns[me]);
  for (int k = 0; k < NLINK; k++)
    CK(s.tag, nn_wait_running(topo.ifname[me][k], 10000) == 0, "%s not running", topo.ifname[me][k]);
  int fds = tu_count_fds();
  fn(&s);
  CK(s.tag, tu_count_fds() == fds, "%d file descriptors open at the end, %d before", tu_count_fds(), fds);
  fflush(NULL);
  exit(0); /* exit, not _exit: the leak checker of sanitizer builds runs */
}

static void run_sides(int port, side_fn a, side_fn b) {
  int ab[2], ba[2];
  assert_int_equal(pipe(ab), 0);
  assert_int_equal(pipe(ba), 0);
  fflush(NULL);
  pid_t kid[2], parent = getpid();
  for (int me = 1; me >= 0; me--) {
    kid[me] = fork();
    assert_true(kid[me] >= 0);
    if (kid[me] == 0) {
      if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(11);
      int rd = me ? ab[0] : ba[0], wr = me ? ba[1] : ab[1];
      close(me ? ab[1] : ba[1]);
      close(me ? ba[0] : ab[0]);
      side_main(me, port, rd, wr, me ? b : a);
    }
  }
  close(ab[0]), close(ab[1]), close(ba[0]), close(ba[1]);
  int st[2] = {-1, -1}, left = 2;
  double until = nn_now_ms() + CHILD_LIMIT_MS;
  while (left > 0 && nn_now_ms() < until) {
    for (int i = 0; i < 2; i++) {
      if (st[i] != -1) continue;
      int s;
      if (waitpid(kid[i], &s, WNOHANG) == kid[i]) {
        st[i] = s, left--;
        if (s != 0 && nn_now_ms() + 2000 < until) until = nn_now_ms() + 2000; /* the other only waits now */
      }
    }
    if (left) usleep(20000);
  }
  for (int i = 0; i < 2; i++) {
    if (st[i] != -1) continue;
    kill(kid[i], SIGKILL);
    while (waitpid(kid[i], &st[i], 0) < 0 && errno == EINTR) {
    }
    fail_msg("side %c still running (limit %d ms, or 2 s after the other failed): killed", "AB"[i],
             CHILD_LIMIT_MS);
  }
  for (int i = 0; i < 2; i++) {
    if (WIFSIGNALED(st[i])) fail_msg("side %c died of signal %d", "AB"[i], WTERMSIG(st[i]));
    if (WEXITSTATUS(st[i]) != 0) fail_msg("side %c failed (exit %d)", "AB"[i], WEXITSTATUS(st[i]));
  }
}

static int skip_all;

static int group_setup(void **state) {
  (void)state;
  const char *why = "";
  int rc = nn_topo_create(&topo, NLINK, &why);
  if (rc == NN_SKIP) {
    print_message("SKIPPED: %s\n", why);
    skip_all = 1;
    return 0;
  }
  if (rc != NN_OK) fprintf(stderr, "namespaces: %s\n", why);
  return rc == NN_OK ? 0 : -1;
}

static int group_teardown(void **state) {
  (void)state;
  return nn_topo_destroy(&topo) == 0 ? 0 : -1;
}

static void cleanup_at_exit(void) { nn_topo_destroy(&topo); }

/* Fixed ports, one per test: nothing else lives in these namespaces. */
static void test_flap_reconnect(void **state) {
  (void)state;
  if (skip_all) skip();
  run_sides(41101, flap_a, flap_b);
}
static void test_late_listener(void **state) {
  (void)state;
  if (skip_all) skip();
  run_sides(41102, late_a, late_b);
}
static void test_lasting_outage(void **state) {
  (void)state;
  if (skip_all) skip();
  run_sides(41103, outage_a, outage_b);
}
static void test_failure_told(void **state) {
  (void)state;
  if (skip_all) skip();
  run_sides(41104, told_a, told_b);
}

int main(void) {
  atexit(cleanup_at_exit);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_late_listener),
      cmocka_unit_test(test_flap_reconnect),
      cmocka_unit_test(test_lasting_outage),
      cmocka_unit_test(test_failure_told), /* last: it removes a route for good */
  };
  return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
