/* Abandoned connects between two hosts: an attacker in one network
 * namespace sends HELLOs whose transport handles name its own address on a
 * port where nftables drops every SYN, so the server's connects to it never
 * complete; then it goes away. Before, three such HELLOs took the server
 * from 8 to 398 fds for good; now every round leaves the server's fds at
 * their baseline within the setup deadline (docs/SECURITY.md, "Abandoned
 * connects"). The server runs in namespace A (198.18.1.1), the attacker in
 * B (198.18.1.2); both are forked children, the parent bounds them. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include "common/le.h"
#include "common/util.h"
#include "eng.h"
#include "engine/wire.h"
#include "netns.h"
#include "sock/wire.h"

#define CTRL_PORT 41000  /* fixed: nothing else lives in these namespaces */
#define DROP_PORT 41999  /* SYNs to it are dropped in B */
#define NCH 3
#define NSOCKS 64
#define CONNS (NCH * (NSOCKS + 1))
#define ROUNDS 6
#define SETUP_MS 2000     /* TPX_CONNECT_TIMEOUT_MS of the server */
#define STEP_MS 20000     /* bound of any one wait for the other side */
#define CHILD_LIMIT_MS 120000

#define CK(cond, ...)                                                                              \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "[syn-drop] FAILED at line %d: ", __LINE__);                                 \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, "\n");                                                                       \
      fflush(NULL);                                                                                \
      _exit(10);                                                                                   \
    }                                                                                              \
  } while (0)

static void say(int fd, char c) { CK(write(fd, &c, 1) == 1, "pipe write: %s", strerror(errno)); }

static char hear(int fd) {
  struct pollfd p = {fd, POLLIN, 0};
  CK(poll(&p, 1, STEP_MS) == 1, "the other side said nothing for %d ms", STEP_MS);
  char c = 0;
  CK(read(fd, &c, 1) == 1, "the other side went away");
  return c;
}

/* fds of this process at least (cmp > 0) / at most (cmp < 0) want, within ms. */
static int fds_reach(int want, int cmp, int ms) {
  uint64_t end = tpx__now_ns() + (uint64_t)ms * 1000000ull;
  int n = tu_count_fds();
  while ((cmp > 0 ? n < want : n > want) && tpx__now_ns() < end) {
    usleep(5000);
    n = tu_count_fds();
  }
  return n;
}

/* The server: each round, the attacker's HELLO makes it dial CONNS sockets
 * (seen as its fds rising), the attacker leaves (or the setup deadline
 * passes, in the last round), and its fds must be back within the deadline. */
static void server_main(const nn_topo_t *t, int to_b, int from_b) {
  CK(nn_enter(t->ns[0]) == 0, "cannot enter %s", t->ns[0]);
  CK(nn_wait_running(t->ifname[0][0], 10000) == 0, "%s not running", t->ifname[0][0]);
  tpx_config_t cfg;
  eng_cfg(&cfg);
  snprintf(cfg.socket_ifname, sizeof(cfg.socket_ifname), "=%s", t->ifname[0][0]);
  cfg.num_channels = NCH;
  cfg.connect_timeout_ms = SETUP_MS;
  tpx_endpoint_params_t p = {.name = "server", .listen_host = t->addr[0][0], .port = CTRL_PORT, .cfg = &cfg};
  tpx_endpoint_t *ep;
  CK(tpx_endpoint_create(&p, &ep) == 0, "endpoint: %s", tpx_last_error());
  int base = tu_count_fds();
  say(to_b, 'L');
  for (int r = 0; r < ROUNDS; r++) {
    CK(hear(from_b) == 'H', "round %d: no hello", r);
    int up = fds_reach(base + CONNS, 1, STEP_MS);
    CK(up >= base + CONNS, "round %d: %d sockets dialled, %d expected", r, up - base, CONNS);
    say(to_b, 'D'); /* dialling: the attacker may go (or let the deadline pass) */
    uint64_t t0 = tpx__now_ns();
    /* the dialled sockets within the setup deadline; the control connection
     * may linger a moment more for the attacker's FIN (it sent none) */
    int left = fds_reach(base + 1, -1, SETUP_MS + 1500);
    CK(left <= base + 1, "round %d: %d fds still open %.0f ms later (baseline %d)", r, left,
       (double)(tpx__now_ns() - t0) / 1e6, base);
    left = fds_reach(base, -1, 3000);
    CK(left <= base, "round %d: %d fds open, baseline %d", r, left, base);
    printf("[syn-drop] round %d: %d sockets dialled, fds back at %d after %.0f ms\n", r, up - base, base,
           (double)(tpx__now_ns() - t0) / 1e6);
    say(to_b, 'B');
  }
  tpx_endpoint_destroy(ep);
  fflush(NULL);
  exit(0);
}

static void mk_handles(uint8_t *hs, const char *ip) {
  for (int c = 0; c < NCH; c++) {
    uint8_t *h = hs + c * TPX_NET_HANDLE_BYTES;
    memset(h, 0, TPX_NET_HANDLE_BYTES);
    tpx__put32(h + TPX_WH_MAGIC, TPX_WIRE_HANDLE_MAGIC);
    tpx__put16(h + TPX_WH_VERSION, TPX_WIRE_VERSION);
    tpx__put16(h + TPX_WH_FAMILY, 4);
    CK(inet_pton(AF_INET, ip, h + TPX_WH_ADDR) == 1, "address %s", ip);
    uint16_t np = htons(DROP_PORT);
    memcpy(h + TPX_WH_PORT, &np, 2);
    tpx__put16(h + TPX_WH_NSOCKS, NSOCKS);
  }
}

/* The attacker: SYNs to DROP_PORT dropped here, then ROUNDS HELLOs naming
 * it; it closes its control connection once the server is dialling, except
 * in the last round, where the server's setup deadline ends the peer. */
static void attacker_main(const nn_topo_t *t, int to_a, int from_a) {
  CK(nn_enter(t->ns[1]) == 0, "cannot enter %s", t->ns[1]);
  CK(nn_wait_running(t->ifname[1][0], 10000) == 0, "%s not running", t->ifname[1][0]);
  char cmd[256];
  snprintf(cmd, sizeof(cmd),
           "nft add table inet tpxdrop && nft add chain inet tpxdrop in '{ type filter hook input priority 0; }' && "
           "nft add rule inet tpxdrop in tcp dport %d tcp flags syn drop",
           DROP_PORT);
  CK(system(cmd) == 0, "nft rule refused: %s", cmd);
  CK(hear(from_a) == 'L', "server not listening");
  static uint8_t hs[NCH * TPX_NET_HANDLE_BYTES];
  mk_handles(hs, t->addr[1][0]);
  for (int r = 0; r < ROUNDS; r++) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(CTRL_PORT)};
    inet_pton(AF_INET, t->addr[0][0], &sa.sin_addr);
    CK(fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) == 0, "connect: %s", strerror(errno));
    struct tpx__wbuf w = {0};
    struct tpx__wire_hello h = {80 + (uint64_t)r, 0, NCH, 0, "syn-dropper", hs};
    CK(tpx__wire_put_hello(&w, 0, &h) == 0 && send(fd, w.p, w.len, 0) == (ssize_t)w.len, "hello");
    tpx__wbuf_free(&w);
    say(to_a, 'H');
    CK(hear(from_a) == 'D', "round %d: server not dialling", r);
    if (r < ROUNDS - 1) close(fd);
    CK(hear(from_a) == 'B', "round %d: server fds not back", r);
    if (r == ROUNDS - 1) close(fd);
  }
  fflush(NULL);
  exit(0);
}

static nn_topo_t topo;

static void cleanup_at_exit(void) { nn_topo_destroy(&topo); }

static int teardown(void **state) {
  (void)state;
  assert_int_equal(nn_topo_destroy(&topo), 0);
  return 0;
}

static pid_t spawn(int which, int wfd, int rfd, int close1, int close2) {
  pid_t parent = getpid(), k = fork();
  assert_true(k >= 0);
  if (k == 0) {
    if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != parent) _exit(11);
    close(close1);
    close(close2);
    if (which == 0) server_main(&topo, wfd, rfd);
    attacker_main(&topo, wfd, rfd);
  }
  return k;
}

static void test_syn_dropped_connects_closed(void **state) {
  (void)state;
  const char *why = "";
  if (system("nft --version > /dev/null 2>&1") != 0) {
    print_message("SKIPPED: nft (nftables) not found\n");
    skip();
  }
  int rc = nn_topo_create(&topo, 1, &why);
  if (rc == NN_SKIP) {
    print_message("SKIPPED: %s\n", why);
    skip();
  }
  if (rc != NN_OK) fail_msg("%s", why);
  fflush(NULL);
  int ab[2], ba[2]; /* server -> attacker, attacker -> server */
  assert_int_equal(pipe(ab), 0);
  assert_int_equal(pipe(ba), 0);
  pid_t kid[2];
  kid[0] = spawn(0, ab[1], ba[0], ab[0], ba[1]);
  kid[1] = spawn(1, ba[1], ab[0], ab[1], ba[0]);
  close(ab[0]), close(ab[1]), close(ba[0]), close(ba[1]);
  int st[2] = {-1, -1}, left = 2;
  uint64_t until = tpx__now_ns() + (uint64_t)CHILD_LIMIT_MS * 1000000ull;
  while (left > 0 && tpx__now_ns() < until) {
    for (int i = 0; i < 2; i++) {
      int s;
      if (st[i] == -1 && waitpid(kid[i], &s, WNOHANG) == kid[i]) st[i] = s, left--;
    }
    if (left) usleep(20000);
  }
  for (int i = 0; i < 2; i++) {
    if (st[i] != -1) continue;
    kill(kid[i], SIGKILL);
    while (waitpid(kid[i], &st[i], 0) < 0 && errno == EINTR) {
    }
    fail_msg("%s still running after %d ms", i ? "attacker" : "server", CHILD_LIMIT_MS);
  }
  for (int i = 0; i < 2; i++)
    if (!WIFEXITED(st[i]) || WEXITSTATUS(st[i]) != 0)
      fail_msg("%s failed (status %d)", i ? "attacker" : "server", st[i]);
}

int main(void) {
  atexit(cleanup_at_exit);
  const struct CMUnitTest tests[] = {
      cmocka_unit_test_teardown(test_syn_dropped_connects_closed, teardown),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
