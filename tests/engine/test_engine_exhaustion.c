/* Exhaustion by unauthenticated peers, in one process: what a peer that
 * never completes anything can make the server hold (descriptors,
 * pre-handshake slots, log volume, notification memory) stays bounded by
 * the settings docs/SECURITY.md names, a legitimate peer still connects and
 * transfers, and the server is back at its baseline once the attack stops. */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/util.h"
#include "eng.h"
#include "engine/endpoint.h"
#include "engine/wire.h"
#include "sock/wire.h"

/* ---- shared pieces --------------------------------------------------------- */

static void mk_handle(uint8_t *h, uint16_t port, int nsocks) {
  memset(h, 0, TPX_NET_HANDLE_BYTES);
  tpx__put32(h + TPX_WH_MAGIC, TPX_WIRE_HANDLE_MAGIC);
  tpx__put16(h + TPX_WH_VERSION, TPX_WIRE_VERSION);
  tpx__put16(h + TPX_WH_FAMILY, 4);
  assert_int_equal(inet_pton(AF_INET, "127.0.0.1", h + TPX_WH_ADDR), 1);
  uint16_t np = htons(port);
  memcpy(h + TPX_WH_PORT, &np, 2);
  tpx__put16(h + TPX_WH_NSOCKS, (uint16_t)nsocks);
}

static void send_hello(int fd, const uint8_t *handles, int nch) {
  struct wbuf w = {0};
  struct wire_hello h = {79, 0, (uint16_t)nch, 0, "dangler", handles};
  assert_int_equal(tpx__wire_put_hello(&w, 0, &h), 0);
  assert_true(send(fd, w.p, w.len, 0) == (ssize_t)w.len);
  tpx__wbuf_free(&w);
}

static int fds_now(void) {
  eng_res_t r;
  eng_res_now(&r);
  return r.fds;
}

/* Wait until this process has at most (cmp < 0) or at least (cmp > 0)
 * `want` fds, for ms at most; returns the last count. */
static int fds_wait(int want, int cmp, int ms) {
  uint64_t end = tpx__now_ns() + (uint64_t)ms * 1000000ull;
  int n = fds_now();
  while ((cmp < 0 ? n > want : n < want) && tpx__now_ns() < end) {
    usleep(5000);
    n = fds_now();
  }
  return n;
}

/* ---- connects that never complete ------------------------------------------ */

/* A loopback listener that never accepts and whose accept queue is full
 * (backlog 0, one connection queued): the kernel drops every further SYN,
 * so a connect to it stays in SYN_SENT for as long as it is not closed. */
typedef struct blackhole {
  int lfd, filler;
  uint16_t port;
} blackhole_t;

static void blackhole_open(blackhole_t *b) {
  b->lfd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  assert_int_equal(bind(b->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(b->lfd, 0), 0);
  socklen_t sl = sizeof(sa);
  assert_int_equal(getsockname(b->lfd, (struct sockaddr *)&sa, &sl), 0);
  b->port = ntohs(sa.sin_port);
  b->filler = eng_raw_connect(b->port);
}

static void blackhole_close(blackhole_t *b) {
  close(b->filler);
  close(b->lfd);
}

/* Connections in SYN_SENT towards port (from /proc/net/tcp). */
static int syn_sent_to(uint16_t port) {
  FILE *f = fopen("/proc/net/tcp", "r");
  if (!f) return -1;
  char line[256];
  int n = 0;
  while (fgets(line, sizeof(line), f)) {
    unsigned rport = 0, st = 0;
    if (sscanf(line, " %*d: %*x:%*x %*x:%x %x", &rport, &st) == 2 && rport == port && st == 2) n++;
  }
  fclose(f);
  return n;
}

enum { DANGLE_CH = 4, DANGLE_NSOCKS = 64, DANGLE_CONNS = DANGLE_CH * (DANGLE_NSOCKS + 1) };

/* One attacker: a HELLO whose handles name the blackhole (its own address:
 * it may be dialled there), then `end`: 0 closes the control connection as
 * soon as the server is dialling, 1 waits for the server's setup deadline.
 * The server's fds must be back at `base` within the setup deadline. */
static void dangle_once(int port, const blackhole_t *b, int base, int end, int timeout_ms) {
  static uint8_t hs[DANGLE_CH * TPX_NET_HANDLE_BYTES];
  for (int c = 0; c < DANGLE_CH; c++) mk_handle(hs + c * TPX_NET_HANDLE_BYTES, b->port, DANGLE_NSOCKS);
  int fd = eng_raw_connect(port);
  send_hello(fd, hs, DANGLE_CH);
  int up = fds_wait(base + DANGLE_CONNS, 1, 5000); /* the server dials every socket */
  if (up < base + DANGLE_CONNS) fail_msg("the server dialled only %d sockets", up - base);
  uint64_t t0 = tpx__now_ns();
  if (end == 0) {
    close(fd);
  } else {
    static uint8_t buf[1 << 16];
    eng_read_to_eof(fd, buf, sizeof(buf)); /* the setup deadline drops us */
    close(fd);
  }
  int left = fds_wait(base, -1, timeout_ms + 2000);
  double ms = (double)(tpx__now_ns() - t0) / 1e6;
  if (left > base) fail_msg("%d fds still open %.0f ms after the attacker's peer ended (base %d)", left, ms, base);
}

static void legit_transfer(tpx_endpoint_t *a, tpx_endpoint_t *b, uint32_t seed) {
  tpx_peer_t *ab, *ba;
  eng_connect(a, b, &ab, &ba);
  eng_buf_t x, y;
  eng_buf(a, 1 << 20, 0, &x);
  eng_buf(b, 1 << 20, TPX_ACCESS_WRITE, &y);
  eng_write_check(ab, &x, &y, seed);
  eng_buf_free(&x);
  eng_buf_free(&y);
  tpx_peer_close(ab);
  tpx_peer_close(ba);
}

/* A peer's HELLO named a listener that never completes a connection, and
 * the peer went away (or hit the setup deadline): every socket the server
 * had dialled stayed open until the endpoint was destroyed (8 -> 73 fds per
 * HELLO; with a low fd limit two HELLOs starved the listener). Now the
 * channel's close gives the connects up. */
static void test_attack_dangling_connects(void **state) {
  (void)state;
  enum { ROUNDS = 25 };
  tpx_config_t cfg;
  eng_cfg(&cfg);
  cfg.num_channels = DANGLE_CH;
  cfg.connect_timeout_ms = 1500;
  eng_res_t base;
  eng_res_now(&base);
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  blackhole_t b;
  blackhole_open(&b);
  int port = tpx_endpoint_port(P.b), fd0 = fds_now();
  /* the first round shows the connects really never complete */
  static uint8_t hs[DANGLE_CH * TPX_NET_HANDLE_BYTES];
  for (int c = 0; c < DANGLE_CH; c++) mk_handle(hs + c * TPX_NET_HANDLE_BYTES, b.port, DANGLE_NSOCKS);
  int fd = eng_raw_connect(port);
  send_hello(fd, hs, DANGLE_CH);
  fds_wait(fd0 + DANGLE_CONNS, 1, 5000);
  int syn = syn_sent_to(b.port);
  print_message("dangling connects: %d in SYN_SENT towards the blackhole\n", syn);
  assert_true(syn > DANGLE_CONNS / 2);
  close(fd);
  assert_int_equal(fds_wait(fd0, -1, cfg.connect_timeout_ms), fd0);
  for (int i = 0; i < ROUNDS; i++) dangle_once(port, &b, fd0, 0, cfg.connect_timeout_ms);
  dangle_once(port, &b, fd0, 1, cfg.connect_timeout_ms); /* the setup deadline ends it */
  print_message("dangling connects: %d rounds of %d sockets, fds back at %d each time\n", ROUNDS + 1,
                DANGLE_CONNS, fd0);
  legit_transfer(P.a, P.b, 91);
  assert_int_equal(tpx_peer_status(P.ab), 0);
  blackhole_close(&b);
  eng_pair_close(&P);
  eng_res_settled(&base, 64 << 10);
}

/* The same through a transport that cannot give a connect up (as an ncclNet
 * plugin: no connect_abort): the endpoint keeps calling connect until the
 * transport ends it (here at its own connect timeout), then nothing is
 * left. */
static void test_attack_dangling_connects_plugin(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  cfg.num_channels = DANGLE_CH;
  cfg.connect_timeout_ms = 1000;
  eng_res_t base;
  eng_res_now(&base);
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  static eng_proxy_t plain = {0}; /* every call through, no connect_abort */
  eng_proxy_install(P.b, &plain);
  assert_null(P.b->net->ops->connect_abort);
  blackhole_t b;
  blackhole_open(&b);
  int port = tpx_endpoint_port(P.b), fd0 = fds_now();
  for (int i = 0; i < 3; i++) dangle_once(port, &b, fd0, i == 2, 2 * cfg.connect_timeout_ms);
  pthread_mutex_lock(&P.b->lock);
  assert_null(P.b->abandoned);
  pthread_mutex_unlock(&P.b->lock);
  eng_proxy_remove(P.b, &plain);
  legit_transfer(P.a, P.b, 92);
  blackhole_close(&b);
  eng_pair_close(&P);
  eng_res_settled(&base, 64 << 10);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_attack_dangling_connects),
      cmocka_unit_test(test_attack_dangling_connects_plugin),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
