/* tpx-soak: many bytes of random transfers through the engine, every byte
 * verified (docs/RELIABILITY.md).
 *
 *   tpx-soak [--bytes 10G] [--seed S] [--peers 3] [--channels 4] [--lanes 2]
 *            [--max-size 64M] [--mem host|cuda] [--timeout-ms MS] [--quiet]
 *
 * One process, --peers endpoints on loopback, every pair connected (3 make a
 * triangle). Each pair runs --lanes lanes (threads); a lane repeats: pick a
 * direction, an operation (WRITE, READ, or SEND with its RECV) and a length
 * log-uniform in 1 B .. --max-size, at random offsets inside the two areas of
 * the registered regions that the lane owns (lanes never share bytes, so
 * transfers run concurrently on every channel). The source is filled with a
 * pattern derived from (seed, lane, transfer, byte index), the destination's
 * neighbouring bytes hold a guard; after completion every byte of the
 * destination is compared and the guards must be intact. A write or read
 * carries a notification, which the lane waits for at the target before it
 * touches those bytes again: the initiator's completion says that the
 * target's transport is done with them only through TCP (the acknowledgement
 * or the data), which ThreadSanitizer cannot see; the notification is
 * published through the target's own threads. Each lane's choices
 * come from its own generator seeded from --seed: a failure names the seed,
 * lane and transfer, and the same command repeats the same transfers.
 *
 * --mem cuda: every region in GPU memory (endpoint e on GPU e % count), fills
 * and checks through a host copy. Exit status 0 only with every byte
 * verified, no error, and as many fds and threads after teardown as before. */
#include <dirent.h>
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "common/config.h" /* the environment's number parser, for sizes */
#include "internal.h"      /* --mem cuda: GPU buffers and copies (tools/internal.h) */
#include "tpx/tpx.h"
#include "version.h"

#define MAX_PEERS 8
#define MAX_LANES 16
#define GUARD 64 /* bytes checked on each side of a destination */

struct opts {
  unsigned long long bytes, seed, max;
  int peers, channels, lanes, cuda, timeout_ms, quiet;
};

struct node {
  tpx_endpoint_t *ep;
  tpx_peer_t *peer[MAX_PEERS]; /* to node j */
  uint8_t *base;               /* the region (host or device) */
  size_t len;
  int gpu;
  tpx_mem_t *mem;
  tpx_rmem_t *rmem; /* its descriptor as peers load it */
  /* Notifications of the writes into and reads from this node, popped by
   * whichever lane waits (under mu) and sorted per lane: got[lane] is the
   * last transfer of that lane seen, plus one. */
  pthread_mutex_t mu;
  uint64_t got[MAX_PEERS * MAX_PEERS * MAX_LANES];
};

struct soak;

struct lane {
  struct soak *s;
  int a, b, k;   /* the pair (a < b) and lane index */
  int id;        /* lane number, for messages and the generator */
  uint64_t rng;  /* splitmix64 state */
  uint8_t *host; /* host staging (cuda) of max + 2 * GUARD bytes */
  unsigned long long n[3], bytes, errors;
};

struct soak {
  struct opts o;
  struct node nodes[MAX_PEERS];
  size_t area;              /* bytes per lane per side */
  unsigned long long share; /* bytes per lane: --bytes over the lanes */
  int finished;             /* lanes that ended (atomic) */
  unsigned long long done;  /* bytes verified (atomic) */
  int failed;               /* atomic: stop every lane */
};

static const char *op_name[3] = {"write", "read", "send"};

static uint64_t mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

static uint64_t next(struct lane *l) {
  return mix(l->rng++);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* ---- the pattern: byte k of a transfer is byte k % 8 of mix(tseed + k / 8) ---- */

static void pat_fill(uint8_t *p, size_t len, uint64_t tseed) {
  size_t k = 0;
  for (; k + 8 <= len; k += 8) {
    uint64_t w = mix(tseed + k / 8);
    memcpy(p + k, &w, 8);
  }
  uint64_t w = mix(tseed + k / 8);
  for (size_t j = 0; k + j < len; j++)
    p[k + j] = (uint8_t)(w >> (8 * j));
}

/* First byte that differs from the pattern, len if none. */
static size_t pat_check(const uint8_t *p, size_t len, uint64_t tseed) {
  size_t k = 0;
  for (; k + 8 <= len; k += 8) {
    uint64_t w = mix(tseed + k / 8), v;
    memcpy(&v, p + k, 8);
    if (v != w) break;
  }
  uint64_t w = mix(tseed + k / 8);
  for (size_t j = 0; k + j < len; j++)
    if (p[k + j] != (uint8_t)(w >> (8 * (j % 8)))) return k + j;
  return len;
}

static uint8_t guard_byte(uint64_t tseed, size_t i) {
  return (uint8_t)(0xA5 ^ (tseed >> (i % 56)) ^ i);
}

/* ---- memory: host pointers directly, GPU memory through the lane's host copy ---- */

static int put(struct lane *l, struct node *n, size_t off, const uint8_t *h, size_t len) {
  if (!l->s->o.cuda) {
    memcpy(n->base + off, h, len);
    return 0;
  }
  return tpx__gpu_memcpy(n->gpu, n->base + off, h, len);
}

static const uint8_t *get(struct lane *l, struct node *n, size_t off, size_t len) {
  if (!l->s->o.cuda) return n->base + off;
  return tpx__gpu_memcpy(n->gpu, l->host, n->base + off, len) == 0 ? l->host : NULL;
}

/* The source bytes. */
static int fill_src(struct lane *l, struct node *n, size_t off, size_t len, uint64_t tseed) {
  if (!l->s->o.cuda) {
    pat_fill(n->base + off, len, tseed);
    return 0;
  }
  pat_fill(l->host, len, tseed);
  return put(l, n, off, l->host, len);
}

/* The destination's guards: [lo, off) and [off + len, hi) of its area. */
static size_t min_sz(size_t a, size_t b) {
  return a < b ? a : b;
}

static int set_guards(struct lane *l, struct node *n, size_t lo, size_t hi, size_t off, size_t len,
                      uint64_t tseed) {
  uint8_t g[GUARD];
  size_t before = min_sz(off - lo, GUARD), after = min_sz(hi - off - len, GUARD);
  for (size_t i = 0; i < GUARD; i++)
    g[i] = guard_byte(tseed, i);
  int rc = before ? put(l, n, off - before, g, before) : 0;
  if (rc == 0 && after) rc = put(l, n, off + len, g, after);
  return rc;
}

/* n bytes at off still hold the guard: 0, else -1. */
static int guard_ok(struct lane *l, struct node *n, size_t off, size_t cnt, uint64_t tseed) {
  const uint8_t *p = cnt ? get(l, n, off, cnt) : NULL;
  if (cnt && !p) return -1;
  for (size_t i = 0; i < cnt; i++)
    if (p[i] != guard_byte(tseed, i)) return -1;
  return 0;
}

static int check_guards(struct lane *l, struct node *n, size_t lo, size_t hi, size_t off,
                        size_t len, uint64_t tseed) {
  size_t before = min_sz(off - lo, GUARD), after = min_sz(hi - off - len, GUARD);
  return guard_ok(l, n, off - before, before, tseed) || guard_ok(l, n, off + len, after, tseed) ? -1
                                                                                                : 0;
}

/* ---- one transfer ---- */

struct xfer_plan {
  int op, from, to; /* op 0 write, 1 read, 2 send; bytes move from node `from` to node `to` */
  size_t len, soff, doff;
  uint64_t tseed, t;
};

static size_t log_uniform(struct lane *l, size_t max) {
  double u = (double)(next(l) >> 11) / (double)(1ull << 53);
  size_t len = (size_t)exp2(u * log2((double)max + 1.0));
  return len < 1 ? 1 : len > max ? max : len;
}

/* The lane's area in node x: (index of the partner among x's others) * lanes + k. */
static size_t area_off(struct lane *l, int x) {
  int other = x == l->a ? l->b : l->a;
  int q = other < x ? other : other - 1;
  return ((size_t)q * (size_t)l->s->o.lanes + (size_t)l->k) * l->s->area;
}

static void plan(struct lane *l, uint64_t t, struct xfer_plan *p) {
  int dir = (int)(next(l) & 1);
  p->op = (int)(next(l) % 3);
  p->from = dir ? l->b : l->a;
  p->to = dir ? l->a : l->b;
  p->len = log_uniform(l, l->s->o.max);
  p->soff = area_off(l, p->from) + next(l) % (l->s->area - p->len + 1);
  p->doff = area_off(l, p->to) + next(l) % (l->s->area - p->len + 1);
  p->t = t;
  p->tseed = mix(l->s->o.seed ^ mix((uint64_t)l->id << 40 | t));
}

/* The target's notification of the lane's transfer t (a write's or a read's):
 * 0, or an error. */
static int note(struct node *n, const tpx_notif_t *nt) {
  uint64_t m[2];
  if (nt->len != sizeof(m)) return TPX_EPROTO;
  memcpy(m, nt->msg, sizeof(m));
  if (m[0] >= sizeof(n->got) / sizeof(n->got[0])) return TPX_EPROTO;
  n->got[m[0]] = m[1] + 1;
  return 0;
}

static int await_notif(struct lane *l, struct node *n, uint64_t t, int timeout_ms) {
  double end = now_s() + timeout_ms / 1000.0;
  for (;;) {
    int rc = 0;
    pthread_mutex_lock(&n->mu); /* one lane pops at a time */
    if (n->got[l->id] <= t) {
      tpx_notif_t nt;
      if ((rc = tpx_wait_notif(n->ep, 5, &nt)) == 1) rc = note(n, &nt);
    }
    int seen = n->got[l->id] > t;
    pthread_mutex_unlock(&n->mu);
    if (seen) return 0;
    if (rc < 0) return rc;
    if (now_s() > end) return TPX_ETIMEDOUT;
  }
}

/* Post and wait: the initiator of a write is `from`, of a read `to`. */
static int run_xfer(struct lane *l, const struct xfer_plan *p) {
  struct soak *s = l->s;
  struct node *src = &s->nodes[p->from], *dst = &s->nodes[p->to];
  tpx_xfer_t *x = NULL, *r = NULL;
  uint64_t m[2] = {(uint64_t)l->id, p->t};
  int rc;
  if (p->op < 2) {
    tpx_iov_t v = {p->op == 0 ? src->mem : dst->mem, p->op == 0 ? p->soff : p->doff,
                   p->op == 0 ? dst->rmem : src->rmem, p->op == 0 ? p->doff : p->soff, p->len};
    tpx_peer_t *by = p->op == 0 ? src->peer[p->to] : dst->peer[p->from];
    rc = p->op == 0 ? tpx_xfer_prep_write(by, &v, 1, m, sizeof(m), &x)
                    : tpx_xfer_prep_read(by, &v, 1, m, sizeof(m), &x);
    if (rc == 0) rc = tpx_xfer_post(x);
  } else {
    size_t cap = p->len + (size_t)(p->t % 3); /* a roomier receive is fine */
    size_t room = area_off(l, p->to) + s->area - p->doff;
    rc = tpx_recv(dst->peer[p->from], dst->mem, p->doff, cap < room ? cap : room, (uint64_t)l->k,
                  &r);
    if (rc == 0) rc = tpx_send(src->peer[p->to], src->mem, p->soff, p->len, (uint64_t)l->k, &x);
  }
  if (rc == 0) rc = tpx_xfer_wait(x, s->o.timeout_ms);
  if (rc == 0 && r) rc = tpx_xfer_wait(r, s->o.timeout_ms);
  if (rc == 0 && r && tpx_xfer_received(r) != p->len) rc = TPX_EPROTO;
  if (rc == 0 && p->op < 2) rc = await_notif(l, p->op == 0 ? dst : src, p->t, s->o.timeout_ms);
  if (rc)
    fprintf(stderr, "tpx-soak: lane %d transfer %llu (%s): %s: %s\n", l->id,
            (unsigned long long)p->t, op_name[p->op], tpx_strerror(rc), tpx_last_error());
  tpx_xfer_free(x);
  tpx_xfer_free(r);
  return rc;
}

/* Fill, transfer, verify: 0, or -1 after saying what differs. */
static int one(struct lane *l, const struct xfer_plan *pp) {
  struct soak *s = l->s;
  const struct xfer_plan p = *pp;
  uint64_t t = p.t;
  struct node *src = &s->nodes[p.from], *dst = &s->nodes[p.to];
  size_t lo = area_off(l, p.to), hi = lo + s->area;
  if (fill_src(l, src, p.soff, p.len, p.tseed) ||
      set_guards(l, dst, lo, hi, p.doff, p.len, p.tseed)) {
    fprintf(stderr, "tpx-soak: lane %d: filling failed: %s\n", l->id, tpx_last_error());
    return -1;
  }
  if (run_xfer(l, pp)) return -1;
  const uint8_t *d = get(l, dst, p.doff, p.len);
  size_t bad = d ? pat_check(d, p.len, p.tseed) : 0;
  int gbad = bad == p.len ? check_guards(l, dst, lo, hi, p.doff, p.len, p.tseed) : 0;
  if (bad != p.len || gbad) {
    fprintf(stderr,
            "tpx-soak: seed %llu lane %d transfer %llu: %s of %zu bytes, node %d+%zu -> node "
            "%d+%zu: %s%zu\n",
            s->o.seed, l->id, (unsigned long long)t, op_name[p.op], p.len, p.from, p.soff, p.to,
            p.doff, gbad ? "a guard byte next to the destination changed" : "first bad byte at ",
            gbad ? (size_t)0 : bad);
    return -1;
  }
  l->n[p.op]++;
  l->bytes += p.len;
  return 0;
}

static void *lane_main(void *arg) {
  struct lane *l = arg;
  struct soak *s = l->s;
  /* Each lane moves its share, passed by at most one transfer: which
   * transfers a run makes depends on the seed alone, not on timing. */
  for (uint64_t t = 0, planned = 0;
       planned < s->share && !__atomic_load_n(&s->failed, __ATOMIC_RELAXED); t++) {
    struct xfer_plan p;
    plan(l, t, &p);
    planned += p.len;
    uint64_t before = l->bytes;
    if (one(l, &p) != 0) {
      l->errors++;
      __atomic_store_n(&s->failed, 1, __ATOMIC_RELAXED);
      break;
    }
    __atomic_fetch_add(&s->done, l->bytes - before, __ATOMIC_RELAXED);
  }
  __atomic_add_fetch(&s->finished, 1, __ATOMIC_RELEASE);
  return NULL;
}

/* ---- setup and teardown ---- */

struct res {
  long rss_kib, fds, threads;
};

static long status_field(const char *key) {
  FILE *f = fopen("/proc/self/status", "r");
  char line[256];
  long v = -1;
  size_t kl = strlen(key);
  while (f && fgets(line, sizeof(line), f))
    if (strncmp(line, key, kl) == 0) v = strtol(line + kl, NULL, 10);
  if (f) fclose(f);
  return v;
}

static void *noop(void *arg) {
  return arg;
}

/* The open fds but the CUDA driver's device files (see res_now), and the
 * directory's own; with `list`, every one is also written there as
 * " fd=target", for a report that they did not all close. */
static long walk_fds(FILE *list) {
  long count = 0;
  DIR *d = opendir("/proc/self/fd");
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.' || atoi(e->d_name) == dirfd(d)) continue;
    char path[300], target[128] = "?";
    snprintf(path, sizeof(path), "/proc/self/fd/%s", e->d_name);
    ssize_t n = readlink(path, target, sizeof(target) - 1);
    if (n > 0) target[n] = 0;
    if (strncmp(target, "/dev/nvidia", 11) != 0) count++;
    if (list) fprintf(list, " %s=%s", e->d_name, target);
  }
  if (d) closedir(d);
  if (list) fputc('\n', list);
  return count;
}

static void res_now(struct res *r) {
  /* Sanitizer runtimes (ThreadSanitizer's background thread) start a thread
   * of their own at the first pthread_create: have it running before the
   * first count. */
  static int warmed;
  pthread_t t;
  if (!warmed && pthread_create(&t, NULL, noop, NULL) == 0) {
    pthread_join(t, NULL);
    warmed = 1;
  }
  r->rss_kib = status_field("VmRSS:");
  /* The CUDA driver keeps what its first uses open (its device files and
   * threads, "cuda*") until the process exits: those are not counted. */
  r->threads = 0;
  DIR *d = opendir("/proc/self/task");
  for (struct dirent *e; d && (e = readdir(d));) {
    if (e->d_name[0] == '.') continue;
    char path[300], comm[32] = "";
    snprintf(path, sizeof(path), "/proc/self/task/%s/comm", e->d_name);
    FILE *f = fopen(path, "r");
    if (f) {
      if (!fgets(comm, sizeof(comm), f)) comm[0] = 0;
      fclose(f);
    }
    if (strncmp(comm, "cuda", 4) != 0) r->threads++;
  }
  if (d) closedir(d);
  r->fds = walk_fds(NULL);
}

static int region_open(struct soak *s, struct node *n) {
  n->len = (size_t)(s->o.peers - 1) * (size_t)s->o.lanes * s->area;
  void *p = NULL;
  int rc;
  if (s->o.cuda) {
    if ((rc = tpx__gpu_retain(n->gpu)) != 0) return rc;
    rc = tpx__gpu_malloc(n->gpu, n->len, &p);
  } else {
    p = aligned_alloc(4096, n->len);
    rc = p ? 0 : TPX_ENOMEM;
    if (p) memset(p, 0, n->len); /* every page touched before the run */
  }
  if (rc) return rc;
  n->base = p;
  tpx_mem_desc_t d = {p, n->len, s->o.cuda ? TPX_MEM_CUDA : TPX_MEM_HOST, n->gpu,
                      TPX_ACCESS_READ | TPX_ACCESS_WRITE};
  uint8_t blob[TPX_MD_MAX];
  size_t bl = 0;
  if ((rc = tpx_mem_register(n->ep, &d, &n->mem)) != 0) return rc;
  if ((rc = tpx_mem_get_public_data(n->mem, blob, sizeof(blob), &bl)) != 0) return rc;
  return tpx_load_remote_md(blob, bl, &n->rmem);
}

static int node_open(struct soak *s, int e, const tpx_config_t *cfg) {
  struct node *n = &s->nodes[e];
  pthread_mutex_init(&n->mu, NULL);
  char name[16];
  snprintf(name, sizeof(name), "soak%d", e);
  int ngpu = 1;
  if (s->o.cuda && (tpx__gpu_device_count(&ngpu) != 0 || ngpu < 1)) return TPX_ENOTSUP;
  n->gpu = s->o.cuda ? e % ngpu : 0;
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = cfg;
  p.port = TPX_PORT_EPHEMERAL;
  p.listen_host = "127.0.0.1";
  p.name = name;
  p.gpu = n->gpu;
  int rc = tpx_endpoint_create(&p, &n->ep);
  return rc ? rc : region_open(s, n);
}

static int mesh(struct soak *s) {
  for (int a = 0; a < s->o.peers; a++)
    for (int b = a + 1; b < s->o.peers; b++) {
      struct node *na = &s->nodes[a], *nb = &s->nodes[b];
      int rc = tpx_connect(na->ep, "127.0.0.1", tpx_endpoint_port(nb->ep), &na->peer[b]);
      if (rc == 0) rc = tpx_accept(nb->ep, 30000, &nb->peer[a]);
      if (rc) return rc;
      if (strcmp(tpx_peer_name(nb->peer[a]), tpx_endpoint_name(na->ep)) != 0) return TPX_EPROTO;
    }
  return 0;
}

static void node_close(struct soak *s, struct node *n) {
  for (int j = 0; j < MAX_PEERS; j++)
    tpx_peer_close(n->peer[j]);
  if (n->mem && tpx_mem_deregister(n->mem) != 0)
    fprintf(stderr, "tpx-soak: deregister: %s\n", tpx_last_error());
  tpx_rmem_free(n->rmem);
  tpx_endpoint_destroy(n->ep);
  pthread_mutex_destroy(&n->mu);
  if (s->o.cuda && n->base) {
    tpx__gpu_free(n->gpu, n->base);
    tpx__gpu_release(n->gpu);
  } else {
    free(n->base);
  }
  memset(n, 0, sizeof(*n));
}

/* ---- the command line ---- */

static int usage(const char *why) {
  if (why) fprintf(stderr, "tpx-soak: %s\n", why);
  fprintf(
      stderr,
      "usage: tpx-soak [--bytes N] [--seed S] [--peers 2..%d] [--channels C] [--lanes 1..%d]\n"
      "                [--max-size N] [--mem host|cuda] [--timeout-ms MS] [--quiet]\n"
      "sizes take K/M/G suffixes (binary); defaults: --bytes 10G --seed 1 --peers 3 --channels 4\n"
      "--lanes 2 --max-size 64M --mem host --timeout-ms 120000\n",
      MAX_PEERS, MAX_LANES);
  return 2;
}

static int num(const char *v, unsigned long long lo, unsigned long long hi,
               unsigned long long *out) {
  long long n;
  if (!v || tpx__config_parse_number(v, &n) != 0 || n < 0 || (unsigned long long)n < lo ||
      (unsigned long long)n > hi)
    return -1;
  *out = (unsigned long long)n;
  return 0;
}

static int parse(int argc, char **argv, struct opts *o) {
  *o = (struct opts){.bytes = 10ull << 30,
                     .seed = 1,
                     .max = 64u << 20,
                     .peers = 3,
                     .channels = 4,
                     .lanes = 2,
                     .timeout_ms = 120000};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    unsigned long long x = 0;
    int bad = 0, takes = 1;
    if (!strcmp(a, "--bytes"))
      bad = num(v, 1, 1ull << 50, &o->bytes);
    else if (!strcmp(a, "--seed"))
      bad = num(v, 0, ~0ull >> 1, &o->seed);
    else if (!strcmp(a, "--max-size"))
      bad = num(v, 1, 1ull << 30, &o->max);
    else if (!strcmp(a, "--peers"))
      bad = num(v, 2, MAX_PEERS, &x), o->peers = (int)x;
    else if (!strcmp(a, "--channels"))
      bad = num(v, 1, 64, &x), o->channels = (int)x;
    else if (!strcmp(a, "--lanes"))
      bad = num(v, 1, MAX_LANES, &x), o->lanes = (int)x;
    else if (!strcmp(a, "--timeout-ms"))
      bad = num(v, 100, 3600000, &x), o->timeout_ms = (int)x;
    else if (!strcmp(a, "--mem"))
      bad = !v || (strcmp(v, "host") && strcmp(v, "cuda")), o->cuda = v && !strcmp(v, "cuda");
    else if (!strcmp(a, "--quiet"))
      o->quiet = 1, takes = 0;
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) {
      usage(NULL);
      return -1; /* exit 0 */
    } else {
      fprintf(stderr, "tpx-soak: unknown argument %s\n", a);
      return usage(NULL);
    }
    if (bad) {
      fprintf(stderr, "tpx-soak: %s %s: not a valid value\n", a, v ? v : "(missing)");
      return usage(NULL);
    }
    i += takes;
  }
  return 0;
}

/* ---- the run ---- */

static int setup(struct soak *s) {
  tpx_config_t cfg;
  tpx_config_from_env(&cfg);
  cfg.num_channels = s->o.channels;
  cfg.progress_thread = 1; /* every endpoint lives in this process */
  if (cfg.timeout_ms < s->o.timeout_ms) cfg.timeout_ms = s->o.timeout_ms;
  s->area = (size_t)((s->o.max + s->o.max / 4 + 2 * GUARD + 4095) & ~4095ull);
  int rc = 0;
  for (int e = 0; rc == 0 && e < s->o.peers; e++)
    if ((rc = node_open(s, e, &cfg)) != 0)
      fprintf(stderr, "tpx-soak: endpoint %d: %s\n", e, tool_error(rc));
  if (rc == 0 && (rc = mesh(s)) != 0)
    fprintf(stderr, "tpx-soak: connecting: %s\n", tool_error(rc));
  return rc;
}

/* Lanes run; the main thread reports progress. Returns the errors. */
static unsigned long long run(struct soak *s, struct lane *lanes, int nl, double *secs) {
  pthread_t th[MAX_PEERS * MAX_PEERS * MAX_LANES];
  int started = 0;
  double t0 = now_s(), last = t0;
  s->share = (s->o.bytes + (unsigned long long)nl - 1) / (unsigned long long)nl;
  for (int i = 0; i < nl; i++, started++)
    if (pthread_create(&th[i], NULL, lane_main, &lanes[i]) != 0) {
      fprintf(stderr, "tpx-soak: cannot start lane %d\n", i);
      __atomic_store_n(&s->failed, 1, __ATOMIC_RELAXED);
      break;
    }
  /* Progress lines while the lanes run (they end by themselves). */
  while (!s->o.quiet && __atomic_load_n(&s->finished, __ATOMIC_ACQUIRE) < started &&
         !__atomic_load_n(&s->failed, __ATOMIC_RELAXED)) {
    usleep(200 * 1000);
    if (now_s() - last < 10) continue;
    last = now_s();
    printf("[SOAK] %.1f s: %.2f GB verified\n", last - t0,
           __atomic_load_n(&s->done, __ATOMIC_RELAXED) / 1e9);
    fflush(stdout);
  }
  unsigned long long errors = started < nl;
  for (int i = 0; i < started; i++)
    pthread_join(th[i], NULL);
  for (int i = 0; i < nl; i++)
    errors += lanes[i].errors;
  *secs = now_s() - t0;
  return errors;
}

static int lanes_make(struct soak *s, struct lane *lanes) {
  int nl = 0;
  for (int a = 0; a < s->o.peers; a++)
    for (int b = a + 1; b < s->o.peers; b++)
      for (int k = 0; k < s->o.lanes; k++, nl++) {
        struct lane *l = &lanes[nl];
        *l = (struct lane){.s = s, .a = a, .b = b, .k = k, .id = nl};
        l->rng = mix(s->o.seed) ^ mix((uint64_t)nl + 1);
        if (s->o.cuda && !(l->host = malloc(s->area))) return -1;
      }
  return nl;
}

static void report(const struct soak *s, const struct lane *lanes, int nl, double secs,
                   unsigned long long errors, const struct res r[3]) {
  unsigned long long n[3] = {0}, bytes = 0;
  for (int i = 0; i < nl; i++) {
    for (int j = 0; j < 3; j++)
      n[j] += lanes[i].n[j];
    bytes += lanes[i].bytes;
  }
  printf("[SOAK] seed %llu: %llu bytes verified in %llu transfers (write %llu, read %llu, send "
         "%llu), %.1f s, "
         "%.2f GB/s, errors %llu\n",
         s->o.seed, bytes, n[0] + n[1] + n[2], n[0], n[1], n[2], secs, bytes / secs / 1e9, errors);
  printf("[SOAK] %d endpoints, %d lanes, %d channels, 1 B..%llu B, %s memory; RSS %ld -> %ld -> "
         "%ld MiB, "
         "fds %ld -> %ld -> %ld, threads %ld -> %ld -> %ld (start, run, end)\n",
         s->o.peers, nl, s->o.channels, s->o.max, s->o.cuda ? "GPU" : "host", r[0].rss_kib / 1024,
         r[1].rss_kib / 1024, r[2].rss_kib / 1024, r[0].fds, r[1].fds, r[2].fds, r[0].threads,
         r[1].threads, r[2].threads);
}

/* --mem cuda: one short pass first. The CUDA driver keeps what its first
 * contexts open (device files, pipes, eventfds, its "cuda*" threads) until
 * the process exits, so the count of fds and threads that must come back
 * is taken after a whole life of endpoints, GPU buffers and transfers. */
static int warm_up(struct soak *s, struct lane *lanes) {
  struct opts keep = s->o;
  s->o.bytes = 256ull << 20;
  s->o.quiet = 1;
  unsigned long long errors = 1;
  double secs = 0;
  int nl = 0;
  if (setup(s) == 0 && (nl = lanes_make(s, lanes)) > 0) errors = run(s, lanes, nl, &secs);
  for (int e = 0; e < s->o.peers; e++)
    node_close(s, &s->nodes[e]);
  for (int i = 0; i < nl; i++)
    free(lanes[i].host);
  struct opts o = keep;
  memset(s, 0, sizeof(*s));
  s->o = o;
  if (errors) fprintf(stderr, "tpx-soak: the warm-up pass failed\n");
  return errors ? -1 : 0;
}

int main(int argc, char **argv) {
  static struct soak s;
  static struct lane lanes[MAX_PEERS * MAX_PEERS * MAX_LANES];
  if (tool_version_asked(argc, argv, "tpx-soak")) return 0;
  int rc = parse(argc, argv, &s.o);
  if (rc) return rc < 0 ? 0 : rc;
  setvbuf(stdout, NULL, _IOLBF, 0);
  if (s.o.cuda && warm_up(&s, lanes) != 0) return 1;
  struct res r[3];
  res_now(&r[0]);
  printf("[SOAK] seed %llu, %llu bytes, %d endpoints, %d lanes per pair, %d channels, up to %llu "
         "bytes, %s\n",
         s.o.seed, s.o.bytes, s.o.peers, s.o.lanes, s.o.channels, s.o.max,
         s.o.cuda ? "cuda" : "host");
  unsigned long long errors = 1;
  double secs = 0;
  int nl = 0;
  if (setup(&s) == 0 && (nl = lanes_make(&s, lanes)) > 0) errors = run(&s, lanes, nl, &secs);
  res_now(&r[1]);
  for (int e = 0; e < s.o.peers; e++)
    node_close(&s, &s.nodes[e]);
  for (int i = 0; i < nl; i++)
    free(lanes[i].host);
  res_now(&r[2]);
  report(&s, lanes, nl, secs > 0 ? secs : 1e-9, errors, r);
  if (r[2].fds != r[0].fds || r[2].threads != r[0].threads) {
    fprintf(stderr, "tpx-soak: %ld fds and %ld threads after teardown, %ld and %ld before; open now:",
            r[2].fds, r[2].threads, r[0].fds, r[0].threads);
    (void)walk_fds(stderr);
    errors++;
  }
  if (s.o.cuda && tpx__gpu_ctx_retained() != 0) {
    fprintf(stderr, "tpx-soak: %d GPU contexts still held after teardown\n", tpx__gpu_ctx_retained());
    errors++;
  }
  return errors ? 1 : 0;
}
