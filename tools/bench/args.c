/* tpx-bench's command line: one table, one row per option. A row says what
 * the value is (a size, an integer in a range, a setting checked with the
 * environment's own rule, a list, a choice) and where it goes; the parser,
 * the usage text and the error messages all come from it. Every refusal names
 * the argument and the value, and says what would be accepted. */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "common/config.h"

enum kind {
  K_FLAG,   /* no value: sets the int to 1 */
  K_INT,    /* integer in [lo, hi] */
  K_SIZE,   /* bytes, K/M/G suffixes (the environment's syntax), in [lo, hi] */
  K_ENV,    /* a number checked by the rule of environment variable `env` */
  K_STR,    /* any text */
  K_CUSTOM, /* `fn` parses it */
};

enum { S = 1 << BENCH_SERVER, C = 1 << BENCH_CLIENT, L = 1 << BENCH_LOOPBACK, ALL = S | C | L };

struct opt {
  const char *name, *alias;
  unsigned modes; /* where it means something: a server follows its client's runs */
  enum kind kind;
  size_t off; /* into struct bench_opts */
  long long lo, hi;
  const char *env; /* K_ENV */
  int (*fn)(struct bench_opts *o, const char *name, const char *v, char *err, size_t n);
  const char *meta, *help;
};

#define OFF(f) offsetof(struct bench_opts, f)

static int set_size(struct bench_opts *o, const char *name, const char *v, char *err, size_t n);
static int set_min(struct bench_opts *o, const char *name, const char *v, char *err, size_t n);
static int set_max(struct bench_opts *o, const char *name, const char *v, char *err, size_t n);
static int set_ops(struct bench_opts *o, const char *name, const char *v, char *err, size_t n);
static int set_batch(struct bench_opts *o, const char *name, const char *v, char *err, size_t n);
static int set_mem(struct bench_opts *o, const char *name, const char *v, char *err, size_t n);
static int set_progress(struct bench_opts *o, const char *name, const char *v, char *err, size_t n);
static int set_gpus(struct bench_opts *o, const char *name, const char *v, char *err, size_t n);
static int set_rdv_name(struct bench_opts *o, const char *name, const char *v, char *err, size_t n);

static const struct opt table[] = {
    {"--size", NULL, C | L, K_CUSTOM, 0, 0, 0, NULL, set_size, "N", "bytes per block (one size: -b N -e N) [64M; --latency 4K]"},
    {"--block-size", NULL, C | L, K_CUSTOM, 0, 0, 0, NULL, set_size, "N", "the same as --size (KV pattern wording)"},
    {"-b", "--min-bytes", C | L, K_CUSTOM, 0, 0, 0, NULL, set_min, "N", "sweep: smallest size"},
    {"-e", "--max-bytes", C | L, K_CUSTOM, 0, 0, 0, NULL, set_max, "N", "sweep: largest size"},
    {"-f", "--stepfactor", C | L, K_INT, OFF(factor), 2, 1024, NULL, NULL, "F", "sweep: next size = size x F [2]"},
    {"--batch", NULL, C | L, K_CUSTOM, 0, 0, 0, NULL, set_batch, "N[,N..]",
     "blocks per transfer, one vectored request (write/read) [1]"},
    {"--op", NULL, C | L, K_CUSTOM, 0, 0, 0, NULL, set_ops, "OP[,OP..]", "write, read, send [write]"},
    {"--iters", "-n", C | L, K_INT, OFF(iters), 1, 100000000, NULL, NULL, "N", "timed iterations per size [20]"},
    {"--warmup", "-w", C | L, K_INT, OFF(warmup), 0, 100000000, NULL, NULL, "N", "untimed iterations first [2]"},
    {"--inflight", NULL, C | L, K_INT, OFF(inflight), 1, BENCH_MAX_INFLIGHT, NULL, NULL, "N",
     "write/read: transfers posted at once [1]"},
    {"--regions", NULL, C | L, K_INT, OFF(regions), 1, BENCH_MAX_INFLIGHT, NULL, NULL, "N",
     "write/read: transfer i uses copy i % N of the layout on both sides (N x the memory; beyond "
     "the last-level cache, no transfer finds its bytes cached) [1]"},
    {"--check", "-c", C | L, K_FLAG, OFF(check), 0, 0, NULL, NULL, NULL, "verify every byte of every iteration"},
    {"--keep-going", NULL, C | L, K_FLAG, OFF(keep_going), 0, 0, NULL, NULL, NULL,
     "write/read: a failed transfer is counted ([FAIL] line) and the run goes on while the peer lives"},
    {"--duration", NULL, C | L, K_INT, OFF(duration), 1, 86400, NULL, NULL, "S",
     "write/read: a run's timed transfers end after S seconds (or --iters, whichever comes first)"},
    {"--latency", NULL, C | L, K_FLAG, OFF(latency), 0, 0, NULL, NULL, NULL,
     "ping-pong: one-way latency = round trip / 2 (read: the read)"},
    {"--json", NULL, C | L, K_STR, OFF(json), 0, 0, NULL, NULL, "PATH", "results as JSON (- = stdout)"},
    {"--progress", NULL, C | L, K_CUSTOM, 0, 0, 0, NULL, set_progress, "on|off|auto", "progress line [auto: a terminal]"},
    {"--mem", NULL, ALL, K_CUSTOM, 0, 0, 0, NULL, set_mem, "host|cuda", "memory of this side's buffer [host]"},
    {"--gpu", NULL, ALL, K_INT, OFF(gpu), 0, 1023, NULL, NULL, "N", "GPU of the buffer and endpoint [0]"},
    {"--gpus", NULL, ALL, K_CUSTOM, 0, 0, 0, NULL, set_gpus, "LIST",
     "one endpoint per listed GPU in this process, pair i with the peer's i (0-7, 0,0,0,0)"},
    {"--server-gpu", NULL, L, K_INT, OFF(server_gpu), 0, 1023, NULL, NULL, "N", "loopback: the server's GPU [--gpu]"},
    {"--port", "-p", S | C, K_ENV, OFF(port), 0, 0, "TPX_PORT_BASE", NULL, "P",
     "server: control port [TPX_PORT_BASE + GPU]; client: the server's [TPX_PORT_BASE]"},
    {"--host", NULL, S, K_STR, OFF(listen_host), 0, 0, NULL, NULL, "ADDR", "server: listen address"},
    {"--forever", NULL, S, K_FLAG, OFF(forever), 0, 0, NULL, NULL, NULL, "server: serve clients in turn until a signal"},
    {"--name", NULL, S, K_CUSTOM, OFF(rdv_name), 0, 0, NULL, set_rdv_name, "NAME",
     "server: publish as NAME through etcd (TPX_ETCD_ENDPOINTS, docs/RENDEZVOUS.md)"},
    {"--peer", NULL, C, K_CUSTOM, OFF(rdv_peer), 0, 0, NULL, set_rdv_name, "NAME",
     "client: look the server up as NAME through etcd (instead of HOST)"},
    {"--channels", NULL, ALL, K_ENV, OFF(channels), 0, 0, "TPX_NUM_CHANNELS", NULL, "N", "channels per peer"},
    {"--chunk", NULL, ALL, K_ENV, OFF(chunk), 0, 0, "TPX_CHUNK_BYTES", NULL, "N", "chunk size"},
    {"--timeout-ms", NULL, ALL, K_ENV, OFF(timeout_ms), 0, 0, "TPX_TIMEOUT_MS", NULL, "MS",
     "deadline of every request and wait"},
};

#define NOPT (sizeof(table) / sizeof(table[0]))

const char *bench_op_name(int op) { return op == TPX_OP_READ ? "read" : op == TPX_OP_SEND ? "send" : "write"; }

void bench_usage(FILE *f) {
  fprintf(f, "usage: tpx-bench server [options]            serve one client (--forever: each in turn)\n"
             "       tpx-bench client HOST [options]       drive the runs\n"
             "       tpx-bench loopback [options]          both in one process\n"
             "options (the client decides; the server follows):\n");
  for (size_t i = 0; i < NOPT; i++) {
    char left[48];
    snprintf(left, sizeof(left), "%s%s%s%s%s", table[i].name, table[i].alias ? ", " : "",
             table[i].alias ? table[i].alias : "", table[i].meta ? " " : "", table[i].meta ? table[i].meta : "");
    unsigned m = table[i].modes;
    char where[40] = "";
    if (m != ALL)
      snprintf(where, sizeof(where), " (%s%s%s)", m & S ? "server" : "", m & S && m & (C | L) ? ", " : "",
               (m & (C | L)) == (C | L) ? "client, loopback" : m & C ? "client" : m & L ? "loopback" : "");
    fprintf(f, "  %-28s %s%s\n", left, table[i].help, where);
  }
  fprintf(f, "sizes take K/M/G suffixes (binary). Runs: every op x batch x size from -b to -e.\n"
             "settings given by name of an environment variable follow its range (docs/CONFIG.md).\n");
}

/* A size as the environment writes it, in [1, BENCH_MAX_SIZE]. */
static int parse_bytes(const char *name, const char *v, size_t *out, char *err, size_t n) {
  long long x;
  int number = tpx__config_parse_number(v, &x) == 0;
  if (!number || x < 1 || (unsigned long long)x > BENCH_MAX_SIZE) {
    snprintf(err, n, "%s %s: %s [1, %llu] (bytes; K, M, G suffixes)", name, v, number ? "out of range" : "not a size in",
             BENCH_MAX_SIZE);
    return -1;
  }
  *out = (size_t)x;
  return 0;
}

static int set_size(struct bench_opts *o, const char *name, const char *v, char *err, size_t n) {
  if (parse_bytes(name, v, &o->size_min, err, n)) return -1;
  o->size_max = o->size_min;
  o->size_set = 1;
  return 0;
}

static int set_min(struct bench_opts *o, const char *name, const char *v, char *err, size_t n) {
  o->size_set = 1;
  return parse_bytes(name, v, &o->size_min, err, n);
}

static int set_max(struct bench_opts *o, const char *name, const char *v, char *err, size_t n) {
  o->size_set = 1;
  return parse_bytes(name, v, &o->size_max, err, n);
}

static int set_ops(struct bench_opts *o, const char *name, const char *v, char *err, size_t n) {
  char buf[64];
  snprintf(buf, sizeof(buf), "%s", v);
  o->nops = 0;
  for (char *save = NULL, *t = strtok_r(buf, ",", &save); t; t = strtok_r(NULL, ",", &save)) {
    int op = !strcmp(t, "write") ? TPX_OP_WRITE : !strcmp(t, "read") ? TPX_OP_READ : !strcmp(t, "send") ? TPX_OP_SEND : -1;
    if (op < 0 || o->nops == BENCH_MAX_OPS) {
      snprintf(err, n, "%s %s: '%s' is not write, read or send (a list such as write,read,send; each once)", name, v, t);
      return -1;
    }
    for (int i = 0; i < o->nops; i++)
      if (o->ops[i] == op) {
        snprintf(err, n, "%s %s: '%s' named twice", name, v, t);
        return -1;
      }
    o->ops[o->nops++] = op;
  }
  if (o->nops == 0 || strlen(v) >= sizeof(buf)) {
    snprintf(err, n, "%s %s: not a list of write, read, send", name, v);
    return -1;
  }
  return 0;
}

static int set_batch(struct bench_opts *o, const char *name, const char *v, char *err, size_t n) {
  const char *p = v;
  o->nbatch = 0;
  while (*p) {
    char *end;
    errno = 0;
    long x = strtol(p, &end, 10);
    if (errno || end == p || x < 1 || x > TPX_XFER_MAX_IOV || (*end && *end != ',') || o->nbatch == BENCH_MAX_BATCHES) {
      snprintf(err, n, "%s %s: not a list of at most %d block counts in [1, %d]", name, v, BENCH_MAX_BATCHES,
               TPX_XFER_MAX_IOV);
      return -1;
    }
    o->batch[o->nbatch++] = (int)x;
    p = *end ? end + 1 : end;
  }
  if (o->nbatch == 0) {
    snprintf(err, n, "%s %s: empty", name, v);
    return -1;
  }
  return 0;
}

static int set_mem(struct bench_opts *o, const char *name, const char *v, char *err, size_t n) {
  if (strcmp(v, "host") && strcmp(v, "cuda")) {
    snprintf(err, n, "%s %s: not host or cuda", name, v);
    return -1;
  }
  o->cuda = v[0] == 'c';
  return 0;
}

static int set_progress(struct bench_opts *o, const char *name, const char *v, char *err, size_t n) {
  o->progress = !strcmp(v, "on") ? 1 : !strcmp(v, "off") ? 0 : !strcmp(v, "auto") ? -1 : -2;
  if (o->progress == -2) {
    snprintf(err, n, "%s %s: not on, off or auto", name, v);
    return -1;
  }
  return 0;
}

/* "0-3,6" or "0,0,0,0": GPU indexes (repeats allowed), at most BENCH_MAX_GPUS. */
static int set_gpus(struct bench_opts *o, const char *name, const char *v, char *err, size_t n) {
  const char *p = v;
  o->ngpus = 0;
  while (*p) {
    char *end;
    errno = 0;
    long lo = strtol(p, &end, 10), hi = lo;
    int bad = errno || end == p || *p == '-' || *p == '+';
    if (!bad && *end == '-') {
      const char *q = end + 1;
      hi = strtol(q, &end, 10);
      bad = errno || end == q || *q == '-' || *q == '+' || hi < lo;
    }
    bad = bad || lo < 0 || hi > 1023 || (*end && *end != ',');
    if (!bad && hi - lo + 1 > BENCH_MAX_GPUS - o->ngpus) {
      snprintf(err, n, "%s %s: more than %d endpoints", name, v, BENCH_MAX_GPUS);
      return -1;
    }
    if (bad) {
      snprintf(err, n, "%s %s: not a list of GPU indexes in [0, 1023] and ranges LO-HI (such as 0-7 or 0,0,0,0)", name, v);
      return -1;
    }
    for (long g = lo; g <= hi; g++) o->gpus[o->ngpus++] = (int)g;
    p = *end ? end + 1 : end;
  }
  if (o->ngpus == 0) {
    snprintf(err, n, "%s %s: names no GPU", name, v);
    return -1;
  }
  o->multi = 1;
  return 0;
}

static int set_one(const struct opt *t, const char *name, struct bench_opts *o, const char *v, char *err, size_t n) {
  char *field = (char *)o + t->off;
  long long x, lo, hi;
  char *end;
  switch (t->kind) {
  case K_FLAG: *(int *)field = 1; return 0;
  case K_STR: *(const char **)field = v; return 0;
  case K_CUSTOM: return t->fn(o, name, v, err, n);
  case K_SIZE: return parse_bytes(name, v, (size_t *)field, err, n);
  case K_INT:
    errno = 0;
    x = strtoll(v, &end, 10);
    if (errno == ERANGE || (end != v && !*end && (x < t->lo || x > t->hi))) {
      snprintf(err, n, "%s %s: out of range [%lld, %lld]", name, v, t->lo, t->hi);
      return -1;
    }
    if (errno || end == v || *end) {
      snprintf(err, n, "%s %s: not an integer (one in [%lld, %lld])", name, v, t->lo, t->hi);
      return -1;
    }
    *(int *)field = (int)x;
    return 0;
  case K_ENV:
    if (tpx__config_parse_var(t->env, v, &x) != 0) {
      if (tpx__config_range(t->env, &lo, &hi) != 0) lo = hi = 0;
      long long y;
      int number = tpx__config_parse_number(v, &y) == 0; /* a number, only outside the range */
      snprintf(err, n, "%s %s: %s [%lld, %lld] (the range of %s, docs/CONFIG.md)", name, v,
               number ? "out of range" : "not a number in", lo, hi, t->env);
      return -1;
    }
    if (t->off == OFF(chunk)) *(size_t *)field = (size_t)x;
    else *(int *)field = (int)x;
    return 0;
  }
  return -1;
}

static void defaults(struct bench_opts *o) {
  memset(o, 0, sizeof(*o));
  o->size_min = o->size_max = 64u << 20;
  o->factor = 2;
  o->nbatch = 1;
  o->batch[0] = 1;
  o->nops = 1;
  o->ops[0] = TPX_OP_WRITE;
  o->iters = 20;
  o->warmup = 2;
  o->inflight = 1;
  o->regions = 1;
  o->progress = -1;
  o->server_gpu = -1;
  o->gpu = -1;
  o->ngpus = 1;
}

/* --name / --peer: a rendezvous name (the rule of tpx/rendezvous.h). */
static int set_rdv_name(struct bench_opts *o, const char *name, const char *v, char *err, size_t n) {
  if (!tpx__config_name_ok(v, TPX_NAME_MAX)) {
    snprintf(err, n, "%s %s: not a name of 1..%d characters from [A-Za-z0-9._-]", name, v, TPX_NAME_MAX - 1);
    return -1;
  }
  if (!strcmp(name, "--name")) o->rdv_name = v;
  else o->rdv_peer = v;
  return 0;
}

/* Combinations no single row can judge. */
static int cross_check(struct bench_opts *o, char *err, size_t n) {
  if (o->mode == BENCH_CLIENT && !o->host == !o->rdv_peer) {
    snprintf(err, n, "client: %s", o->host ? "HOST and --peer both name the server; give one"
                                           : "needs the server's HOST first (tpx-bench client HOST [options]) or --peer NAME");
    return -1;
  }
  if (o->multi && (o->rdv_name || o->rdv_peer)) {
    snprintf(err, n, "--gpus with %s: one name per endpoint pair is not supported yet; run one process per GPU "
             "(--gpu) through etcd", o->rdv_name ? "--name" : "--peer");
    return -1;
  }
  if (o->multi && (o->gpu >= 0 || o->server_gpu >= 0)) {
    snprintf(err, n, "--gpus with %s: --gpus names every endpoint's GPU (both sides of a loopback run)",
             o->gpu >= 0 ? "--gpu" : "--server-gpu");
    return -1;
  }
  if (o->multi) o->gpu = o->gpus[0];
  else o->gpus[0] = o->gpu = o->gpu < 0 ? 0 : o->gpu;
  if (o->latency && !o->size_set) o->size_min = o->size_max = 4096;
  if (o->size_min > o->size_max) {
    snprintf(err, n, "-b %zu is larger than -e %zu", o->size_min, o->size_max);
    return -1;
  }
  int send = 0, vec = 0;
  for (int i = 0; i < o->nops; i++) send |= o->ops[i] == TPX_OP_SEND;
  for (int i = 0; i < o->nbatch; i++) vec |= o->batch[i] > 1;
  if (o->inflight > 1 && (o->latency || send)) {
    snprintf(err, n, "--inflight %d: applies to write/read bandwidth runs (not to %s)", o->inflight,
             o->latency ? "--latency" : "--op send");
    return -1;
  }
  if (o->regions > 1 && (o->latency || send)) {
    snprintf(err, n, "--regions %d: applies to write/read bandwidth runs (not to %s)", o->regions,
             o->latency ? "--latency" : "--op send");
    return -1;
  }
  int nx = bench_layout_handles(o->inflight, o->regions);
  if (nx > BENCH_MAX_INFLIGHT) {
    snprintf(err, n, "--inflight %d with --regions %d: %d transfer handles (a multiple of the "
             "regions that covers those in flight), more than %d", o->inflight, o->regions, nx,
             BENCH_MAX_INFLIGHT);
    return -1;
  }
  if ((o->keep_going || o->duration) && (o->latency || send)) {
    snprintf(err, n, "%s: applies to write/read bandwidth runs (not to %s)", o->keep_going ? "--keep-going" : "--duration",
             o->latency ? "--latency" : "--op send");
    return -1;
  }
  if (o->latency && o->check) {
    snprintf(err, n, "--check with --latency: a ping-pong moves one small buffer both ways; check a bandwidth run");
    return -1;
  }
  if (vec && (send || o->latency)) {
    snprintf(err, n, "--batch %d: vectored transfers are write/read bandwidth runs (not %s)", o->batch[0],
             o->latency ? "--latency" : "--op send, which moves one range");
    return -1;
  }
  if (o->mode == BENCH_SERVER ? 0 : bench_layout_buf_bytes(o) == 0) {
    int bmax = 1;
    for (int i = 0; i < o->nbatch; i++) bmax = o->batch[i] > bmax ? o->batch[i] : bmax;
    snprintf(err, n, "size %zu (--size/-e) x --batch %d%s: more than the %llu bytes one side may allocate",
             o->size_max, bmax, o->regions > 1 ? " x --regions" : "", BENCH_MAX_SPAN);
    return -1;
  }
  return 0;
}

static const struct opt *find(const char *a) {
  for (size_t i = 0; i < NOPT; i++)
    if (!strcmp(a, table[i].name) || (table[i].alias && !strcmp(a, table[i].alias))) return &table[i];
  return NULL;
}

int bench_parse(int argc, char **argv, struct bench_opts *o, char *err, size_t n) {
  defaults(o);
  err[0] = '\0';
  if (argc < 2) {
    snprintf(err, n, "no mode (server, client HOST or loopback)");
    return -1;
  }
  int i = 2;
  if (!strcmp(argv[1], "server")) o->mode = BENCH_SERVER;
  else if (!strcmp(argv[1], "loopback")) o->mode = BENCH_LOOPBACK;
  else if (!strcmp(argv[1], "client")) {
    o->mode = BENCH_CLIENT;
    if (argc >= 3 && argv[2][0] != '-') o->host = argv[2], i = 3; /* else --peer NAME, checked below */
  } else {
    snprintf(err, n, "%s: not a mode (server, client HOST or loopback)", argv[1]);
    return -1;
  }
  for (; i < argc; i++) {
    const struct opt *t = find(argv[i]);
    if (!t) {
      snprintf(err, n, "%s: unknown option (tpx-bench --help lists them)", argv[i]);
      return -1;
    }
    if (!(t->modes & (1u << o->mode))) {
      static const char *mode_names[] = {"server", "client", "loopback"};
      snprintf(err, n, "%s: not a %s option (%s)", argv[i], mode_names[o->mode],
               o->mode == BENCH_SERVER ? "the client chooses the runs; the server follows" : "see --help");
      return -1;
    }
    const char *v = NULL;
    if (t->kind != K_FLAG) {
      if (i + 1 >= argc) {
        snprintf(err, n, "%s: needs a value (%s)", argv[i], t->meta);
        return -1;
      }
      v = argv[++i];
    }
    if (set_one(t, argv[i - (v != NULL)], o, v, err, n)) return -1;
  }
  return cross_check(o, err, n);
}
