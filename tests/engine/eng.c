#include "eng.h"

#include "common/util.h"
#include "engine/core.h"
#include "engine/wire.h"
#include "sock/wire.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

void eng_cfg(tpx_config_t *cfg) {
  tpx_config_from_env(cfg);
  if (cfg->timeout_ms > 20000) cfg->timeout_ms = 20000;
  if (cfg->connect_timeout_ms > 10000) cfg->connect_timeout_ms = 10000;
  cfg->progress_thread = 1; /* both ends live in one process; caller-driven tests say so */
}

void eng_connect(tpx_endpoint_t *a, tpx_endpoint_t *b, tpx_peer_t **ab, tpx_peer_t **ba) {
  int rc = tpx_connect(a, "127.0.0.1", tpx_endpoint_port(b), ab);
  if (rc) fail_msg("connect: %s: %s", tpx_strerror(rc), tpx_last_error());
  rc = tpx_accept(b, 10000, ba);
  if (rc) fail_msg("accept: %s: %s", tpx_strerror(rc), tpx_last_error());
}

void eng_pair_open(eng_pair_t *p, const tpx_config_t *cfg) { eng_pair_open2(p, cfg, cfg, 0); }

void eng_pair_open2(eng_pair_t *p, const tpx_config_t *ca, const tpx_config_t *cb, int gpu_b) {
  eng_pair_open_net(p, ca, cb, NULL, NULL, gpu_b);
}

static tpx_endpoint_t *ep_create(const tpx_config_t *cfg, const char *name, tpx_net_t *net, int gpu) {
  tpx_endpoint_params_t ep;
  tpx_endpoint_params_init(&ep);
  ep.cfg = cfg;
  ep.port = TPX_PORT_EPHEMERAL;
  ep.listen_host = "127.0.0.1";
  ep.name = name;
  ep.net = net;
  ep.gpu = gpu;
  tpx_endpoint_t *e = NULL;
  int rc = tpx_endpoint_create(&ep, &e);
  if (rc) fail_msg("endpoint %s: %s: %s", name, tpx_strerror(rc), tpx_last_error());
  return e;
}

tpx_endpoint_t *eng_ep_open(const tpx_config_t *cfg, const char *name) { return ep_create(cfg, name, NULL, 0); }

tpx_endpoint_t *eng_ep_open_net(const tpx_config_t *cfg, const char *name, tpx_net_t *net) {
  return ep_create(cfg, name, net, 0);
}

void eng_pair_open_net(eng_pair_t *p, const tpx_config_t *ca, const tpx_config_t *cb, tpx_net_t *net_a,
                       tpx_net_t *net_b, int gpu_b) {
  memset(p, 0, sizeof(*p));
  p->a = ep_create(ca, "A", net_a, 0);
  p->b = ep_create(cb, "B", net_b, gpu_b);
  eng_connect(p->a, p->b, &p->ab, &p->ba);
}

void eng_pair_close(eng_pair_t *p) {
  tpx_peer_close(p->ab);
  tpx_peer_close(p->ba);
  tpx_endpoint_destroy(p->a);
  tpx_endpoint_destroy(p->b);
  memset(p, 0, sizeof(*p));
}

void eng_buf(tpx_endpoint_t *ep, size_t len, unsigned access, eng_buf_t *b) {
  memset(b, 0, sizeof(*b));
  b->len = len;
  size_t alloc = (len + 4095) & ~(size_t)4095;
  b->p = aligned_alloc(4096, alloc ? alloc : 4096);
  assert_non_null(b->p);
  tpx_mem_desc_t d = {b->p, len ? len : 1, TPX_MEM_HOST, 0, access};
  int rc = tpx_mem_register(ep, &d, &b->mem);
  if (rc) fail_msg("register: %s", tpx_last_error());
  uint8_t blob[TPX_MD_MAX];
  size_t bl = 0;
  assert_int_equal(tpx_mem_get_public_data(b->mem, blob, sizeof(blob), &bl), 0);
  assert_int_equal(tpx_load_remote_md(blob, bl, &b->rmem), 0);
}

void eng_buf_free(eng_buf_t *b) {
  if (b->mem) assert_int_equal(tpx_mem_deregister(b->mem), 0);
  tpx_rmem_free(b->rmem);
  free(b->p);
  memset(b, 0, sizeof(*b));
}

void eng_wait(tpx_xfer_t *x, int expect) {
  int rc = tpx_xfer_wait(x, 60000);
  if (rc != expect) fail_msg("transfer: got %d (%s), expected %d: %s", rc, tpx_strerror(rc), expect, tpx_last_error());
}

void eng_write_check(tpx_peer_t *peer, eng_buf_t *src, eng_buf_t *dst, uint32_t seed) {
  tu_fill(src->p, src->len, seed, 0);
  tpx_xfer_t *x;
  assert_int_equal(tpx_write(peer, src->mem, 0, dst->rmem, 0, src->len, NULL, 0, &x), 0);
  eng_wait(x, 0);
  tpx_xfer_free(x);
  assert_int_equal(tu_check(dst->p, src->len, seed, 0), SIZE_MAX);
}

int eng_raw_connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(fd >= 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons((uint16_t)port)};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  return fd;
}

size_t eng_read_to_eof(int fd, uint8_t *buf, size_t cap) {
  size_t got = 0;
  for (int i = 0; i < 500; i++) {
    struct pollfd pf = {fd, POLLIN, 0};
    if (poll(&pf, 1, 10) <= 0) continue;
    ssize_t n = recv(fd, buf + got, cap - got, 0);
    if (n <= 0) return got;
    got += (size_t)n;
    if (got == cap) return got;
  }
  fail_msg("connection not dropped within 5 s");
  return got;
}

static int count_dir(const char *path) {
  DIR *d = opendir(path);
  if (!d) return -1;
  int n = 0;
  for (struct dirent *e; (e = readdir(d)) != NULL;) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

static void *noop(void *arg) { return arg; }

void eng_res_now(eng_res_t *r) {
  /* Sanitizer runtimes (ThreadSanitizer's background thread) start a thread
   * of their own at the process's first pthread_create: have it running
   * before any count, or a baseline taken before the test's first thread is
   * one short. */
  static int warmed;
  pthread_t t;
  if (!warmed && pthread_create(&t, NULL, noop, NULL) == 0) {
    pthread_join(t, NULL);
    warmed = 1;
  }
  r->fds = count_dir("/proc/self/fd") - 1; /* less the one counting */
  r->threads = count_dir("/proc/self/task");
  long pages = 0, rss = 0;
  FILE *f = fopen("/proc/self/statm", "r");
  if (f) {
    if (fscanf(f, "%ld %ld", &pages, &rss) != 2) rss = 0;
    fclose(f);
  }
  r->rss_kb = rss * (sysconf(_SC_PAGESIZE) / 1024);
}

void eng_res_settled(const eng_res_t *base, long rss_slack_kb) {
  eng_res_t now = {0};
#if defined(__SANITIZE_ADDRESS__)
  /* ASan's quarantine keeps up to 256 MiB of freed memory resident (its
   * default quarantine_size_mb), more after a test that churned thousands of
   * connections: RSS cannot show a leak there; LeakSanitizer does. */
  rss_slack_kb += 256L << 10;
#endif
  /* threads and lingering sockets go within moments of the close */
  for (int i = 0; i < 300; i++) {
    eng_res_now(&now);
    if (now.fds <= base->fds && now.threads <= base->threads) break;
    usleep(10000);
  }
  if (now.fds > base->fds) fail_msg("fds %d, %d before", now.fds, base->fds);
  if (now.threads > base->threads) fail_msg("threads %d, %d before", now.threads, base->threads);
  if (now.rss_kb > base->rss_kb + rss_slack_kb)
    fail_msg("RSS %ld KiB, %ld before (slack %ld)", now.rss_kb, base->rss_kb, rss_slack_kb);
}

double eng_cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_utime.tv_sec + ru.ru_stime.tv_sec + (ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

/* ---- proxy transport ---- */
static tpx_net_t *px_inner;
#define PX px_inner
static int px_devices(tpx_net_t *n, int *nd) { (void)n; return PX->ops->devices(PX, nd); }
static int px_props(tpx_net_t *n, int d, tpx_net_props_t *p) { (void)n; return PX->ops->get_properties(PX, d, p); }
static int px_listen(tpx_net_t *n, int d, void *h, void **l) { (void)n; return PX->ops->listen(PX, d, h, l); }
int eng_px_connect(tpx_net_t *n, int d, void *h, void **c, tpx_net_dev_handle_t *dh) {
  (void)n;
  return PX->ops->connect(PX, d, h, c, dh);
}
static int px_accept(tpx_net_t *n, void *l, void **c, tpx_net_dev_handle_t *dh) {
  (void)n;
  return PX->ops->accept(PX, l, c, dh);
}
static int px_reg(tpx_net_t *n, void *c, void *d, size_t s, int t, void **mh) {
  (void)n;
  return PX->ops->reg_mr(PX, c, d, s, t, mh);
}
static int px_dereg(tpx_net_t *n, void *c, void *mh) { (void)n; return PX->ops->dereg_mr(PX, c, mh); }
int eng_px_isend(tpx_net_t *n, void *c, void *d, size_t s, int tag, void *mh, void **r) {
  (void)n;
  return PX->ops->isend(PX, c, d, s, tag, mh, r);
}
static int px_irecv(tpx_net_t *n, void *c, int k, void **d, size_t *s, int *t, void **mh, void **r) {
  (void)n;
  return PX->ops->irecv(PX, c, k, d, s, t, mh, r);
}
static int px_iflush(tpx_net_t *n, void *c, int k, void **d, size_t *s, void **mh, void **r) {
  (void)n;
  return PX->ops->iflush(PX, c, k, d, s, mh, r);
}
static int px_test(tpx_net_t *n, void *r, int *done, size_t *s) { (void)n; return PX->ops->test(PX, r, done, s); }
static int px_close_send(tpx_net_t *n, void *c) { (void)n; return PX->ops->close_send(PX, c); }
static int px_close_recv(tpx_net_t *n, void *c) { (void)n; return PX->ops->close_recv(PX, c); }
static int px_close_listen(tpx_net_t *n, void *c) { (void)n; return PX->ops->close_listen(PX, c); }
static int px_dev_mr(tpx_net_t *n, void *c, void *mh, void **dp) { (void)n; return PX->ops->get_device_mr(PX, c, mh, dp); }
static int px_consumed(tpx_net_t *n, void *c, int k, void *r) { (void)n; return PX->ops->irecv_consumed(PX, c, k, r); }
static int px_dials(tpx_net_t *n, const void *h, struct sockaddr_storage *a, int *k) {
  (void)n;
  return PX->ops->handle_dials(PX, h, a, k);
}

void eng_proxy_install(tpx_endpoint_t *ep, eng_proxy_t *px) {
  pthread_mutex_lock(&ep->lock);
  px->inner = ep->net;
  px_inner = ep->net;
  const tpx_net_ops_t *o = ep->net->ops;
  tpx_net_ops_t f = {
      .devices = px_devices, .get_properties = px_props, .listen = px_listen, .connect = eng_px_connect,
      .accept = px_accept, .reg_mr = px_reg, .dereg_mr = px_dereg, .isend = eng_px_isend, .irecv = px_irecv,
      .iflush = o->iflush ? px_iflush : NULL, .test = px_test, .close_send = px_close_send,
      .close_recv = px_close_recv, .close_listen = px_close_listen,
      .get_device_mr = o->get_device_mr ? px_dev_mr : NULL,
      .irecv_consumed = o->irecv_consumed ? px_consumed : NULL, .destroy = NULL,
      .handle_dials = o->handle_dials ? px_dials : NULL,
  };
  px->ops = f;
  if (px->isend) px->ops.isend = px->isend;
  if (px->connect) px->ops.connect = px->connect;
  px->net = *ep->net;
  px->net.ops = &px->ops;
  ep->net = &px->net;
  pthread_mutex_unlock(&ep->lock);
}

void eng_proxy_remove(tpx_endpoint_t *ep, eng_proxy_t *px) {
  pthread_mutex_lock(&ep->lock);
  ep->net = px->inner;
  pthread_mutex_unlock(&ep->lock);
}

/* ---- for the hostile-peer tests ---- */

void eng_mk_handle(uint8_t *h, uint16_t port, int nsocks) {
  memset(h, 0, TPX_NET_HANDLE_BYTES);
  tpx__put32(h + TPX_WH_MAGIC, TPX_WIRE_HANDLE_MAGIC);
  tpx__put16(h + TPX_WH_VERSION, TPX_WIRE_VERSION);
  tpx__put16(h + TPX_WH_FAMILY, 4);
  assert_int_equal(inet_pton(AF_INET, "127.0.0.1", h + TPX_WH_ADDR), 1);
  uint16_t np = htons(port);
  memcpy(h + TPX_WH_PORT, &np, 2);
  tpx__put16(h + TPX_WH_NSOCKS, (uint16_t)nsocks);
}

void eng_blackhole_open(eng_blackhole_t *b) {
  b->lfd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  assert_int_equal(bind(b->lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(b->lfd, 0), 0);
  socklen_t sl = sizeof(sa);
  assert_int_equal(getsockname(b->lfd, (struct sockaddr *)&sa, &sl), 0);
  b->port = ntohs(sa.sin_port);
  b->filler = eng_raw_connect(b->port);
}

void eng_blackhole_close(eng_blackhole_t *b) {
  close(b->filler);
  close(b->lfd);
}

void eng_legit_transfer(tpx_endpoint_t *a, tpx_endpoint_t *b, size_t len, uint32_t seed) {
  tpx_peer_t *ab, *ba;
  eng_connect(a, b, &ab, &ba);
  eng_buf_t x, y;
  eng_buf(a, len, 0, &x);
  eng_buf(b, len, TPX_ACCESS_WRITE, &y);
  eng_write_check(ab, &x, &y, seed);
  eng_buf_free(&x);
  eng_buf_free(&y);
  tpx_peer_close(ab);
  tpx_peer_close(ba);
}

tpx_rmem_t *eng_unknown_region(const eng_buf_t *b) {
  uint8_t blob[TPX_MD_MAX];
  size_t bl;
  assert_int_equal(tpx_mem_get_public_data(b->mem, blob, sizeof(blob), &bl), 0);
  struct tpx__md_info md;
  assert_int_equal(tpx__md_decode(blob, bl, &md), 0);
  md.region ^= 0x5a5a5a5a5a5aull;
  assert_int_equal(tpx__md_encode(&md, blob, sizeof(blob), &bl), 0);
  tpx_rmem_t *r;
  assert_int_equal(tpx_load_remote_md(blob, bl, &r), 0);
  return r;
}
