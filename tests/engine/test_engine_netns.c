/* Four NICs: two network namespaces joined by four veth links, each link one
 * net device of the built-in transport (socket_ifname lists the four veths,
 * 8 channels spread round robin over them). Two forked processes, one per
 * namespace, run writes, send/recv both ways and a read of 64 MiB; every byte
 * is checked, and the interface byte counters of each namespace show that
 * each of the four links carried at least a tenth of every phase's payload in
 * the direction of the data. Then one link goes down in the middle of a write:
 * the write fails with an error within the deadline (TPX_TIMEOUT_MS) instead
 * of hanging; with the link back up the same endpoints connect again and a
 * write again uses all four links; then the link goes down in the middle of
 * a read (data the other way), which fails within the deadline as well. Both
 * processes tear down with no descriptor left open (and, in sanitizer builds,
 * no leak).
 *
 * This is fixed striping (TPX_STRIPE=fixed), as with a peer without adaptive
 * striping; test_engine_failover holds what adaptive striping does instead.
 *
 * Needs root (CAP_SYS_ADMIN, CAP_NET_ADMIN) and iproute2; skipped otherwise.
 * Addresses: 198.18.<k>.1 (side A) <-> 198.18.<k>.2 (side B), k = 1..4. */
#define _GNU_SOURCE
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "eng.h"
#include "netns.h"

#define NLINK 4
#define NCH 8 /* two channels per link */
#define SIZE (64u << 20)
#define WRITES 3
#define TIMEOUT_MS 3000 /* TPX_TIMEOUT_MS of both sides */
#define CTRL_PORT 41000 /* fixed: nothing else lives in these namespaces */
#define STEP_MS 60000   /* bound of any one wait for the other side */
#define CHILD_LIMIT_MS 200000
#define DOWN_LINK 2 /* index of the link taken down (not link 0: control plane) */

/* ---------------- the two sides (forked children, no cmocka asserts) ---------------- */

#define CK NN_CK

struct snap {
  uint64_t tx[NLINK], rx[NLINK];
};

static void snap(nn_side_t *s, struct snap *o) {
  for (int k = 0; k < NLINK; k++) {
    CK(s, nn_counter(s->t->ifname[s->me][k], "tx_bytes", &o->tx[k]) == 0, "tx counter of %s",
       s->t->ifname[s->me][k]);
    CK(s, nn_counter(s->t->ifname[s->me][k], "rx_bytes", &o->rx[k]) == 0, "rx counter of %s",
       s->t->ifname[s->me][k]);
  }
}

/* Each link carried >= 10% of the payload in the data's direction, as this
 * side's counters see it (tx when sending, rx when receiving); the links
 * together at least all of it. */
static void check_spread(nn_side_t *s, const char *phase, const struct snap *a,
                         const struct snap *b, int sending, uint64_t payload) {
  uint64_t sum = 0;
  char line[256];
  int off =
      snprintf(line, sizeof(line), "[netns %c] %-12s %s:", s->tag, phase, sending ? "tx" : "rx");
  for (int k = 0; k < NLINK; k++) {
    uint64_t d = sending ? b->tx[k] - a->tx[k] : b->rx[k] - a->rx[k];
    sum += d;
    off += snprintf(line + off, sizeof(line) - (size_t)off, " %s %.1f%%", s->t->ifname[s->me][k],
                    100.0 * (double)d / (double)payload);
  }
  printf("%s\n", line);
  fflush(stdout);
  for (int k = 0; k < NLINK; k++) {
    uint64_t d = sending ? b->tx[k] - a->tx[k] : b->rx[k] - a->rx[k];
    CK(s, d >= payload / 10, "%s: link %s carried %" PRIu64 " bytes %s, less than 10%% of %" PRIu64,
       phase, s->t->ifname[s->me][k], d, sending ? "out" : "in", payload);
  }
  CK(s, sum >= payload, "%s: the links carried %" PRIu64 " bytes, less than the payload %" PRIu64,
     phase, sum, payload);
}

static void notify(nn_side_t *s, const char *msg) {
  int rc = tpx_notify(s->peer, msg, strlen(msg));
  CK(s, rc == 0, "notify '%s': %s", msg, tpx_strerror(rc));
}

static void expect(nn_side_t *s, const char *want) {
  tpx_notif_t n;
  int rc = tpx_wait_notif(s->ep, STEP_MS, &n);
  CK(s, rc == 1, "waiting for notification '%s': %s", want, rc == 0 ? "none" : tpx_strerror(rc));
  CK(s, n.len == strlen(want) && memcmp(n.msg, want, n.len) == 0,
     "notification '%.*s', expected '%s'", (int)n.len, (const char *)n.msg, want);
}

static void finish(nn_side_t *s, tpx_xfer_t *x, const char *what) {
  int rc = tpx_xfer_wait(x, STEP_MS);
  CK(s, rc == 0, "%s: %s", what, tpx_strerror(rc));
}

static void verify(nn_side_t *s, uint32_t seed, const char *what) {
  size_t bad = tu_check(s->buf, SIZE, seed, 0);
  CK(s, bad == SIZE_MAX, "%s: byte %zu differs", what, bad);
}

static void open_side(nn_side_t *s, int ready_fd) {
  tpx_config_t cfg;
  eng_cfg(&cfg); /* the environment (strict mode), then ours */
  cfg.num_channels = NCH;
  cfg.timeout_ms = TIMEOUT_MS;
  cfg.progress_thread = 1;
  cfg.stripe = 0; /* fixed striping: a lost link fails the transfer (test_engine_failover: adaptive) */
  nn_side_open(s, NLINK, &cfg, CTRL_PORT, SIZE, ready_fd, STEP_MS);
  CK(s, tpx_peer_num_channels(s->peer) == NCH, "%d channels", tpx_peer_num_channels(s->peer));
}

static void close_side(nn_side_t *s) {
  double t0 = nn_now_ms();
  nn_side_close(s);
  printf("[netns %c] teardown %.0f ms\n", s->tag, nn_now_ms() - t0);
}

/* A: one of our links goes down in the middle of a write (our tx) or a
 * read (our rx); the transfer must fail with an error within the deadline.
 * A busy machine may let the link move its whole share before the down
 * (then the transfer rightly succeeds): the counter read after the down
 * tells, and we try again; after six misses the link goes down first. */
static void a_dead_link(nn_side_t *s, int read) {
  const char *dev = s->t->ifname[0][DOWN_LINK], *what = read ? "read" : "write";
  const char *ctr = read ? "rx_bytes" : "tx_bytes";
  tpx_xfer_t *x = NULL;
  double t_down = 0, took = 0;
  int rc = 0;
  for (int attempt = 0; attempt < 7 && rc == 0; attempt++) {
    int late = attempt == 6;
    uint64_t c0 = 0, c = 0;
    CK(s, nn_counter(dev, ctr, &c0) == 0, "counter");
    if (late) {
      printf("[netns A] %ss outran the link-down; posting with %s already down\n", what, dev);
      CK(s, nn_link_set(dev, 0) == 0, "set %s down", dev);
      t_down = nn_now_ms();
    }
    rc = read ? tpx_read(s->peer, s->mem, 0, s->remote, 0, SIZE, &x)
              : tpx_write(s->peer, s->mem, 0, s->remote, 0, SIZE, NULL, 0, &x);
    CK(s, rc == 0, "post %s: %s", what, tpx_strerror(rc));
    if (!late) {
      double until = nn_now_ms() + 5000;
      while (nn_now_ms() < until && tpx_xfer_test(x) == TPX_EINPROGRESS) {
        CK(s, nn_counter(dev, ctr, &c) == 0, "counter");
        if (c - c0 >= (256u << 10)) break;
      }
      CK(s, nn_link_set(dev, 0) == 0, "set %s down: %s", dev, strerror(errno));
      t_down = nn_now_ms();
    }
    CK(s, nn_counter(dev, ctr, &c) == 0, "counter"); /* final: the link is down */
    double until = t_down + 4 * TIMEOUT_MS + 10000;
    while ((rc = tpx_xfer_test(x)) == TPX_EINPROGRESS && nn_now_ms() < until)
      usleep(1000);
    took = nn_now_ms() - t_down;
    if (rc == 0) {
      /* Bytes that never crossed the link cannot have landed. */
      CK(s, !late && c - c0 >= SIZE / NLINK,
         "%s succeeded although %s carried only %" PRIu64 " of its %u bytes", what, dev, c - c0,
         SIZE / NLINK);
      printf("[netns A] %s moved its whole share before going down; again\n", dev);
      tpx_xfer_free(x);
      x = NULL;
      CK(s, nn_link_set(dev, 1) == 0, "set %s up", dev);
      CK(s, nn_wait_running(dev, 10000) == 0, "%s not running again", dev);
    } else if (!late) {
      printf("[netns A] %s down after %.2f of its %u MiB of the %s\n", dev,
             (double)(c - c0) / (1 << 20), SIZE / NLINK >> 20, what);
    }
  }
  char detail[512];
  snprintf(detail, sizeof(detail), "%s", tpx_last_error());
  printf("[netns A] %s over a dead link: %s after %.0f ms: %s\n", what, tpx_strerror(rc), took,
         detail);
  CK(s, rc != TPX_EINPROGRESS, "%s still in flight %.0f ms after %s went down", what, took, dev);
  CK(s, rc < 0, "%s over a dead link succeeded", what);
  /* The per-request deadline plus slack for a loaded machine. */
  CK(s, took <= TIMEOUT_MS + 3000, "error after %.0f ms, deadline %d ms", took, TIMEOUT_MS);
  CK(s, tpx_peer_status(s->peer) != 0, "peer still reported usable");
  tpx_xfer_free(x);
}

/* B: after a dead-link phase announced by `tag`, our side of the peer must
 * fail too (its own deadline, or A's report, or A closing). */
static void b_dead_link(nn_side_t *s, const char *tag) {
  notify(s, tag);
  int rc;
  double until = nn_now_ms() + 7 * (4 * TIMEOUT_MS + 10000 + 5000);
  while ((rc = tpx_peer_status(s->peer)) == 0 && nn_now_ms() < until) {
    tpx_notif_t n;
    (void)tpx_wait_notif(s->ep, 50, &n); /* drain; A sends none here */
  }
  printf("[netns B] peer status after the link went down: %s\n", tpx_strerror(rc));
  CK(s, rc != 0, "peer still usable long after a link went down");
}

/* Phases, A's view. Each side checks its own counters. */
static void run_a(nn_side_t *s) {
  struct snap b0, b1;
  tpx_xfer_t *x = NULL;
  int rc;
  /* 1. writes A -> B */
  expect(s, "W?");
  snap(s, &b0);
  for (int i = 0; i < WRITES; i++) {
    char nt[8];
    snprintf(nt, sizeof(nt), "W%d", i);
    tu_fill(s->buf, SIZE, 100 + (uint32_t)i, 0);
    rc = tpx_write(s->peer, s->mem, 0, s->remote, 0, SIZE, nt, strlen(nt), &x);
    CK(s, rc == 0, "post write %d: %s", i, tpx_strerror(rc));
    finish(s, x, "write");
    tpx_xfer_free(x);
    expect(s, "ok");
  }
  snap(s, &b1);
  check_spread(s, "write A->B", &b0, &b1, 1, (uint64_t)WRITES * SIZE);
  /* 2. send A -> B */
  expect(s, "S?");
  snap(s, &b0);
  tu_fill(s->buf, SIZE, 200, 0);
  rc = tpx_send(s->peer, s->mem, 0, SIZE, 5, &x);
  CK(s, rc == 0, "post send: %s", tpx_strerror(rc));
  finish(s, x, "send");
  tpx_xfer_free(x);
  expect(s, "ok");
  snap(s, &b1);
  check_spread(s, "send A->B", &b0, &b1, 1, SIZE);
  /* 3. send B -> A */
  snap(s, &b0);
  memset(s->buf, 0, SIZE);
  rc = tpx_recv(s->peer, s->mem, 0, SIZE, 6, &x);
  CK(s, rc == 0, "post recv: %s", tpx_strerror(rc));
  notify(s, "R?");
  finish(s, x, "recv");
  CK(s, tpx_xfer_received(x) == SIZE, "received %zu bytes", tpx_xfer_received(x));
  tpx_xfer_free(x);
  verify(s, 300, "send B->A");
  snap(s, &b1);
  notify(s, "ok");
  check_spread(s, "send B->A", &b0, &b1, 0, SIZE);
  /* 4. read: A pulls B's buffer */
  expect(s, "D?");
  snap(s, &b0);
  memset(s->buf, 0, SIZE);
  rc = tpx_read(s->peer, s->mem, 0, s->remote, 0, SIZE, &x);
  CK(s, rc == 0, "post read: %s", tpx_strerror(rc));
  finish(s, x, "read");
  tpx_xfer_free(x);
  verify(s, 400, "read B->A");
  snap(s, &b1);
  notify(s, "ok");
  check_spread(s, "read B->A", &b0, &b1, 0, SIZE);

  /* 5. a link goes down in the middle of a write */
  expect(s, "X?");
  tu_fill(s->buf, SIZE, 500, 0);
  a_dead_link(s, 0);

  /* 6. the endpoint survives: link up again, a new peer, all four links used */
  const char *dev = s->t->ifname[0][DOWN_LINK];
  tpx_peer_close(s->peer);
  s->peer = NULL;
  CK(s, nn_link_set(dev, 1) == 0, "set %s up", dev);
  CK(s, nn_wait_running(dev, 10000) == 0, "%s not running again", dev);
  rc = tpx_connect(s->ep, s->t->addr[1][0], CTRL_PORT, &s->peer);
  CK(s, rc == 0, "reconnect: %s", tpx_strerror(rc));
  expect(s, "W?"); /* B has read its counters: only now may the bytes flow */
  snap(s, &b0);
  tu_fill(s->buf, SIZE, 600, 0);
  rc = tpx_write(s->peer, s->mem, 0, s->remote, 0, SIZE, "Y", 1, &x);
  CK(s, rc == 0, "post write: %s", tpx_strerror(rc));
  finish(s, x, "write after recovery");
  tpx_xfer_free(x);
  expect(s, "ok");
  snap(s, &b1);
  check_spread(s, "write again", &b0, &b1, 1, SIZE);

  /* 7. a link goes down in the middle of a read (data B -> A) */
  expect(s, "Z?");
  a_dead_link(s, 1);
}

static void run_b(nn_side_t *s) {
  struct snap b0, b1;
  tpx_xfer_t *x = NULL;
  int rc;
  /* 1. writes A -> B, each verified before the next */
  snap(s, &b0);
  notify(s, "W?");
  for (int i = 0; i < WRITES; i++) {
    char nt[8];
    snprintf(nt, sizeof(nt), "W%d", i);
    expect(s, nt);
    verify(s, 100 + (uint32_t)i, "write A->B");
    if (i == WRITES - 1) snap(s, &b1);
    notify(s, "ok");
  }
  check_spread(s, "write A->B", &b0, &b1, 0, (uint64_t)WRITES * SIZE);
  /* 2. send A -> B */
  snap(s, &b0);
  memset(s->buf, 0, SIZE);
  rc = tpx_recv(s->peer, s->mem, 0, SIZE, 5, &x);
  CK(s, rc == 0, "post recv: %s", tpx_strerror(rc));
  notify(s, "S?");
  finish(s, x, "recv");
  CK(s, tpx_xfer_received(x) == SIZE, "received %zu bytes", tpx_xfer_received(x));
  tpx_xfer_free(x);
  verify(s, 200, "send A->B");
  snap(s, &b1);
  notify(s, "ok");
  check_spread(s, "send A->B", &b0, &b1, 0, SIZE);
  /* 3. send B -> A */
  expect(s, "R?");
  snap(s, &b0);
  tu_fill(s->buf, SIZE, 300, 0);
  rc = tpx_send(s->peer, s->mem, 0, SIZE, 6, &x);
  CK(s, rc == 0, "post send: %s", tpx_strerror(rc));
  finish(s, x, "send");
  tpx_xfer_free(x);
  expect(s, "ok");
  snap(s, &b1);
  check_spread(s, "send B->A", &b0, &b1, 1, SIZE);
  /* 4. A reads our buffer */
  tu_fill(s->buf, SIZE, 400, 0);
  snap(s, &b0);
  notify(s, "D?");
  expect(s, "ok");
  snap(s, &b1);
  check_spread(s, "read B->A", &b0, &b1, 1, SIZE);

  /* 5. link down under a write: our side of the peer must fail too, in time */
  b_dead_link(s, "X?");

  /* 6. A comes back as a new peer over the repaired link */
  tpx_peer_close(s->peer);
  s->peer = NULL;
  rc = tpx_accept(s->ep, STEP_MS, &s->peer);
  CK(s, rc == 0, "accept again: %s", tpx_strerror(rc));
  snap(s, &b0); /* then A may write (it waits for this go-ahead) */
  notify(s, "W?");
  expect(s, "Y");
  verify(s, 600, "write after recovery");
  snap(s, &b1);
  notify(s, "ok");
  check_spread(s, "write again", &b0, &b1, 0, SIZE);

  /* 7. link down under A's read of our buffer */
  tu_fill(s->buf, SIZE, 700, 0);
  b_dead_link(s, "Z?");
}

static void side_main(const nn_topo_t *t, int me, int ready_fd) {
  nn_side_t s;
  nn_side_enter(&s, t, me, "netns", NLINK);
  int fds = tu_count_fds();
  open_side(&s, ready_fd);
  double t0 = nn_now_ms();
  if (me)
    run_b(&s);
  else
    run_a(&s);
  printf("[netns %c] phases %.0f ms\n", s.tag, nn_now_ms() - t0);
  close_side(&s);
  /* Nothing of the endpoint is left open, the failed peer's comms included. */
  CK(&s, tu_count_fds() == fds, "%d file descriptors open after teardown, %d before",
     tu_count_fds(), fds);
  close(ready_fd);
  fflush(NULL);
  exit(0); /* exit, not _exit: the leak checker of sanitizer builds runs */
}

/* ---------------- the parent: topology, children, bounded wait ---------------- */

static nn_topo_t topo;

static void cleanup_at_exit(void) {
  nn_topo_destroy(&topo);
}

static int teardown(void **state) {
  (void)state;
  int rc = nn_topo_destroy(&topo);
  assert_int_equal(rc, 0);
  /* Nothing left: both namespaces gone (their veths with them). */
  for (int s = 0; s < 2; s++) {
    char path[96];
    snprintf(path, sizeof(path), "/run/netns/%s", topo.ns[s]);
    if (topo.ns[s][0]) assert_int_not_equal(access(path, F_OK), 0);
  }
  return 0;
}

static void test_four_nics(void **state) {
  (void)state;
  nn_test_sides(&topo, NLINK, side_main, CHILD_LIMIT_MS);
}

int main(void) {
  atexit(cleanup_at_exit);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_four_nics, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
