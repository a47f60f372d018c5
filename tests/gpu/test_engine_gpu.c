/* The engine's GPU data path on a real GPU, GPU memory on both sides.
 *
 *   test_engine_gpu [--quick] [--only staging|staging-ce|kernel|d2d|host] [--one-process-only]
 *
 * Two processes (forked before either touches CUDA) per configuration:
 * path (host staging over the default transport, with SM copies and with
 * copy-engine copies; the unpack mode of the built-in transport with the
 * kernel, d2d and host unpackers) x GPU pair
 * (both on GPU 0; GPU 0 -> GPU 1 when there are two) x chunk size (4 KiB,
 * 64 KiB, 512 KiB, 4 MiB). Each run does writes, reads and sends both ways
 * at random sizes and offsets inside buffers registered at unaligned
 * offsets, checks every destination byte and the poison around it on the
 * GPU, and ends with a large write. Each process then checks that no
 * primary context is still retained and that its own thread was left
 * without a current context.
 *
 * Then, in this process: one process driving two GPUs (two endpoints, one
 * per GPU, plus a vectored write gathering from buffers on both), caller-
 * driven progress, and registration errors (page widening refused where the
 * allocation does not allow it, wrong device, host pointer).
 *
 * Exit 0: all passed; 1: a failure; 77: no GPU. Plain C (gpu_check.h). */
#define _GNU_SOURCE
#include <cuda.h>
#include <cuda_runtime_api.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cuda/gpu.h"
#include "gpu_check.h"
#include "tpx/tpx.h"

#define POISON 0xEE
#define PAD 8192u

static int quick;

/* ---- patterns, checks on GPU memory ---- */
static uint8_t pat(size_t x, unsigned seed) { return (uint8_t)(x * 131u + seed * 7u + (x >> 13)); }

static void fill_gpu(int dev, uint8_t *d, size_t len, unsigned seed) {
  uint8_t *h = malloc(len ? len : 1);
  if (!h) exit(1);
  for (size_t i = 0; i < len; i++) h[i] = pat(i, seed);
  MUST(tpx__gpu_memcpy(dev, d, h, len));
  free(h);
}

/* region [off, off+len) of a poisoned area [0, area) must hold pattern
 * seed (starting at src_off), with poison on both sides; re-poison it. */
static int check_gpu(int dev, uint8_t *area, size_t area_len, size_t off, size_t len, unsigned seed, size_t src_off,
                     const char *what) {
  size_t lo = off > 64 ? off - 64 : 0, hi = off + len + 64 < area_len ? off + len + 64 : area_len;
  uint8_t *h = malloc(hi - lo);
  if (!h) exit(1);
  MUST(tpx__gpu_memcpy(dev, h, area + lo, hi - lo));
  int bad = 0;
  for (size_t x = lo; x < hi && !bad; x++) {
    uint8_t want = (x >= off && x < off + len) ? pat(src_off + (x - off), seed) : POISON;
    if (h[x - lo] != want) {
      fprintf(stderr, "  %s: byte %zu (target [%zu, +%zu)) is 0x%02x, want 0x%02x\n", what, x, off, len, h[x - lo],
              want);
      bad = 1;
    }
  }
  free(h);
  if (len) MUST(tpx__gpu_memset(dev, area + off, POISON, len));
  return bad;
}

typedef CUresult (*pfn_ctx_get)(CUcontext *);
static CUcontext current_ctx(void) {
  static pfn_ctx_get get;
  if (!get && cudaGetDriverEntryPointByVersion("cuCtxGetCurrent", (void **)&get, 12000, cudaEnableDefault, NULL) !=
                  cudaSuccess)
    return (CUcontext)(uintptr_t)1;
  CUcontext c = NULL;
  if (get(&c) != CUDA_SUCCESS) return (CUcontext)(uintptr_t)1;
  return c;
}

/* ---- one configuration ---- */
struct run {
  const char *path; /* staging | staging-ce | kernel | d2d | host */
  int gpu_a, gpu_b;
  size_t chunk;
  int channels;
  unsigned seed;
  size_t reg;       /* bytes per buffer half */
  size_t max_len;   /* random transfers */
  size_t big;       /* final write */
  int nops;
};

enum { OP_W, OP_R, OP_S, OP_SB };
struct tpx__op {
  int kind;
  size_t len, so, doff;
};

static size_t rnd(unsigned *s) {
  *s = *s * 1103515245u + 12345u;
  return (*s >> 8) & 0xffffff;
}

static void make_ops(const struct run *r, struct tpx__op *ops) {
  unsigned s = r->seed;
  for (int i = 0; i < r->nops; i++) {
    struct tpx__op *o = &ops[i];
    o->kind = (int)(rnd(&s) % 4);
    switch (rnd(&s) % 6) {
    case 0: o->len = rnd(&s) % 3; break;                 /* 0, 1, 2 */
    case 1: o->len = (rnd(&s) % 9000) | 1; break;         /* odd, around pages */
    case 2: o->len = 4096 * (1 + rnd(&s) % 40) + rnd(&s) % 3 - 1; break;
    default: o->len = (rnd(&s) * 97) % r->max_len + 1; break;
    }
    o->so = rnd(&s) % PAD;
    o->doff = rnd(&s) % PAD;
  }
  if (r->big) ops[r->nops - 1] = (struct tpx__op){OP_W, r->big, 4096, 0};
}

/* staging: SM copies (TPX_UNPACK=kernel); staging-ce: copy engine (d2d);
 * the others: the built-in transport's unpack mode with that unpacker. */
static void path_cfg(const char *path, tpx_config_t *cfg) {
  cfg->sock_unpack = strncmp(path, "staging", 7) != 0;
  snprintf(cfg->unpack, sizeof(cfg->unpack), "%s",
           strcmp(path, "staging") == 0 ? "kernel" : strcmp(path, "staging-ce") == 0 ? "d2d" : path);
}

static void cfg_for(const struct run *r, tpx_config_t *cfg) {
  tpx_config_from_env(cfg);
  path_cfg(r->path, cfg);
  cfg->chunk_bytes = r->chunk;
  cfg->num_channels = r->channels;
  cfg->timeout_ms = 30000;
  cfg->connect_timeout_ms = 20000;
  cfg->inline_bytes = (r->seed & 1) ? 0 : cfg->inline_bytes; /* small host-side shortcuts must avoid GPU buffers */
}

struct side {
  int dev;
  uint8_t *alloc;  /* cudaMalloc */
  uint8_t *base;   /* registered start: alloc + an unaligned offset */
  size_t len;
  tpx_mem_t *mem;
};

static void side_open(tpx_endpoint_t *ep, struct side *s, int dev, size_t len, size_t skew) {
  s->dev = dev;
  s->len = len;
  MUST(tpx__gpu_retain(dev));
  MUST(tpx__gpu_malloc(dev, len + skew + PAD, (void **)&s->alloc));
  s->base = s->alloc + skew;
  MUST(tpx__gpu_memset(dev, s->alloc, POISON, len + skew + PAD));
  /* device -1: the engine takes the pointer's GPU */
  tpx_mem_desc_t d = {s->base, len, TPX_MEM_CUDA, ((skew >> 8) & 1) ? -1 : dev, TPX_ACCESS_READ | TPX_ACCESS_WRITE};
  MUST(tpx_mem_register(ep, &d, &s->mem));
}

static void side_close(struct side *s) {
  if (s->mem) MUST(tpx_mem_deregister(s->mem));
  MUST(tpx__gpu_free(s->dev, s->alloc));
  MUST(tpx__gpu_release(s->dev));
}

static int wait_notif(tpx_endpoint_t *ep, tpx_notif_t *n, const char *what) {
  if (tpx_wait_notif(ep, 60000, n) != 1) {
    fprintf(stderr, "  no %s notification within 60 s\n", what);
    return -1;
  }
  return 0;
}

static int xdo(tpx_xfer_t *x, int rc, const char *what, int i) {
  if (rc == 0) rc = tpx_xfer_wait(x, 60000);
  tpx_xfer_free(x);
  if (rc) fprintf(stderr, "  op %d %s: %s (%s)\n", i, what, tpx_strerror(rc), tpx_last_error());
  return rc;
}

/* The server (B): buffer [ro | w]; passive except for its sends and recvs. */
static int server_main(const struct run *r, int port_fd) {
  tpx_config_t cfg;
  cfg_for(r, &cfg);
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.name = "B";
  p.gpu = r->gpu_b;
  p.port = TPX_PORT_EPHEMERAL;
  p.listen_host = "127.0.0.1";
  tpx_endpoint_t *ep = NULL;
  MUST(tpx_endpoint_create(&p, &ep));
  int port = tpx_endpoint_port(ep);
  if (write(port_fd, &port, sizeof(port)) != sizeof(port)) return 1;
  close(port_fd);
  tpx_peer_t *peer = NULL;
  MUST(tpx_accept(ep, 30000, &peer));
  struct side b;
  side_open(ep, &b, r->gpu_b, 2 * r->reg, 4096 - 512);
  uint8_t *ro = b.base, *w = b.base + r->reg;
  fill_gpu(b.dev, ro, r->reg, 2);
  uint8_t md[TPX_MD_MAX + 2] = "MD";
  size_t ml = 0;
  MUST(tpx_mem_get_public_data(b.mem, md + 2, TPX_MD_MAX, &ml));
  MUST(tpx_notify(peer, md, ml + 2));
  struct tpx__op *ops = calloc((size_t)r->nops, sizeof(*ops));
  make_ops(r, ops);
  int bad = 0;
  tpx_notif_t n;
  for (int i = 0; i < r->nops && !bad; i++) {
    const struct tpx__op *o = &ops[i];
    char ok[16];
    snprintf(ok, sizeof(ok), "OK %d", i);
    tpx_xfer_t *x = NULL;
    switch (o->kind) {
    case OP_W:
      if (wait_notif(ep, &n, "write")) return 1;
      bad = check_gpu(b.dev, w, r->reg, o->doff, o->len, 1, o->so, "write into B");
      MUST(tpx_notify(peer, bad ? "BAD" : ok, strlen(bad ? "BAD" : ok)));
      break;
    case OP_S:
      bad = xdo(x, tpx_recv(peer, b.mem, r->reg + o->doff, o->len, (uint64_t)i, &x), "recv", i);
      if (!bad) bad = check_gpu(b.dev, w, r->reg, o->doff, o->len, 1, o->so, "send into B");
      MUST(tpx_notify(peer, bad ? "BAD" : ok, strlen(bad ? "BAD" : ok)));
      break;
    case OP_SB: bad = xdo(x, tpx_send(peer, b.mem, o->so, o->len, (uint64_t)i, &x), "send", i); break;
    default: break;
    }
  }
  if (!bad && wait_notif(ep, &n, "done")) bad = 1;
  free(ops);
  tpx_peer_close(peer);
  side_close(&b);
  tpx_endpoint_destroy(ep);
  CHECK(tpx__gpu_ctx_retained() == 0, "server: %d primary context(s) still retained", tpx__gpu_ctx_retained());
  CHECK(current_ctx() == NULL, "server: the main thread was left with a current context");
  return bad || gc_failures;
}

/* The client (A): buffer [src | dst]; drives every operation. */
static int client_main(const struct run *r, int port) {
  tpx_config_t cfg;
  cfg_for(r, &cfg);
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.name = "A";
  p.gpu = r->gpu_a;
  p.no_listen = 1;
  tpx_endpoint_t *ep = NULL;
  MUST(tpx_endpoint_create(&p, &ep));
  tpx_peer_t *peer = NULL;
  MUST(tpx_connect(ep, "127.0.0.1", port, &peer));
  struct side a;
  side_open(ep, &a, r->gpu_a, 2 * r->reg, 100 + (r->seed % 7) * 256);
  uint8_t *src = a.base, *dst = a.base + r->reg;
  fill_gpu(a.dev, src, r->reg, 1);
  tpx_notif_t n;
  tpx_rmem_t *rb = NULL;
  if (wait_notif(ep, &n, "descriptor") || tpx_load_remote_md(n.msg + 2, n.len - 2, &rb)) return 1;
  struct tpx__op *ops = calloc((size_t)r->nops, sizeof(*ops));
  make_ops(r, ops);
  int bad = 0;
  for (int i = 0; i < r->nops && !bad; i++) {
    const struct tpx__op *o = &ops[i];
    tpx_xfer_t *x = NULL;
    char tag[16];
    switch (o->kind) {
    case OP_W:
      snprintf(tag, sizeof(tag), "W %d", i);
      bad = xdo(x, tpx_write(peer, a.mem, o->so, rb, r->reg + o->doff, o->len, tag, strlen(tag), &x), "write", i);
      if (!bad && (wait_notif(ep, &n, "verdict") || n.len < 2 || memcmp(n.msg, "OK", 2))) bad = 1;
      break;
    case OP_S:
      bad = xdo(x, tpx_send(peer, a.mem, o->so, o->len, (uint64_t)i, &x), "send", i);
      if (!bad && (wait_notif(ep, &n, "verdict") || n.len < 2 || memcmp(n.msg, "OK", 2))) bad = 1;
      break;
    case OP_R:
      bad = xdo(x, tpx_read(peer, a.mem, r->reg + o->doff, rb, o->so, o->len, &x), "read", i);
      if (!bad) bad = check_gpu(a.dev, dst, r->reg, o->doff, o->len, 2, o->so, "read into A");
      break;
    case OP_SB:
      bad = xdo(x, tpx_recv(peer, a.mem, r->reg + o->doff, o->len, (uint64_t)i, &x), "recv", i);
      if (!bad) bad = check_gpu(a.dev, dst, r->reg, o->doff, o->len, 2, o->so, "send into A");
      break;
    }
    if (bad) fprintf(stderr, "  op %d (kind %d, %zu bytes, src +%zu, dst +%zu) failed\n", i, o->kind, o->len, o->so,
                     o->doff);
  }
  if (!bad) MUST(tpx_notify(peer, "DONE", 4));
  free(ops);
  tpx_rmem_free(rb);
  tpx_peer_close(peer);
  side_close(&a);
  tpx_endpoint_destroy(ep);
  CHECK(tpx__gpu_ctx_retained() == 0, "client: %d primary context(s) still retained", tpx__gpu_ctx_retained());
  CHECK(current_ctx() == NULL, "client: the main thread was left with a current context");
  return bad || gc_failures;
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec + ts.tv_nsec * 1e-9;
}

/* Wait for a child at most until deadline; kill it past that. */
static int reap(pid_t pid, double deadline) {
  int st = 0;
  for (;;) {
    pid_t w = waitpid(pid, &st, WNOHANG);
    if (w == pid) return WIFEXITED(st) ? WEXITSTATUS(st) : 128 + (WIFSIGNALED(st) ? WTERMSIG(st) : 0);
    if (w < 0) return 127;
    if (now_s() > deadline) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      return 124;
    }
    usleep(20000);
  }
}

static int run_pair(const struct run *r) {
  int fds[2];
  if (pipe(fds)) return 1;
  fflush(stdout);
  pid_t ps = fork();
  if (ps == 0) {
    close(fds[0]);
    _exit(server_main(r, fds[1]));
  }
  close(fds[1]);
  int port = 0;
  double t0 = now_s(), deadline = t0 + (quick ? 90 : 150);
  ssize_t got = read(fds[0], &port, sizeof(port));
  close(fds[0]);
  int rc_c = 1, rc_s;
  if (got == sizeof(port) && port > 0) {
    pid_t pc = fork();
    if (pc == 0) _exit(client_main(r, port));
    rc_c = reap(pc, deadline);
    if (rc_c) kill(ps, SIGKILL); /* the server would wait for notifications that never come */
  }
  rc_s = reap(ps, deadline + 5);
  int ok = rc_c == 0 && rc_s == 0;
  printf("%s %-7s GPU %d -> GPU %d  chunk %7zu  %d ch  %2d ops (big %zu MiB)  %.1f s%s\n", ok ? "PASS" : "FAIL",
         r->path, r->gpu_a, r->gpu_b, r->chunk, r->channels, r->nops, r->big >> 20, now_s() - t0,
         ok ? "" : (rc_c == 124 || rc_s == 124 ? "  (timed out)" : ""));
  if (!ok) fprintf(stderr, "  client exit %d, server exit %d\n", rc_c, rc_s);
  fflush(stdout);
  return ok ? 0 : 1;
}

/* ---- in this process: one process driving two GPUs ---- */
static void test_two_gpus_one_process(int ndev, int progress_thread, const char *path) {
  int g1 = ndev > 1 ? 1 : 0;
  tpx_config_t cfg;
  tpx_config_from_env(&cfg);
  path_cfg(path, &cfg);
  cfg.progress_thread = progress_thread;
  cfg.chunk_bytes = 256 * 1024;
  cfg.num_channels = 3;
  cfg.timeout_ms = 30000;
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.port = TPX_PORT_EPHEMERAL;
  p.listen_host = "127.0.0.1";
  p.name = "gpu0";
  p.gpu = 0;
  tpx_endpoint_t *e0 = NULL, *e1 = NULL;
  MUST(tpx_endpoint_create(&p, &e0)); /* progress_thread as asked: the initiator */
  tpx_config_t cfg1 = cfg;
  cfg1.progress_thread = 1; /* the target always has its own thread: waits on e0 drive only e0 */
  p.cfg = &cfg1;
  p.name = "gpu1";
  p.gpu = g1;
  MUST(tpx_endpoint_create(&p, &e1));
  tpx_peer_t *p01 = NULL, *p10 = NULL;
  MUST(tpx_connect(e0, "127.0.0.1", tpx_endpoint_port(e1), &p01));
  MUST(tpx_accept(e1, 30000, &p10));
  const size_t n = 5u << 20;
  struct side a0, a1, b;
  side_open(e0, &a0, 0, n, 0);     /* e0's buffers on both GPUs: device per buffer */
  side_open(e0, &a1, g1, n, 4096);
  side_open(e1, &b, g1, 2 * n, 512);
  fill_gpu(0, a0.base, n, 3);
  fill_gpu(g1, a1.base, n, 4);
  uint8_t blob[TPX_MD_MAX];
  size_t bl = 0;
  tpx_rmem_t *rb = NULL;
  MUST(tpx_mem_get_public_data(b.mem, blob, sizeof(blob), &bl));
  MUST(tpx_load_remote_md(blob, bl, &rb));
  /* one vectored write gathering from GPU 0 and GPU g1 into e1's buffer */
  tpx_iov_t v[2] = {{a0.mem, 17, rb, 0, n - 17}, {a1.mem, 0, rb, n + 4096, n - 5000}};
  tpx_xfer_t *x = NULL;
  MUST(tpx_xfer_prep_write(p01, v, 2, "v", 1, &x));
  for (int rep = 0; rep < 3; rep++) {
    MUST(tpx_xfer_post(x));
    CHECK(tpx_xfer_wait(x, 60000) == 0, "vectored write (%s, progress %s)", path, progress_thread ? "thread" : "caller");
    tpx_notif_t nt;
    CHECK(tpx_wait_notif(e1, 10000, &nt) == 1, "notification after the vectored write");
    CHECK(check_gpu(g1, b.base, 2 * n, 0, n - 17, 3, 17, "vectored write, GPU 0 part") == 0, "GPU 0 part");
    CHECK(check_gpu(g1, b.base, 2 * n, n + 4096, n - 5000, 4, 0, "vectored write, second GPU part") == 0,
          "GPU %d part", g1);
  }
  tpx_xfer_free(x);
  /* and back: e1 sends from GPU g1 into e0's GPU 0 buffer */
  fill_gpu(g1, b.base, n, 5);
  MUST(tpx__gpu_memset(0, a0.base, POISON, n));
  tpx_xfer_t *s = NULL, *r = NULL;
  MUST(tpx_recv(p01, a0.mem, 4096, n - 4096, 77, &r));
  MUST(tpx_send(p10, b.mem, 0, n - 4096, 77, &s));
  CHECK(tpx_xfer_wait(r, 60000) == 0, "recv GPU %d -> GPU 0", g1); /* drives e0 when caller-driven */
  CHECK(tpx_xfer_wait(s, 60000) == 0, "send GPU %d -> GPU 0", g1);
  CHECK(check_gpu(0, a0.base, n, 4096, n - 4096, 5, 0, "send into GPU 0") == 0, "send into GPU 0");
  tpx_xfer_free(s);
  tpx_xfer_free(r);
  CHECK(current_ctx() == NULL, "the caller's thread was left with a current context (%s)", path);
  tpx_rmem_free(rb);
  tpx_peer_close(p01);
  tpx_peer_close(p10);
  side_close(&a0);
  side_close(&a1);
  side_close(&b);
  tpx_endpoint_destroy(e0);
  tpx_endpoint_destroy(e1);
  CHECK(tpx__gpu_ctx_retained() == 0, "%d context(s) retained after teardown (%s)", tpx__gpu_ctx_retained(), path);
  printf("%s one process, GPU 0 + GPU %d, %s, %s progress\n", gc_failures ? "FAIL?" : "PASS", g1, path,
         progress_thread ? "thread" : "caller");
}

static void test_registration_errors(int ndev) {
  for (int unpack = 0; unpack < 2; unpack++) {
    tpx_config_t cfg;
    tpx_config_from_env(&cfg);
    cfg.sock_unpack = unpack;
    tpx_endpoint_params_t p;
    tpx_endpoint_params_init(&p);
    p.cfg = &cfg;
    p.no_listen = 1;
    tpx_endpoint_t *ep = NULL;
    MUST(tpx_endpoint_create(&p, &ep));
    MUST(tpx__gpu_retain(0));
    uint8_t *small = NULL;
    MUST(tpx__gpu_malloc(0, 6000, (void **)&small));
    tpx_gpu_ptr_info_t info;
    MUST(tpx__gpu_ptr_query(small, &info));
    tpx_mem_t *m = NULL;
    /* [+10, +5010) widens to whole pages; whether they fit the 6000-byte
     * allocation depends on where it starts. */
    uintptr_t lo = ((uintptr_t)small + 10) & ~(uintptr_t)4095, hi = ((uintptr_t)small + 5010 + 4095) & ~(uintptr_t)4095;
    int fits = lo >= (uintptr_t)info.base && hi <= (uintptr_t)info.base + info.size;
    tpx_mem_desc_t d = {small + 10, 5000, TPX_MEM_CUDA, 0, 0};
    int rc = tpx_mem_register(ep, &d, &m);
    if (unpack && !fits) {
      CHECK(rc == TPX_EINVAL && strstr(tpx_last_error(), "4 KiB"), "unpack: unalignable region refused (%d: %s)", rc,
            tpx_last_error());
    } else {
      CHECK(rc == 0, "%s: region registered (%d: %s)", unpack ? "unpack" : "staging", rc, tpx_last_error());
      if (rc == 0) MUST(tpx_mem_deregister(m));
    }
    d.len = info.size; /* past the allocation */
    CHECK(tpx_mem_register(ep, &d, &m) == TPX_EINVAL, "past the allocation refused");
    d.len = 100;
    d.device = ndev > 1 ? 1 : 5;
    CHECK(tpx_mem_register(ep, &d, &m) == TPX_EINVAL, "wrong device refused");
    static uint8_t host[8192];
    tpx_mem_desc_t h = {host, sizeof(host), TPX_MEM_CUDA, 0, 0};
    CHECK(tpx_mem_register(ep, &h, &m) == TPX_EINVAL && strstr(tpx_last_error(), "not device memory"),
          "host pointer as CUDA refused: %s", tpx_last_error());
    MUST(tpx__gpu_free(0, small));
    MUST(tpx__gpu_release(0));
    tpx_endpoint_destroy(ep);
  }
  CHECK(tpx__gpu_ctx_retained() == 0, "registration errors: %d context(s) retained", tpx__gpu_ctx_retained());
  printf("%s registration checks\n", gc_failures ? "FAIL?" : "PASS");
}

/* The GPU count without initialising CUDA here (children fork from us). */

int main(int argc, char **argv) {
  const char *only = NULL;
  int one_process_only = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--quick") == 0) quick = 1;
    else if (strcmp(argv[i], "--only") == 0 && i + 1 < argc) only = argv[++i];
    else if (strcmp(argv[i], "--one-process-only") == 0) one_process_only = 1;
    else {
      fprintf(stderr, "usage: test_engine_gpu [--quick] [--only staging|staging-ce|kernel|d2d|host] [--one-process-only]\n");
      return 2;
    }
  }
  setvbuf(stdout, NULL, _IOLBF, 0);
  int ndev = gc_count_gpus();
  if (ndev == 0) {
    printf("test_engine_gpu: no GPU; skipped\n");
    return 77;
  }
  printf("test_engine_gpu: %d GPU(s)%s\n", ndev, quick ? ", quick" : "");
  static const char *paths[] = {"staging", "kernel", "d2d", "host", "staging-ce"};
  enum { NPATHS = 5 };
  static const size_t chunks[] = {4096, 65536, 512 * 1024, 4u << 20};
  int fails = 0, runs = 0;
  unsigned seed = 1;
  for (int pi = 0; pi < NPATHS && !one_process_only; pi++) {
    if (only && strcmp(only, paths[pi]) != 0) continue;
    for (int pair = 0; pair < (ndev > 1 ? 2 : 1); pair++) {
      for (int ci = 0; ci < 4; ci++) {
        /* the slow debug unpacker: fewer chunk sizes */
        if (quick && ci != 0 && ci != 2 && pi != 0) continue;
        if (pi == 4 && (ci == 1 || ci == 3)) continue; /* copy-engine staging: two chunk sizes */
        if (pi == 3 && ci == 0 && !quick) continue; /* host unpack of 4 KiB chunks: covered in quick */
        struct run r = {paths[pi], 0, pair, chunks[ci], 1 + (int)(seed % 6), seed++, 0, 0, 0, 0};
        r.reg = quick ? (12u << 20) : (40u << 20);
        r.max_len = quick ? (3u << 20) : (6u << 20);
        r.big = chunks[ci] >= 65536 && pi != 3 ? (quick ? (8u << 20) : (32u << 20)) : 0;
        r.nops = quick ? 8 : 14;
        runs++;
        fails += run_pair(&r);
      }
    }
  }
  /* In this process from here on. */
  test_registration_errors(ndev);
  for (int pi = 0; pi < NPATHS; pi++) {
    if (only && strcmp(only, paths[pi]) != 0) continue;
    if (quick && pi > 1) continue;
    test_two_gpus_one_process(ndev, 1, paths[pi]);
  }
  if (!only || strcmp(only, "staging") == 0) test_two_gpus_one_process(ndev, 0, "staging");
  printf("test_engine_gpu: %d of %d two-process runs passed\n", runs - fails, runs);
  gc_failures += fails;
  return gc_finish("test_engine_gpu");
}
