/* tpx-bench: transfers of host or GPU memory through the engine.
 *
 *   tpx-bench server [--port P] [--host ADDR]          serve one client, then exit
 *   tpx-bench client HOST [--port P]                    drive the transfers
 *   tpx-bench loopback                                  both in one process
 * Options (client/loopback decide, the server follows):
 *   --size N (K/M/G suffixes, default 64M)  --iters N (20)  --warmup N (2)
 *   --op write|read|send (write)  --channels N  --chunk N  --latency (4 KiB
 *   one-way latency: ping-pong, round trip / 2; read: full round trip)
 *   --inflight N (1): write/read bandwidth with N transfers of --size posted
 *   at once (the same ranges; each completion reposts), as an application
 *   that keeps a queue of transfers would; Iter times are then the gaps
 *   between completions
 * Memory (each side chooses its own): --mem host|cuda (host)  --gpu N (0: the
 *   GPU of the buffer and of the endpoint, whose control port is base + N);
 *   loopback: --server-gpu N for the server's side (default: --gpu).
 * Every bandwidth run ends with a byte-for-byte check of the destination
 * ("[CHECK] ok"): the source holds a position-dependent pattern.
 *
 * Bandwidth is bytes moved per second by this one GPU/endpoint pair, GB = 1e9
 * bytes; with one pair per process "per GPU" and "total" are the same number.
 */
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "internal.h" /* GPU buffers, primary-context counts: tools/internal.h */
#include "tpx/net.h"
#include "tpx/tpx.h"
#include "version.h"

struct opts {
  const char *mode;
  const char *host;
  const char *listen_host;
  int port;
  size_t size;
  int iters, warmup;
  int op; /* TPX_OP_WRITE/READ/SEND */
  int channels;
  size_t chunk;
  int latency;
  int inflight; /* --inflight: one-sided transfers posted at once */
  int size_set;
  int cuda;       /* --mem cuda */
  int gpu;        /* --gpu */
  int server_gpu; /* loopback: --server-gpu (-1: same as --gpu) */
  tpx_net_t *net; /* loopback: one transport shared by both endpoints, like one process driving two GPUs */
};

#define MAX_INFLIGHT 16

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* CPU seconds (user, system) of the whole process, every thread. */
static void cpu_now(double *user, double *sys) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  *user = ru.ru_utime.tv_sec + ru.ru_utime.tv_usec * 1e-6;
  *sys = ru.ru_stime.tv_sec + ru.ru_stime.tv_usec * 1e-6;
}

/* Where the time goes: CPU per GB moved and how many cores were busy. */
static void cpu_report(const char *who, double u0, double s0, double wall_ms, double bytes) {
  double u1, s1;
  cpu_now(&u1, &s1);
  if (wall_ms <= 0 || bytes <= 0) return;
  printf("[CPU] %s: %.3f s user + %.3f s system per GB, %.2f cores busy on average\n", who,
         (u1 - u0) / (bytes / 1e9), (s1 - s0) / (bytes / 1e9), (u1 - u0 + s1 - s0) / (wall_ms * 1e-3));
}

static int die(const char *what, int rc) {
  fprintf(stderr, "tpx-bench: %s: %s (%s)\n", what, tpx_strerror(rc), tpx_last_error());
  return 1;
}

static int parse_size(const char *s, size_t *out) {
  char *end;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || end == s) return -1;
  if (*end == 'k' || *end == 'K') v <<= 10, end++;
  else if (*end == 'm' || *end == 'M') v <<= 20, end++;
  else if (*end == 'g' || *end == 'G') v <<= 30, end++;
  if (*end) return -1;
  *out = (size_t)v;
  return 0;
}

static const char *op_name(int op) { return op == TPX_OP_READ ? "read" : op == TPX_OP_SEND ? "send" : "write"; }

static void usage(void) {
  fprintf(stderr,
          "usage: tpx-bench server [--port P] [--host ADDR]\n"
          "       tpx-bench client HOST [--port P] [options]\n"
          "       tpx-bench loopback [options]\n"
          "options: --size N[K|M|G] --iters N --warmup N --op write|read|send --channels N --chunk N --latency\n"
          "         --inflight N (write/read: transfers posted at once, default 1)\n"
          "         --mem host|cuda --gpu N --server-gpu N (loopback)\n");
}

static int parse(int argc, char **argv, struct opts *o) {
  memset(o, 0, sizeof(*o));
  o->size = 64u << 20;
  o->iters = 20;
  o->warmup = 2;
  o->op = TPX_OP_WRITE;
  o->server_gpu = -1;
  o->inflight = 1;
  if (argc < 2) return -1;
  o->mode = argv[1];
  int i = 2;
  if (strcmp(o->mode, "client") == 0) {
    if (argc < 3) return -1;
    o->host = argv[2];
    i = 3;
  } else if (strcmp(o->mode, "server") != 0 && strcmp(o->mode, "loopback") != 0) {
    return -1;
  }
  for (; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (strcmp(a, "--latency") == 0) {
      o->latency = 1;
      continue;
    }
    if (!v) return -1;
    i++;
    if (strcmp(a, "--port") == 0) o->port = atoi(v);
    else if (strcmp(a, "--host") == 0) o->listen_host = v;
    else if (strcmp(a, "--size") == 0) {
      if (parse_size(v, &o->size)) return -1;
      o->size_set = 1;
    } else if (strcmp(a, "--iters") == 0) o->iters = atoi(v);
    else if (strcmp(a, "--warmup") == 0) o->warmup = atoi(v);
    else if (strcmp(a, "--channels") == 0) o->channels = atoi(v);
    else if (strcmp(a, "--inflight") == 0) o->inflight = atoi(v);
    else if (strcmp(a, "--chunk") == 0) {
      if (parse_size(v, &o->chunk)) return -1;
    } else if (strcmp(a, "--mem") == 0) {
      if (strcmp(v, "cuda") == 0) o->cuda = 1;
      else if (strcmp(v, "host") != 0) return -1;
    } else if (strcmp(a, "--gpu") == 0) o->gpu = atoi(v);
    else if (strcmp(a, "--server-gpu") == 0) o->server_gpu = atoi(v);
    else if (strcmp(a, "--op") == 0) {
      if (strcmp(v, "write") == 0) o->op = TPX_OP_WRITE;
      else if (strcmp(v, "read") == 0) o->op = TPX_OP_READ;
      else if (strcmp(v, "send") == 0) o->op = TPX_OP_SEND;
      else return -1;
    } else return -1;
  }
  if (o->latency && !o->size_set) o->size = 4096;
  if (o->iters < 1 || o->warmup < 0 || o->size == 0 || o->gpu < 0) return -1;
  if (o->inflight < 1 || o->inflight > MAX_INFLIGHT) return -1;
  if (o->inflight > 1 && (o->latency || o->op == TPX_OP_SEND)) {
    fprintf(stderr, "tpx-bench: --inflight applies to write/read bandwidth runs\n");
    return -1;
  }
  return 0;
}

/* ---- buffers: host (page aligned) or GPU (cudaMalloc through cuda/gpu.h) ---- */
struct bbuf {
  void *p;
  size_t len;
  int cuda, gpu;
};

static uint8_t pat(size_t i, unsigned seed) { return (uint8_t)((i * 131u) ^ (i >> 12) ^ (seed * 77u)); }

/* Allocate len bytes filled with pattern `seed`. */
static int bbuf_alloc(struct bbuf *b, size_t len, int cuda, int gpu, unsigned seed) {
  memset(b, 0, sizeof(*b));
  b->len = len;
  b->cuda = cuda;
  b->gpu = gpu;
  uint8_t *h = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
  if (!h) return TPX_ENOMEM;
  for (size_t i = 0; i < len; i++) h[i] = pat(i, seed);
  if (!cuda) {
    b->p = h;
    return 0;
  }
  int rc = tpx__gpu_retain(gpu); /* ours, released in bbuf_free */
  if (rc == 0 && (rc = tpx__gpu_malloc(gpu, len, &b->p)) == 0) rc = tpx__gpu_memcpy(gpu, b->p, h, len);
  free(h);
  if (rc) {
    if (b->p) tpx__gpu_free(gpu, b->p);
    b->p = NULL;
    if (rc != TPX_ENOTSUP || tpx__gpu_ctx_refs(gpu) > 0) tpx__gpu_release(gpu);
    return rc;
  }
  return 0;
}

static void bbuf_free(struct bbuf *b) {
  if (!b->p) return;
  if (b->cuda) {
    tpx__gpu_free(b->gpu, b->p);
    tpx__gpu_release(b->gpu);
  } else {
    free(b->p);
  }
  b->p = NULL;
}

/* 0 when the buffer holds pattern `seed` throughout. */
static int bbuf_check(const struct bbuf *b, unsigned seed, const char *who) {
  const uint8_t *h = b->p;
  uint8_t *tmp = NULL;
  if (b->cuda) {
    tmp = malloc(b->len);
    if (!tmp || tpx__gpu_memcpy(b->gpu, tmp, b->p, b->len) != 0) {
      free(tmp);
      printf("[CHECK] %s: cannot read the GPU buffer back: %s\n", who, tpx_last_error());
      return -1;
    }
    h = tmp;
  }
  size_t bad = b->len;
  for (size_t i = 0; i < b->len; i++)
    if (h[i] != pat(i, seed)) {
      bad = i;
      break;
    }
  free(tmp);
  if (bad < b->len) {
    printf("[CHECK] %s: MISMATCH at byte %zu of %zu\n", who, bad, b->len);
    return -1;
  }
  printf("[CHECK] %s: ok, %zu bytes intact (%s memory)\n", who, b->len, b->cuda ? "GPU" : "host");
  return 0;
}

static const char *mem_name(const struct bbuf *b) { return b->cuda ? "cuda" : "host"; }

static void make_cfg(const struct opts *o, tpx_config_t *cfg) {
  tpx_config_from_env(cfg);
  if (o->channels > 0) cfg->num_channels = o->channels;
  if (o->chunk > 0) cfg->chunk_bytes = o->chunk;
}

/* The client tells the server what to do in its first notification:
 * "CFG <op> <size> <iters> <warmup> <latency>" followed by its buffer's
 * public descriptor (the server writes back into it in write-latency mode). */
struct cfgmsg {
  int op, iters, warmup, latency;
  size_t size;
};

static int wait_notif(tpx_endpoint_t *ep, tpx_notif_t *n, const char *what) {
  int r = tpx_wait_notif(ep, 60000, n);
  if (r != 1) {
    fprintf(stderr, "tpx-bench: no %s notification within 60 s\n", what);
    return -1;
  }
  return 0;
}

static int xwait(tpx_xfer_t *x, const char *what) {
  int rc = tpx_xfer_wait(x, -1);
  if (rc) return die(what, rc);
  return 0;
}

/* ---------------- server ---------------- */
static int run_server(const struct opts *o, tpx_endpoint_t **ready_ep, pthread_mutex_t *mu, pthread_cond_t *cv) {
  tpx_config_t cfg;
  make_cfg(o, &cfg);
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.name = "bench-server";
  p.net = o->net;
  const int sgpu = o->server_gpu >= 0 ? o->server_gpu : o->gpu;
  p.gpu = sgpu;
  p.port = o->port;
  p.listen_host = o->listen_host;
  tpx_endpoint_t *ep = NULL;
  int rc = tpx_endpoint_create(&p, &ep);
  if (ready_ep) { /* loopback: hand the endpoint (its port) to the client */
    pthread_mutex_lock(mu);
    *ready_ep = rc == 0 ? ep : (tpx_endpoint_t *)-1;
    pthread_cond_signal(cv);
    pthread_mutex_unlock(mu);
  }
  if (rc) return die("endpoint", rc);
  if (!ready_ep) printf("[SERVER] listening on port %d (transport %s)\n", tpx_endpoint_port(ep), tpx_endpoint_transport(ep));
  fflush(stdout);
  tpx_peer_t *peer = NULL;
  rc = tpx_accept(ep, -1, &peer);
  if (rc) return die("accept", rc);
  tpx_notif_t n;
  int ret = 1;
  struct bbuf sb = {0};
  tpx_mem_t *mem = NULL;
  tpx_rmem_t *cli = NULL;
  if (wait_notif(ep, &n, "configuration")) goto out;
  struct cfgmsg c;
  if (n.len < sizeof(c) + 4 || memcmp(n.msg, "CFG", 4) != 0) {
    fprintf(stderr, "tpx-bench: bad configuration message\n");
    goto out;
  }
  memcpy(&c, n.msg + 4, sizeof(c));
  if ((rc = tpx_load_remote_md(n.msg + 4 + sizeof(c), n.len - 4 - sizeof(c), &cli))) {
    die("client descriptor", rc);
    goto out;
  }
  if ((rc = bbuf_alloc(&sb, c.size, o->cuda, sgpu, 2))) {
    fprintf(stderr, "tpx-bench: cannot allocate %zu bytes of %s memory: %s\n", c.size, o->cuda ? "GPU" : "host",
            tpx_last_error());
    goto out;
  }
  if (!ready_ep && sb.cuda) printf("[SERVER] buffer in GPU %d memory\n", sgpu);
  tpx_mem_desc_t d = {sb.p, c.size, sb.cuda ? TPX_MEM_CUDA : TPX_MEM_HOST, sgpu,
                      TPX_ACCESS_READ | TPX_ACCESS_WRITE};
  if ((rc = tpx_mem_register(ep, &d, &mem))) {
    die("register", rc);
    goto out;
  }
  uint8_t md[TPX_MD_MAX + 4] = "MD";
  size_t mdl = 0;
  tpx_mem_get_public_data(mem, md + 4, TPX_MD_MAX, &mdl);
  if ((rc = tpx_notify(peer, md, mdl + 4))) {
    die("notify", rc);
    goto out;
  }
  int total = c.iters + c.warmup;
  double su0, ss0, st0 = now_ms();
  cpu_now(&su0, &ss0);
  if (c.op == TPX_OP_SEND) {
    tpx_xfer_t *r = NULL, *s = NULL;
    if ((rc = tpx_xfer_prep_recv(peer, mem, 0, c.size, 1, &r)) ||
        (c.latency && (rc = tpx_xfer_prep_send(peer, mem, 0, c.size, 2, &s)))) {
      die("prepare", rc);
      goto out;
    }
    double sum = 0;
    for (int i = 0; i < total; i++) {
      double t0 = now_ms();
      if ((rc = tpx_xfer_post(r)) || xwait(r, "recv")) goto out2;
      if (c.latency && ((rc = tpx_xfer_post(s)) || xwait(s, "send"))) goto out2;
      double dt = now_ms() - t0;
      if (!c.latency && i >= c.warmup && !ready_ep) {
        sum += dt;
        printf("[PERF][SERVER] Iter %d time=%.3f ms\n", i - c.warmup, dt);
      }
    }
    if (!c.latency && !ready_ep)
      printf("[PERF][SERVER] Avg (%d iter): %.3f ms, BW: %.2f GB/s (receiver, per GPU)\n", c.iters,
             sum / c.iters, c.size / (sum / c.iters * 1e-3) / 1e9);
  out2:
    tpx_xfer_free(r);
    tpx_xfer_free(s);
  } else if (c.op == TPX_OP_WRITE && c.latency) {
    tpx_iov_t v = {mem, 0, cli, 0, c.size};
    tpx_xfer_t *w = NULL;
    if ((rc = tpx_xfer_prep_write(peer, &v, 1, "p", 1, &w))) {
      die("prepare", rc);
      goto out;
    }
    for (int i = 0; i < total; i++) {
      if (wait_notif(ep, &n, "ping")) break;
      if ((rc = tpx_xfer_post(w)) || xwait(w, "write")) break;
    }
    tpx_xfer_free(w);
  }
  if (wait_notif(ep, &n, "done") == 0) ret = 0;
  if (ret == 0 && !c.latency) /* warm-up included: from our descriptor to the client's DONE */
    cpu_report("server", su0, ss0, now_ms() - st0, (double)c.size * total);
  /* The client's data landed in our buffer: check every byte. */
  if (ret == 0 && !c.latency && (c.op == TPX_OP_WRITE || c.op == TPX_OP_SEND) && bbuf_check(&sb, 1, "server"))
    ret = 1;
out:
  if (mem) {
    tpx_peer_close(peer);
    peer = NULL;
    tpx_mem_deregister(mem);
  }
  tpx_peer_close(peer);
  tpx_rmem_free(cli);
  tpx_endpoint_destroy(ep);
  bbuf_free(&sb);
  return ret;
}

/* ---------------- client ---------------- */
static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

/* --inflight N: warm-up one at a time, then keep N transfers posted; each
 * completion (in posting order) records the time since the previous one. */
static int pipelined(const struct opts *o, tpx_xfer_t **xs, double *t, double *cu0, double *cs0) {
  int rc = 0, n = o->inflight;
  for (int i = 0; i < o->warmup && rc == 0; i++)
    if ((rc = tpx_xfer_post(xs[0])) == 0) rc = tpx_xfer_wait(xs[0], -1);
  if (rc) return rc;
  cpu_now(cu0, cs0);
  double last = now_ms();
  int posted = 0;
  for (; posted < n && posted < o->iters; posted++)
    if ((rc = tpx_xfer_post(xs[posted])) != 0) break;
  for (int i = 0; i < posted; i++) {
    tpx_xfer_t *x = xs[i % n];
    int w = tpx_xfer_wait(x, -1);
    if (w) {
      if (!rc) rc = w;
      continue; /* wait for the others before their handles are freed */
    }
    double now = now_ms();
    t[i] = now - last;
    last = now;
    printf("[PERF] Iter %d time=%.3f ms\n", i, t[i]);
    if (rc == 0 && posted < o->iters && (rc = tpx_xfer_post(x)) == 0) posted++;
  }
  return rc;
}

static int run_client(const struct opts *o, const char *host, int port) {
  tpx_config_t cfg;
  make_cfg(o, &cfg);
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.name = "bench-client";
  p.net = o->net;
  p.gpu = o->gpu;
  p.no_listen = 1;
  tpx_endpoint_t *ep = NULL;
  int rc = tpx_endpoint_create(&p, &ep);
  if (rc) return die("endpoint", rc);
  if (port <= 0) port = cfg.port_base;
  tpx_peer_t *peer = NULL;
  int ret = 1;
  struct bbuf cb = {0};
  tpx_mem_t *mem = NULL;
  tpx_rmem_t *srv = NULL;
  double *t = calloc((size_t)o->iters, sizeof(double));
  if (!t || (rc = bbuf_alloc(&cb, o->size, o->cuda, o->gpu, 1)) != 0) {
    fprintf(stderr, "tpx-bench: cannot allocate %zu bytes of %s memory: %s\n", o->size, o->cuda ? "GPU" : "host",
            tpx_last_error());
    goto out;
  }
  if ((rc = tpx_connect(ep, host, port, &peer))) {
    die("connect", rc);
    goto out;
  }
  tpx_mem_desc_t d = {cb.p, o->size, cb.cuda ? TPX_MEM_CUDA : TPX_MEM_HOST, o->gpu, TPX_ACCESS_WRITE};
  if ((rc = tpx_mem_register(ep, &d, &mem))) {
    die("register", rc);
    goto out;
  }
  uint8_t msg[4 + sizeof(struct cfgmsg) + TPX_MD_MAX] = "CFG";
  struct cfgmsg c = {o->op, o->iters, o->warmup, o->latency, o->size};
  memcpy(msg + 4, &c, sizeof(c));
  size_t mdl = 0;
  tpx_mem_get_public_data(mem, msg + 4 + sizeof(c), TPX_MD_MAX, &mdl);
  if ((rc = tpx_notify(peer, msg, 4 + sizeof(c) + mdl))) {
    die("notify", rc);
    goto out;
  }
  tpx_notif_t n;
  if (wait_notif(ep, &n, "descriptor")) goto out;
  if (n.len < 4 || memcmp(n.msg, "MD", 3) != 0 || (rc = tpx_load_remote_md(n.msg + 4, n.len - 4, &srv))) {
    fprintf(stderr, "tpx-bench: bad descriptor message\n");
    goto out;
  }
  printf("[BENCH] op=%s size=%zu iters=%d channels=%d chunk=%zu transport=%s mem=%s gpu=%d peer_gpu=%d%s\n",
         op_name(o->op), o->size, o->iters, tpx_peer_num_channels(peer), cfg.chunk_bytes,
         tpx_endpoint_transport(ep), mem_name(&cb), o->gpu, tpx_peer_gpu(peer), o->latency ? " latency" : "");
  tpx_xfer_t *x = NULL, *r = NULL, *more[MAX_INFLIGHT] = {NULL};
  tpx_iov_t v = {mem, 0, srv, 0, o->size};
  if (o->op == TPX_OP_WRITE) rc = tpx_xfer_prep_write(peer, &v, 1, o->latency ? "p" : NULL, o->latency, &x);
  else if (o->op == TPX_OP_READ) rc = tpx_xfer_prep_read(peer, &v, 1, NULL, 0, &x);
  else {
    rc = tpx_xfer_prep_send(peer, mem, 0, o->size, 1, &x);
    if (rc == 0 && o->latency) rc = tpx_xfer_prep_recv(peer, mem, 0, o->size, 2, &r);
  }
  /* --inflight: more handles for the same ranges (writes/reads of the same
   * bytes, so the final check still holds). */
  more[0] = x;
  for (int k = 1; k < o->inflight && rc == 0; k++)
    rc = o->op == TPX_OP_WRITE ? tpx_xfer_prep_write(peer, &v, 1, NULL, 0, &more[k])
                               : tpx_xfer_prep_read(peer, &v, 1, NULL, 0, &more[k]);
  if (rc) {
    die("prepare", rc);
    goto out;
  }
  int total = o->iters + o->warmup;
  double cu0 = 0, cs0 = 0;
  if (o->inflight > 1) {
    rc = pipelined(o, more, t, &cu0, &cs0);
  } else {
    for (int i = 0; i < total; i++) {
      if (i == o->warmup) cpu_now(&cu0, &cs0);
      double t0 = now_ms();
      if (o->latency && r && (rc = tpx_xfer_post(r))) break;
      if ((rc = tpx_xfer_post(x))) break;
      if ((rc = tpx_xfer_wait(x, -1))) break;
      if (o->latency && r && (rc = tpx_xfer_wait(r, -1))) break;
      if (o->latency && o->op == TPX_OP_WRITE && wait_notif(ep, &n, "pong")) {
        rc = TPX_ETIMEDOUT;
        break;
      }
      double dt = now_ms() - t0;
      if (i < o->warmup) continue;
      t[i - o->warmup] = dt;
      if (!o->latency) printf("[PERF] Iter %d time=%.3f ms\n", i - o->warmup, dt);
    }
  }
  for (int k = 1; k < o->inflight; k++)
    tpx_xfer_free(more[k]);
  tpx_xfer_free(x);
  tpx_xfer_free(r);
  if (rc) {
    die(op_name(o->op), rc);
    goto out;
  }
  double sum = 0;
  for (int i = 0; i < o->iters; i++) sum += t[i];
  double avg = sum / o->iters;
  if (!o->latency) cpu_report("client", cu0, cs0, sum, (double)o->size * o->iters);
  if (o->latency) {
    qsort(t, (size_t)o->iters, sizeof(double), cmp_double);
    double div = o->op == TPX_OP_READ ? 1.0 : 2.0;
    printf("[PERF] Latency (%d iter, %zu B, %s, %s): avg %.2f us, p50 %.2f us, p99 %.2f us\n", o->iters, o->size,
           op_name(o->op), o->op == TPX_OP_READ ? "full read round trip" : "one-way = round trip / 2",
           avg * 1e3 / div, t[o->iters / 2] * 1e3 / div, t[(o->iters * 99) / 100] * 1e3 / div);
  } else {
    printf("[PERF] Avg (%d iter): %.3f ms, BW: %.2f GB/s (per GPU; 1 GPU, so also total; GB = 1e9 B)\n",
           o->iters, avg, o->size / (avg * 1e-3) / 1e9);
  }
  fflush(stdout);
  tpx_notify(peer, "DONE", 4);
  ret = 0;
  /* A read brought the server's data here: check every byte. */
  if (!o->latency && o->op == TPX_OP_READ && bbuf_check(&cb, 2, "client")) ret = 1;
out:
  tpx_peer_close(peer);
  if (mem) tpx_mem_deregister(mem);
  tpx_rmem_free(srv);
  free(t);
  tpx_endpoint_destroy(ep);
  bbuf_free(&cb);
  return ret;
}

/* ---------------- loopback ---------------- */
struct lb {
  struct opts o;
  tpx_endpoint_t *ep;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int ret;
};

static void *server_thread(void *arg) {
  struct lb *l = arg;
  l->ret = run_server(&l->o, &l->ep, &l->mu, &l->cv);
  return NULL;
}

int main(int argc, char **argv) {
  if (tool_version_asked(argc, argv, "tpx-bench")) return 0;
  struct opts o;
  if (parse(argc, argv, &o) != 0) {
    usage();
    return 2;
  }
  if (o.cuda) { /* fail before any connection rather than leave the other side waiting */
    int ndev = 0;
    tpx__gpu_device_count(&ndev);
    int need = (o.server_gpu > o.gpu ? o.server_gpu : o.gpu) + 1;
    if (ndev < need) {
      fprintf(stderr, "tpx-bench: --mem cuda needs GPU %d, %d usable (%s)\n", need - 1, ndev,
              ndev ? "no such device" : tpx_last_error());
      return 1;
    }
  }
  if (strcmp(o.mode, "server") == 0 || strcmp(o.mode, "client") == 0) {
    int r = o.mode[0] == 's' ? run_server(&o, NULL, NULL, NULL) : run_client(&o, o.host, o.port);
    if (o.cuda) printf("[GPU] primary contexts still retained after teardown: %d\n", tpx__gpu_ctx_retained());
    return r;
  }
  tpx_config_t cfg;
  make_cfg(&o, &cfg);
  if (!cfg.net_plugin[0] || strcmp(cfg.net_plugin, "tpx") == 0) {
    /* Both endpoints share one transport (their loopback comms then pair up
     * on its threads); its sockets per comm as an endpoint would choose. */
    cfg.nsocks = tpx_config_nsocks(&cfg, cfg.num_channels);
    int rc = tpx_net_open_builtin(&cfg, &o.net);
    if (rc) return die("transport", rc);
  } else {
    int rc = tpx_net_open(cfg.net_plugin, &o.net);
    if (rc) return die("transport", rc);
  }
  struct lb l;
  memset(&l, 0, sizeof(l));
  l.o = o;
  l.o.port = TPX_PORT_EPHEMERAL;
  l.o.listen_host = "127.0.0.1";
  pthread_mutex_init(&l.mu, NULL);
  pthread_cond_init(&l.cv, NULL);
  pthread_t th;
  if (pthread_create(&th, NULL, server_thread, &l) != 0) return 1;
  pthread_mutex_lock(&l.mu);
  while (!l.ep) pthread_cond_wait(&l.cv, &l.mu);
  pthread_mutex_unlock(&l.mu);
  int rc = 1;
  if (l.ep != (tpx_endpoint_t *)-1) rc = run_client(&o, "127.0.0.1", tpx_endpoint_port(l.ep));
  pthread_join(th, NULL);
  tpx_net_close(o.net);
  if (o.cuda) printf("[GPU] primary contexts still retained after teardown: %d\n", tpx__gpu_ctx_retained());
  return rc ? rc : l.ret;
}
