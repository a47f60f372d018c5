/* tpx-netbench: raw transport benchmark through the net loader (no engine).
 *
 *   tpx-netbench [options]                 loopback: one process, a send comm
 *                                          and a recv comm, one thread each
 *   tpx-netbench server [options]          receiver (waits for one client)
 *   tpx-netbench client HOST [options]     sender
 *
 * Bandwidth: `--iters` messages of `--size` bytes on one comm, `--inflight`
 * requests posted at once, after `--warmup` messages whose bytes are verified.
 * GB/s = 1e9 bytes per second, timed on each side from a common start to its
 * last completion. --latency adds a 4 KiB ping-pong on a second comm: one-way
 * latency = round trip / 2, median and p99. Host memory (malloc, regMr).
 * Every wait is bounded (--timeout-ms). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/utsname.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h" /* the environment's number rules: tools/internal.h */
#include "tpx/net.h"
#include "version.h"

enum { MODE_LOOPBACK, MODE_SERVER, MODE_CLIENT };

typedef struct opts {
  int mode;
  const char *host;
  int port;
  const char *plugin;
  const char *ifname;
  int dev;
  size_t size;
  int iters, warmup, inflight;
  int latency, lat_iters;
  size_t lat_size;
  int check;
  int timeout_ms;
} opts_t;

static opts_t O = {.mode = MODE_LOOPBACK, .port = 18515, .dev = -1, .size = 64u << 20,
                   .iters = 20, .warmup = 3, .inflight = 2, .lat_iters = 1000,
                   .lat_size = 4096, .timeout_ms = 60000};
static tpx_net_t *NET;
static int DEV;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* The message, the library's detail of the last failure when asked, exit. */
static void vquit(int status, int detail, const char *fmt, va_list ap) __attribute__((noreturn));
static void vquit(int status, int detail, const char *fmt, va_list ap) {
  fprintf(stderr, "tpx-netbench: ");
  vfprintf(stderr, fmt, ap);
  const char *d = detail ? tpx_last_error() : NULL;
  if (d && d[0]) fprintf(stderr, " [%s]", d);
  fprintf(stderr, "\n");
  exit(status);
}

static void die(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vquit(1, 1, fmt, ap);
}

/* A bad command line: named, exit status 2 (like tpx-bench). */
static void bad_arg(const char *fmt, ...) __attribute__((format(printf, 1, 2), noreturn));
static void bad_arg(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vquit(2, 0, fmt, ap);
}

/* A library call that failed: what, and its detail (which names the code). */
static void fail_call(const char *what, int rc) __attribute__((noreturn));
static void fail_call(const char *what, int rc) {
  fprintf(stderr, "tpx-netbench: %s: %s\n", what, tool_error(rc));
  exit(1);
}

#define CHECK(call, what)                                                                          \
  do {                                                                                             \
    int rc_ = (call);                                                                              \
    if (rc_ != 0) fail_call(what, rc_);                                                            \
  } while (0)

/* A cheap verifiable pattern: word k of buffer `seed`. */
static uint64_t pat(uint32_t seed, size_t k) {
  uint64_t x = ((uint64_t)seed << 32 | 0x5bd1e995u) ^ (k * 0x9E3779B97F4A7C15ull);
  return x ^ (x >> 31);
}
static void fill(unsigned char *p, size_t n, uint32_t seed) {
  for (size_t k = 0; k < n / 8; k++) {
    uint64_t w = pat(seed, k);
    memcpy(p + 8 * k, &w, 8);
  }
  for (size_t i = n & ~(size_t)7; i < n; i++) p[i] = (unsigned char)(seed + i);
}
static int verify(const unsigned char *p, size_t n, uint32_t seed) {
  for (size_t k = 0; k < n / 8; k++) {
    uint64_t w;
    memcpy(&w, p + 8 * k, 8);
    if (w != pat(seed, k)) return -1;
  }
  for (size_t i = n & ~(size_t)7; i < n; i++)
    if (p[i] != (unsigned char)(seed + i)) return -1;
  return 0;
}

/* ---------------------------------------------------- side channel (TCP) */

static int io_all(int fd, void *p, size_t n, int wr) {
  unsigned char *b = p;
  uint64_t deadline = now_ns() + (uint64_t)O.timeout_ms * 1000000u;
  size_t off = 0;
  while (off < n) {
    struct pollfd pf = {.fd = fd, .events = wr ? POLLOUT : POLLIN};
    int left = (int)((deadline - now_ns()) / 1000000u);
    if (now_ns() >= deadline || poll(&pf, 1, left > 0 ? left : 1) < 0) {
      if (errno == EINTR) continue;
      return -1;
    }
    if (!pf.revents) continue;
    ssize_t r = wr ? send(fd, b + off, n - off, MSG_NOSIGNAL | MSG_DONTWAIT)
                   : recv(fd, b + off, n - off, MSG_DONTWAIT);
    if (r > 0) off += (size_t)r;
    else if (r == 0 || (errno != EAGAIN && errno != EINTR)) return -1;
  }
  return 0;
}

static int sc_connect(const char *host, int port) {
  char ps[16];
  snprintf(ps, sizeof(ps), "%d", port);
  uint64_t deadline = now_ns() + (uint64_t)O.timeout_ms * 1000000u;
  while (now_ns() < deadline) {
    struct addrinfo hints = {.ai_socktype = SOCK_STREAM}, *res = NULL;
    int g = getaddrinfo(host, ps, &hints, &res);
    if (g) die("cannot resolve %s: %s", host, gai_strerror(g));
    for (struct addrinfo *a = res; a; a = a->ai_next) {
      int fd = socket(a->ai_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      if (fd < 0) continue;
      if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        freeaddrinfo(res);
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        return fd;
      }
      close(fd);
    }
    freeaddrinfo(res);
    usleep(200 * 1000);
  }
  die("no server at %s:%d within %d ms", host, port, O.timeout_ms);
}

static int sc_accept(int port) {
  int lfd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  int one = 1, zero = 0;
  struct sockaddr_in6 a = {.sin6_family = AF_INET6, .sin6_port = htons((uint16_t)port),
                           .sin6_addr = IN6ADDR_ANY_INIT};
  if (lfd < 0 || setsockopt(lfd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one)) ||
      setsockopt(lfd, IPPROTO_IPV6, IPV6_V6ONLY, &zero, sizeof(zero)) ||
      bind(lfd, (struct sockaddr *)&a, sizeof(a)) || listen(lfd, 1))
    die("side channel: cannot listen on port %d: %s", port, strerror(errno));
  printf("tpx-netbench: server waiting on port %d\n", port);
  fflush(stdout);
  struct pollfd pf = {.fd = lfd, .events = POLLIN};
  if (poll(&pf, 1, O.timeout_ms) != 1) die("no client within %d ms", O.timeout_ms);
  int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
  close(lfd);
  if (fd < 0) die("accept: %s", strerror(errno));
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

/* Two threads in one process meet at a barrier; two processes exchange a
 * byte over the side channel. */
typedef struct meet {
  int fd;
  pthread_barrier_t *bar;
} meet_t;

static void meet(meet_t *m) {
  if (m->bar) {
    pthread_barrier_wait(m->bar);
    return;
  }
  char c = 'm';
  if (io_all(m->fd, &c, 1, 1) || io_all(m->fd, &c, 1, 0)) die("side channel lost");
}

/* ------------------------------------------------------------- links */

typedef struct link {
  unsigned char handle[TPX_NET_HANDLE_BYTES], chandle[TPX_NET_HANDLE_BYTES];
  void *lcomm, *scomm, *rcomm;
  _Alignas(16) tpx_net_dev_handle_t sdev, rdev;
} link_t;

static void do_listen(link_t *l) {
  CHECK(NET->ops->listen(NET, DEV, l->handle, &l->lcomm), "listen");
  memcpy(l->chandle, l->handle, sizeof(l->handle));
}

/* Retry connect/accept with the same handle and listen comm until the local
 * ends are up (either may be absent). */
static void establish(link_t **ls, int n, int want_send, int want_recv) {
  uint64_t deadline = now_ns() + (uint64_t)O.timeout_ms * 1000000u;
  for (;;) {
    int pending = 0;
    for (int i = 0; i < n; i++) {
      link_t *l = ls[i];
      if ((want_send >> i & 1) && !l->scomm) {
        CHECK(NET->ops->connect(NET, DEV, l->chandle, &l->scomm, &l->sdev), "connect");
        pending += !l->scomm;
      }
      if ((want_recv >> i & 1) && !l->rcomm) {
        CHECK(NET->ops->accept(NET, l->lcomm, &l->rcomm, &l->rdev), "accept");
        pending += !l->rcomm;
      }
    }
    if (!pending) break;
    if (now_ns() > deadline) die("connect/accept did not finish within %d ms", O.timeout_ms);
    sched_yield();
  }
  for (int i = 0; i < n; i++)
    if (ls[i]->lcomm && ls[i]->rcomm) {
      CHECK(NET->ops->close_listen(NET, ls[i]->lcomm), "closeListen");
      ls[i]->lcomm = NULL;
    }
}

static void close_link(link_t *l) {
  if (l->scomm) CHECK(NET->ops->close_send(NET, l->scomm), "closeSend");
  if (l->rcomm) CHECK(NET->ops->close_recv(NET, l->rcomm), "closeRecv");
  if (l->lcomm) CHECK(NET->ops->close_listen(NET, l->lcomm), "closeListen");
  l->scomm = l->rcomm = l->lcomm = NULL;
}

/* ---------------------------------------------------------- bandwidth */

typedef struct bw {
  void *comm;
  int is_send;
  int unpack; /* data stays in the plugin's bounce pages: not verifiable */
  unsigned char **buf;
  void **mh;
  meet_t m;
  double secs;  /* timed phase */
  int verified; /* messages verified */
} bw_t;

/* Move `count` messages with up to O.inflight posted; message k uses buffer
 * k % inflight. Requests are tested oldest first only. */
static void bw_phase(bw_t *b, int count, int first, int check) {
  void *req[256];
  int posted = 0, done = 0;
  uint64_t deadline = now_ns() + (uint64_t)O.timeout_ms * 1000000u;
  while (done < count) {
    int moved = 0;
    while (posted < count && posted - done < O.inflight) {
      int k = first + posted, slot = k % O.inflight;
      void *r = NULL;
      if (b->is_send) {
        CHECK(NET->ops->isend(NET, b->comm, b->buf[slot], O.size, 0, b->mh[slot], &r), "isend");
      } else {
        void *d[1] = {b->buf[slot]};
        size_t s[1] = {O.size};
        int t[1] = {0};
        void *mh[1] = {b->mh[slot]};
        CHECK(NET->ops->irecv(NET, b->comm, 1, d, s, t, mh, &r), "irecv");
      }
      if (!r) break; /* back-pressure */
      req[posted % 256] = r;
      posted++;
      moved = 1;
    }
    if (posted > done) {
      int fin = 0;
      size_t got = SIZE_MAX;
      CHECK(NET->ops->test(NET, req[done % 256], &fin, &got), b->is_send ? "test(send)" : "test(recv)");
      if (fin) {
        int k = first + done, slot = k % O.inflight;
        if (!b->is_send) {
          if (b->unpack) {
            CHECK(NET->ops->irecv_consumed(NET, b->comm, 1, req[done % 256]), "irecvConsumed");
          } else {
            if (got != SIZE_MAX && got != O.size)
              die("message %d: received %zu bytes, expected %zu", k, got, O.size);
            if (check) {
              if (verify(b->buf[slot], O.size, (uint32_t)slot + 1) != 0)
                die("message %d: received bytes differ from the pattern", k);
              b->verified++;
            }
          }
        }
        done++;
        moved = 1;
        deadline = now_ns() + (uint64_t)O.timeout_ms * 1000000u;
      }
    }
    if (!moved) {
      if (now_ns() > deadline) die("no completion within %d ms (%d of %d done)", O.timeout_ms, done, count);
      sched_yield();
    }
  }
}

static void bw_alloc(bw_t *b) {
  b->buf = calloc((size_t)O.inflight, sizeof(*b->buf));
  b->mh = calloc((size_t)O.inflight, sizeof(*b->mh));
  if (!b->buf || !b->mh) die("out of memory");
  for (int i = 0; i < O.inflight; i++) {
    b->buf[i] = aligned_alloc(4096, (O.size + 4095) & ~(size_t)4095);
    if (!b->buf[i]) die("cannot allocate %zu bytes", O.size);
    if (b->is_send) fill(b->buf[i], O.size, (uint32_t)i + 1); /* sender's buffer i: seed i+1 */
    else memset(b->buf[i], 0, O.size);
    CHECK(NET->ops->reg_mr(NET, b->comm, b->buf[i], O.size, TPX_PTR_HOST, &b->mh[i]), "regMr");
  }
}

static void bw_free(bw_t *b) {
  for (int i = 0; i < O.inflight; i++) {
    CHECK(NET->ops->dereg_mr(NET, b->comm, b->mh[i]), "deregMr");
    free(b->buf[i]);
  }
  free(b->buf);
  free(b->mh);
}

static void *bw_run(void *arg) {
  bw_t *b = arg;
  bw_alloc(b);
  meet(&b->m);
  /* warm-up messages are verified: a benchmark of wrong bytes is worthless */
  bw_phase(b, O.warmup, 0, 1);
  meet(&b->m);
  uint64_t t0 = now_ns();
  bw_phase(b, O.iters, O.warmup, O.check);
  b->secs = (double)(now_ns() - t0) / 1e9;
  meet(&b->m);
  bw_free(b);
  return NULL;
}

/* ------------------------------------------------------------ latency */

typedef struct lat {
  void *scomm, *rcomm;
  int initiator; /* measures; the other side echoes */
  int unpack;
  meet_t m;
  double *rtt_us;
} lat_t;

static void wait_req(void *comm, void *r, int is_recv, int unpack, const char *what) {
  uint64_t deadline = now_ns() + (uint64_t)O.timeout_ms * 1000000u;
  for (;;) {
    int fin = 0;
    CHECK(NET->ops->test(NET, r, &fin, NULL), what);
    if (fin) break;
    if (now_ns() > deadline) die("%s: no completion within %d ms", what, O.timeout_ms);
    sched_yield(); /* the transport's own threads may need this core */
  }
  if (is_recv && unpack) CHECK(NET->ops->irecv_consumed(NET, comm, 1, r), "irecvConsumed");
}

static void *post_until(int is_send, void *comm, void *buf, void *mh) {
  uint64_t deadline = now_ns() + (uint64_t)O.timeout_ms * 1000000u;
  for (;;) {
    void *r = NULL;
    if (is_send) {
      CHECK(NET->ops->isend(NET, comm, buf, O.lat_size, 1, mh, &r), "isend");
    } else {
      void *d[1] = {buf};
      size_t s[1] = {O.lat_size};
      int t[1] = {1};
      void *m[1] = {mh};
      CHECK(NET->ops->irecv(NET, comm, 1, d, s, t, m, &r), "irecv");
    }
    if (r) return r;
    if (now_ns() > deadline) die("back-pressure for %d ms", O.timeout_ms);
    sched_yield();
  }
}

static void *lat_run(void *arg) {
  lat_t *L = arg;
  unsigned char *sb = aligned_alloc(4096, (O.lat_size + 4095) & ~(size_t)4095);
  unsigned char *rb = aligned_alloc(4096, (O.lat_size + 4095) & ~(size_t)4095);
  if (!sb || !rb) die("out of memory");
  fill(sb, O.lat_size, 99);
  void *smh, *rmh;
  CHECK(NET->ops->reg_mr(NET, L->scomm, sb, O.lat_size, TPX_PTR_HOST, &smh), "regMr");
  CHECK(NET->ops->reg_mr(NET, L->rcomm, rb, O.lat_size, TPX_PTR_HOST, &rmh), "regMr");
  int warm = O.lat_iters / 10 + 10;
  meet(&L->m);
  for (int i = 0; i < warm + O.lat_iters; i++) {
    if (L->initiator) {
      void *rr = post_until(0, L->rcomm, rb, rmh);
      uint64_t t0 = now_ns();
      void *sr = post_until(1, L->scomm, sb, smh);
      wait_req(L->scomm, sr, 0, 0, "test(ping)");
      wait_req(L->rcomm, rr, 1, L->unpack, "test(pong)");
      if (i >= warm) L->rtt_us[i - warm] = (double)(now_ns() - t0) / 1e3;
    } else {
      void *rr = post_until(0, L->rcomm, rb, rmh);
      wait_req(L->rcomm, rr, 1, L->unpack, "test(ping)");
      void *sr = post_until(1, L->scomm, sb, smh);
      wait_req(L->scomm, sr, 0, 0, "test(pong)");
    }
  }
  if (!L->unpack && verify(rb, O.lat_size, 99) != 0) die("latency: received bytes differ");
  meet(&L->m);
  CHECK(NET->ops->dereg_mr(NET, L->scomm, smh), "deregMr");
  CHECK(NET->ops->dereg_mr(NET, L->rcomm, rmh), "deregMr");
  free(sb);
  free(rb);
  return NULL;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static void report_latency(double *rtt) {
  qsort(rtt, (size_t)O.lat_iters, sizeof(double), cmp_d);
  double med = rtt[O.lat_iters / 2] / 2, p99 = rtt[(O.lat_iters * 99) / 100] / 2;
  printf("  latency  %zu B one-way (round trip / 2, %d iters): median %.1f us, p99 %.1f us\n",
         O.lat_size, O.lat_iters, med, p99);
  printf("RESULT latency_bytes=%zu median_us=%.2f p99_us=%.2f\n", O.lat_size, med, p99);
}

static void report_bw(double recv_s, double send_s) {
  double bytes = (double)O.size * O.iters;
  printf("  bandwidth %zu B x %d (+%d warm-up verified), %d in flight, 1 comm: "
         "%.2f GB/s at the receiver, %.2f GB/s at the sender (1 GB = 1e9 B)\n",
         O.size, O.iters, O.warmup, O.inflight, bytes / recv_s / 1e9, bytes / send_s / 1e9);
  printf("RESULT bw_bytes=%zu iters=%d inflight=%d recv_gbps=%.3f send_gbps=%.3f\n", O.size,
         O.iters, O.inflight, bytes / recv_s / 1e9, bytes / send_s / 1e9);
}

/* -------------------------------------------------------------- setup */

/* Numbers as the environment writes them (src/common/config.c's parser:
 * K/M/G suffixes, overflow refused); every refusal names the option. */
static size_t arg_size(const char *name, const char *v) {
  long long x;
  if (tpx__config_parse_number(v, &x) != 0 || x < 1 || x > (1LL << 40))
    bad_arg("%s %s: not a size in [1, %lld] (bytes; K, M, G suffixes)", name, v, 1LL << 40);
  return (size_t)x;
}

static int arg_int(const char *name, const char *v, long long lo, long long hi) {
  char *end;
  errno = 0;
  long long x = strtoll(v, &end, 10);
  if (errno || end == v || *end || x < lo || x > hi) bad_arg("%s %s: not an integer in [%lld, %lld]", name, v, lo, hi);
  return (int)x;
}

/* A setting the environment also has: its range, checked by its rule. */
static int arg_env(const char *name, const char *v, const char *var) {
  long long x, lo = 0, hi = 0;
  if (tpx__config_parse_var(var, v, &x) != 0) {
    (void)tpx__config_range(var, &lo, &hi);
    bad_arg("%s %s: not a number in [%lld, %lld] (the range of %s, docs/CONFIG.md)", name, v, lo, hi, var);
  }
  return (int)x;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: tpx-netbench [server | client HOST] [options]\n"
          "  (no mode)          loopback: send and recv comm in this process, two threads\n"
          "  server             wait for a client (receiver), --port\n"
          "  client HOST        connect to a server (sender)\n"
          "  --plugin SPEC      tpx | path/to/libnccl-net-X.so | name [default: TPX_NET_PLUGIN]\n"
          "  --dev N | --ifname NAME  device [default: lo if present, else 0]\n"
          "  --size S           message size, K/M/G suffixes [64M]\n"
          "  --iters N          timed messages [20]\n"
          "  --warmup N         verified warm-up messages [3]\n"
          "  --inflight N       requests posted at once on the comm [2]\n"
          "  --latency          also 4 KiB ping-pong latency (--lat-size, --lat-iters 1000)\n"
          "  --check            verify every timed message too\n"
          "  --port P           side channel port of server/client mode [18515]\n"
          "  --timeout-ms MS    deadline of every wait [60000]\n");
}

static void parse(int argc, char **argv) {
  int i = 1;
  if (i < argc && !strcmp(argv[i], "server")) O.mode = MODE_SERVER, i++;
  else if (i < argc && !strcmp(argv[i], "client")) {
    O.mode = MODE_CLIENT;
    if (++i >= argc) bad_arg("client needs HOST");
    O.host = argv[i++];
  } else if (i < argc && !strcmp(argv[i], "loopback")) i++;
  for (; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    int takes = 1;
    if (!strcmp(a, "--latency")) O.latency = 1, takes = 0;
    else if (!strcmp(a, "--check")) O.check = 1, takes = 0;
    else if (!strcmp(a, "-h") || !strcmp(a, "--help")) usage(stdout), exit(0);
    else if (!strstr(" --plugin --ifname --dev --size --lat-size --iters --warmup --inflight --lat-iters --port "
                     "--timeout-ms ", a) || a[0] != '-' || strchr(a, ' '))
      bad_arg("%s: unknown argument (see --help)", a);
    else if (!v) bad_arg("%s needs a value (see --help)", a);
    else if (!strcmp(a, "--plugin")) O.plugin = v;
    else if (!strcmp(a, "--ifname")) O.ifname = v;
    else if (!strcmp(a, "--dev")) O.dev = arg_int(a, v, 0, 1023);
    else if (!strcmp(a, "--size")) O.size = arg_size(a, v);
    else if (!strcmp(a, "--lat-size")) O.lat_size = arg_size(a, v);
    else if (!strcmp(a, "--iters")) O.iters = arg_int(a, v, 1, 100000000);
    else if (!strcmp(a, "--warmup")) O.warmup = arg_int(a, v, 0, 100000000);
    else if (!strcmp(a, "--inflight")) O.inflight = arg_int(a, v, 1, 256);
    else if (!strcmp(a, "--lat-iters")) O.lat_iters = arg_int(a, v, 10, 100000000);
    else if (!strcmp(a, "--port")) O.port = arg_env(a, v, "TPX_PORT_BASE");
    else if (!strcmp(a, "--timeout-ms")) O.timeout_ms = arg_env(a, v, "TPX_TIMEOUT_MS");
    else bad_arg("unknown argument %s (see --help)", a);
    i += takes;
  }
  if (O.port == 0 && O.mode != MODE_LOOPBACK) bad_arg("--port 0: server and client need a port of their own");
}

static void pick_device(tpx_net_props_t *p) {
  int ndev = 0;
  CHECK(NET->ops->devices(NET, &ndev), "devices");
  if (ndev < 1) die("the transport has no devices");
  DEV = O.dev;
  for (int d = 0; d < ndev && DEV < 0; d++) {
    CHECK(NET->ops->get_properties(NET, d, p), "getProperties");
    if (!strcmp(p->name, O.ifname ? O.ifname : "lo")) DEV = d;
  }
  if (DEV < 0 && O.ifname) die("no device named %s", O.ifname);
  if (DEV < 0) DEV = 0;
  if (DEV >= ndev) die("device %d out of range (%d)", DEV, ndev);
  CHECK(NET->ops->get_properties(NET, DEV, p), "getProperties");
  if (!(p->ptr_support & TPX_PTR_HOST))
    die("device %d '%s' takes no host memory (ptrSupport 0x%x)", DEV, p->name, p->ptr_support);
}

/* Parameters the client dictates to the server, in network byte order. */
struct params {
  uint64_t size, lat_size;
  uint32_t iters, warmup, inflight, latency, lat_iters, check;
};

/* Buffers of --inflight messages per side (two sides in loopback): refuse
 * what this machine cannot hold now rather than be granted it and die
 * touching it. */
static void check_memory(void) {
  long avail = sysconf(_SC_AVPHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
  unsigned long long need = (unsigned long long)O.size * (unsigned)O.inflight * (O.mode == MODE_LOOPBACK ? 2 : 1);
  if (avail > 0 && psz > 0 && need / (unsigned long long)psz >= (unsigned long long)avail)
    die("--size %zu x --inflight %d needs %llu bytes, more than this machine has free", O.size, O.inflight, need);
}

/* The side channel of server/client mode (-1 in loopback): the client
 * sends its parameters, the server takes them. */
static int side_channel(void) {
  if (O.mode == MODE_CLIENT) {
    int fd = sc_connect(O.host, O.port);
    struct params pr = {htobe64(O.size), htobe64(O.lat_size), htonl((uint32_t)O.iters),
                        htonl((uint32_t)O.warmup), htonl((uint32_t)O.inflight),
                        htonl((uint32_t)O.latency), htonl((uint32_t)O.lat_iters),
                        htonl((uint32_t)O.check)};
    if (io_all(fd, &pr, sizeof(pr), 1)) die("side channel: cannot send parameters");
    return fd;
  }
  if (O.mode != MODE_SERVER) return -1;
  int fd = sc_accept(O.port);
  struct params pr;
  if (io_all(fd, &pr, sizeof(pr), 0)) die("side channel: no parameters from the client");
  O.size = be64toh(pr.size), O.lat_size = be64toh(pr.lat_size);
  O.iters = (int)ntohl(pr.iters), O.warmup = (int)ntohl(pr.warmup);
  O.inflight = (int)ntohl(pr.inflight), O.latency = (int)ntohl(pr.latency);
  O.lat_iters = (int)ntohl(pr.lat_iters), O.check = (int)ntohl(pr.check);
  if (O.iters < 1 || O.inflight < 1 || O.inflight > 256 || O.lat_iters < 10 || O.size < 1 ||
      O.size > (1ull << 40) || O.lat_size < 1 || O.lat_size > (1ull << 40) || O.warmup < 0)
    die("bad parameters from the client");
  return fd;
}

static void print_header(const tpx_net_props_t *props) {
  struct utsname u;
  uname(&u);
  printf("tpx-netbench: transport '%s' (ncclNet v%d%s), device %d '%s', host memory, %s\n",
         NET->name, NET->abi_version, NET->caps.builtin ? " = built-in" : "", DEV, props->name,
         O.mode == MODE_LOOPBACK ? "loopback (one process, two threads)"
         : O.mode == MODE_SERVER ? "server (receiver)" : "client (sender)");
  printf("  host %s, %s %s, %ld cpus\n", u.nodename, u.sysname, u.release,
         sysconf(_SC_NPROCESSORS_ONLN));
  fflush(stdout);
}

/* link 0 carries client->server (bandwidth, ping); link 1 the pong. */
static void connect_links(link_t *lk, int fd) {
  link_t *ls[2] = {&lk[0], &lk[1]};
  int nl = O.latency ? 2 : 1;
  if (O.mode == MODE_LOOPBACK) {
    for (int i = 0; i < nl; i++) do_listen(ls[i]);
    establish(ls, nl, (1 << nl) - 1, (1 << nl) - 1);
    return;
  }
  int srv = O.mode == MODE_SERVER;
  /* server listens on link 0, client on link 1; handles cross over */
  if (srv || O.latency) {
    link_t *mine = ls[srv ? 0 : 1];
    do_listen(mine);
    if (io_all(fd, mine->handle, TPX_NET_HANDLE_BYTES, 1)) die("side channel: handle");
  }
  if (!srv || O.latency) {
    link_t *theirs = ls[srv ? 1 : 0];
    if (io_all(fd, theirs->chandle, TPX_NET_HANDLE_BYTES, 0)) die("side channel: handle");
  }
  establish(ls, nl, srv ? 2 : 1, srv ? 1 : 2);
}

static void run_bandwidth(link_t *lk, int unpack, meet_t m, int fd) {
  bw_t snd = {.comm = lk[0].scomm, .is_send = 1, .m = m};
  bw_t rcv = {.comm = lk[0].rcomm, .is_send = 0, .unpack = unpack, .m = m};
  if (O.mode == MODE_LOOPBACK) {
    pthread_t t;
    if (pthread_create(&t, NULL, bw_run, &rcv)) die("pthread_create");
    bw_run(&snd);
    pthread_join(t, NULL);
    report_bw(rcv.secs, snd.secs);
    return;
  }
  bw_t *me = O.mode == MODE_SERVER ? &rcv : &snd;
  bw_run(me);
  /* each side reports its own time; swap them to print both */
  uint64_t mine_ns = (uint64_t)(me->secs * 1e9), peer_ns = 0, be = htobe64(mine_ns);
  if (io_all(fd, &be, 8, 1) || io_all(fd, &peer_ns, 8, 0)) die("side channel: results");
  double peer = (double)be64toh(peer_ns) / 1e9;
  if (O.mode == MODE_SERVER) report_bw(me->secs, peer);
  else report_bw(peer, me->secs);
}

static void run_latency(link_t *lk, int unpack, meet_t m) {
  double *rtt = calloc((size_t)O.lat_iters, sizeof(double));
  if (!rtt) die("out of memory");
  lat_t a = {.scomm = lk[0].scomm, .rcomm = lk[1].rcomm, .initiator = 1, .unpack = unpack, .m = m, .rtt_us = rtt};
  lat_t b = {.scomm = lk[1].scomm, .rcomm = lk[0].rcomm, .initiator = 0, .unpack = unpack, .m = m};
  if (O.mode == MODE_LOOPBACK) {
    pthread_t t;
    if (pthread_create(&t, NULL, lat_run, &b)) die("pthread_create");
    lat_run(&a);
    pthread_join(t, NULL);
    report_latency(rtt);
  } else if (O.mode == MODE_CLIENT) {
    lat_run(&a);
    report_latency(rtt);
  } else {
    lat_run(&b);
    printf("  latency  measured by the client\n");
  }
  free(rtt);
}

int main(int argc, char **argv) {
  if (tool_version_asked(argc, argv, "tpx-netbench")) return 0;
  signal(SIGPIPE, SIG_IGN);
  parse(argc, argv);
  check_memory();
  CHECK(tpx_net_open(O.plugin, &NET), "opening the transport");
  tpx_net_props_t props;
  pick_device(&props);
  int unpack = props.dev_type == TPX_NET_DEV_UNPACK;
  if (unpack && !NET->ops->irecv_consumed) die("UNPACK plugin without irecvConsumed");
  int fd = side_channel();
  print_header(&props);
  link_t *lk = calloc(2, sizeof(link_t));
  if (!lk) die("out of memory");
  connect_links(lk, fd);
  pthread_barrier_t bar;
  pthread_barrier_init(&bar, NULL, 2);
  meet_t m = {.fd = fd, .bar = O.mode == MODE_LOOPBACK ? &bar : NULL};
  run_bandwidth(lk, unpack, m, fd);
  if (O.latency) run_latency(lk, unpack, m);
  for (int i = 0; i < 2; i++) close_link(&lk[i]);
  free(lk);
  pthread_barrier_destroy(&bar);
  if (fd >= 0) close(fd);
  tpx_net_close(NET);
  return 0;
}
