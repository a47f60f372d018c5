/* tpx-bench internals: what the files under tools/bench/ share.
 *
 *   args.c    the command line: one table of options (add a row to add one)
 *   buf.c     benchmark buffers (host or GPU), the byte pattern, --check
 *   layout.c  where the blocks of one transfer lie (contiguous or KV pattern)
 *   proto.c   the client/server messages (over engine notifications) and
 *             every bounded wait
 *   server.c  the server side of a session
 *   client.c  the client side: the sweep, one run per (op, batch, size)
 *   stats.c   per-run statistics (percentiles, GB/s)
 *   report.c  the table, the [PERF]/[CHECK]/[CPU] lines, the progress line
 *   json.c    --json output (schema: docs/API.md)
 *   ifcheck.c TPX_SOCKET_IFNAME against the interfaces there are
 *   tpx-bench.c (tools/) main: modes, signals, loopback */
#ifndef TPX_TOOLS_BENCH_H
#define TPX_TOOLS_BENCH_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#include "tpx/net.h"
#include "tpx/tpx.h"

#define BENCH_MAX_OPS 3
#define BENCH_MAX_BATCHES 16
#define BENCH_MAX_INFLIGHT 16
#define BENCH_MAX_SIZE (1ULL << 40)  /* bytes of one block / transfer */
#define BENCH_MAX_SPAN (64ULL << 30) /* bytes one side may allocate */
#define BENCH_GAP 4096               /* bytes between the blocks of a KV transfer */
#define BENCH_MAX_GPUS 64            /* --gpus: endpoint pairs one process drives */

enum bench_mode { BENCH_SERVER, BENCH_CLIENT, BENCH_LOOPBACK };

struct bench_opts {
  enum bench_mode mode;
  const char *host;        /* client: the server */
  const char *listen_host; /* server: --host */
  int port;                /* 0: base + GPU */
  size_t size_min, size_max; /* -b / -e (--size, --block-size: both) */
  int factor;              /* -f */
  int nbatch;
  int batch[BENCH_MAX_BATCHES]; /* --batch: blocks per transfer */
  int nops;
  int ops[BENCH_MAX_OPS]; /* --op: TPX_OP_WRITE / READ / SEND */
  int iters, warmup, inflight;
  int regions;       /* --regions: copies of the layout the transfers rotate over */
  int channels;      /* 0: configuration */
  size_t chunk;      /* 0: configuration */
  int timeout_ms;    /* 0: configuration (TPX_TIMEOUT_MS) */
  int latency, check, forever;
  int keep_going; /* --keep-going: a failed transfer is counted and the run goes on (while the peer lives) */
  int duration;   /* --duration S: the timed transfers of a run end after S seconds (0: --iters alone) */
  int progress; /* -1 auto (a terminal), 0, 1 */
  int cuda, gpu, server_gpu; /* gpu: -1 until set (then gpus[0]) */
  const char *json; /* path, "-" = stdout */
  const char *rdv_name; /* server --name: publish through etcd as this */
  const char *rdv_peer; /* client --peer: the server's name (instead of host) */
  int ngpus;        /* endpoint pairs this process drives (1; --gpus: the list's length) */
  int gpus[BENCH_MAX_GPUS]; /* GPU of pair i (--gpus; else gpus[0] = --gpu) */
  int multi;        /* --gpus given: every pair on port P + i, HELLO says how many */
  int size_set;
  tpx_net_t *net;   /* loopback, --gpus: one transport for every endpoint */
  const int *ports; /* loopback: the server endpoints' ports, pair by pair */
};

/* ---- args.c ---- */
/* 0, or -1 with a message naming the argument in err (exit status 2). */
int bench_parse(int argc, char **argv, struct bench_opts *o, char *err, size_t errlen);
void bench_usage(FILE *f);
const char *bench_op_name(int op);

/* ---- layout.c ---- */
struct bench_layout {
  size_t block;  /* bytes per block */
  int batch;     /* blocks per transfer */
  size_t stride; /* block + gap */
  size_t base;   /* where this copy of the layout starts on both sides (--regions; 0) */
};
void bench_layout_init(struct bench_layout *l, size_t block, int batch);
/* The same layout as copy k of a run's --regions, `region` bytes apart. */
struct bench_layout bench_layout_at(const struct bench_layout *l, int k, uint64_t region);
size_t bench_layout_span(const struct bench_layout *l);
size_t bench_layout_bytes(const struct bench_layout *l);
/* Block i lies at local_off(i) on the client and remote_off(i) on the server
 * (base included): in reverse order there, so neither side's blocks are one
 * range. */
size_t bench_layout_client_off(const struct bench_layout *l, int i);
size_t bench_layout_server_off(const struct bench_layout *l, int i);
/* The most bytes one transfer of the sweep spans on one side (one region);
 * 0 on overflow. */
size_t bench_layout_max_span(const struct bench_opts *o);
/* The buffer of one side: --regions copies of that span; 0 on overflow. */
size_t bench_layout_buf_bytes(const struct bench_opts *o);
/* Transfer handles a run prepares: the smallest multiple of `regions` that
 * covers `inflight` (handle k on copy k % regions; none reposted while in flight). */
static inline int bench_layout_handles(int inflight, int regions) {
  return (inflight + regions - 1) / regions * regions;
}

/* ---- buf.c ---- */
struct bench_buf {
  void *p;
  size_t len;
  int cuda, gpu;
  uint8_t *shadow; /* cuda: host copy for fills and checks */
};
int bench_buf_alloc(struct bench_buf *b, size_t len, int cuda, int gpu);
void bench_buf_free(struct bench_buf *b);
/* The source blocks of a layout get pattern `seed`, at each block's own
 * offset in this buffer (server side when `server`). */
int bench_buf_fill(struct bench_buf *b, const struct bench_layout *l, int server, unsigned seed);
/* The destination span gets the poison byte (before each checked iteration). */
int bench_buf_poison(struct bench_buf *b, const struct bench_layout *l);
/* Every byte of the destination span: the blocks hold the source's pattern
 * (block i of the other side), the gaps still the poison. 0, or -1 with the
 * first bad offset in *bad. */
int bench_buf_check(struct bench_buf *b, const struct bench_layout *l, int server, unsigned seed, size_t *bad);
int bench_phys_ok(size_t bytes); /* fits in physical memory */

/* ---- stats.c ---- */
struct bench_result {
  int op, batch;
  size_t block, bytes; /* block size, bytes per transfer */
  size_t chunk;        /* the chunk size its transfers were cut into (tpx_config_chunk) */
  int iters, ok, errors; /* iters: timed transfers attempted (--duration: may end before --iters) */
  double avg_us, min_us, p50_us, p99_us, p999_us, max_us;
  double gbps_gpu, gbps_total; /* 0 when no iteration succeeded */
  double cpu_user_s, cpu_sys_s; /* client process, timed iterations */
  double wall_ms;               /* the timed transfers from first post to last end, failed ones included */
  int checked;                  /* iterations whose every byte was verified */
  int latency;                  /* times are one-way latencies */
  char error[720];              /* the first error, "" if none */
  int npairs;                   /* --gpus: per-pair figures follow */
  struct bench_pair_result {
    int gpu, ok, errors;
    double gbps, p50_us;
  } pair[BENCH_MAX_GPUS];
};
/* Fill the statistics from `n` successful iteration times (ms; sorted in place). */
void bench_stats(struct bench_result *r, double *t_ms, int n, int ngpus, double per_iter_div);

/* ---- report.c ---- */
void bench_table_header(const struct bench_opts *o, int op, const char *transport, int channels, size_t chunk);
/* "auto" for a chunk size of 0 (tpx_config_chunk decides per transfer), else the number. */
const char *bench_chunk_str(size_t chunk, char *buf, size_t n);
void bench_table_row(const struct bench_result *r);
void bench_perf_lines(const struct bench_result *r, int ngpus);
/* The one line after every table: runs, transfers ok / failed, what was checked. */
void bench_summary_line(const struct bench_result *r, int n, int check);
/* GB/s with 3 significant digits (at least 2 decimals): 4 KiB rows never read 0.00. */
const char *bench_gbps_str(double gbps, char *buf, size_t n);
/* "write 67108864 x 1": which run a line belongs to. */
const char *bench_run_label(int op, size_t block, int batch, char *buf, size_t n);
void bench_progress(const struct bench_opts *o, const struct bench_result *r, int done, int total, int final);
/* "[CPU] who: ... (label)": label names the run the line belongs to. */
void bench_cpu_line(const char *who, const char *label, double u0, double s0, double wall_ms, double bytes);
void bench_cpu_now(double *user, double *sys);
double bench_now_ms(void);

/* ---- json.c ---- */
struct bench_json_ctx {
  const struct bench_opts *o;
  int argc;
  char **argv;
  const char *transport;
  int channels;
  size_t chunk; /* configured: 0 = automatic */
  const char *error; /* run-wide error, or NULL */
};
extern FILE *bench_json_stdout;
int bench_json_write(const struct bench_json_ctx *c, const struct bench_result *r, int n);

/* ---- proto.c ---- */
/* Atomics, not volatile sig_atomic_t: pair threads read and write them too
 * (lock-free, so a signal handler may still store). */
extern _Atomic int bench_stop; /* a signal asked us to end */
/* --gpus: one pair failed, the others end too (their waits return
 * TPX_ECANCELED); never set by a single pair. */
extern _Atomic int bench_abort;
void bench_abort_all(void);

/* --gpus: the pairs of a run start their timed iterations together. Every
 * pair calls it once per run; 0 once all have, TPX_ECANCELED if a pair
 * failed (bench_abort) or a signal came, TPX_ETIMEDOUT after timeout_ms. */
struct bench_gate;
struct bench_gate *bench_gate_new(int n);
void bench_gate_free(struct bench_gate *g);
int bench_gate_wait(struct bench_gate *g, int timeout_ms);

enum bench_msg { M_HELLO = 1, M_MD, M_RUN, M_READY, M_CHK, M_CHK_REPLY, M_PING, M_END, M_BYE, M_ERR };
struct bench_run_msg {
  int op, batch, iters, warmup, inflight, check, latency;
  uint64_t block, stride;
  int regions;     /* copies of the layout the transfers take in turn (--regions) */
  uint64_t region; /* bytes from one copy to the next (>= the span) */
};
#define BENCH_MSG_MAX TPX_NOTIF_MAX
/* The pattern seed of a run: both sides derive it from the run itself. */
static inline unsigned bench_seed(const struct bench_run_msg *r) {
  return (unsigned)(r->block * 31u + (uint64_t)r->batch * 7u + (unsigned)r->op + 1u);
}

/* Encode: type, then fields; the descriptor / text rides at the end. */
/* HELLO: the span, then how many pairs the client drives and which this is. */
struct bench_hello {
  uint64_t span;
  int cuda, npairs, pair;
};
size_t bench_msg_hello(uint8_t *buf, const struct bench_hello *h, const uint8_t *md, size_t mdl);
size_t bench_msg_run(uint8_t *buf, const struct bench_run_msg *r);
size_t bench_msg_simple(uint8_t *buf, enum bench_msg t, uint64_t a, const char *text);
/* Decode what the peer sent; every field checked. -1 for anything malformed. */
int bench_msg_type(const tpx_notif_t *n);
int bench_msg_get_run(const tpx_notif_t *n, struct bench_run_msg *r);
int bench_msg_get_hello(const tpx_notif_t *n, struct bench_hello *h, const uint8_t **md, size_t *mdl);
int bench_msg_get_simple(const tpx_notif_t *n, uint64_t *a, char *text, size_t cap);

/* Bounded waits: each ends when the transfer / a notification from `peer`
 * arrives, the peer fails (its error), a signal asks us to stop (TPX_ECANCELED)
 * or `timeout_ms` passes (TPX_ETIMEDOUT); the detail goes to tpx_last_error()
 * (the library's failures) or `why` (our own timeout or stop). */
int bench_wait_xfer(tpx_xfer_t *x, tpx_peer_t *peer, int timeout_ms, char *why, size_t whylen);
int bench_wait_msg(tpx_endpoint_t *ep, tpx_peer_t *peer, int timeout_ms, tpx_notif_t *n, const char *what,
                   char *why, size_t whylen);
int bench_send(tpx_peer_t *peer, const uint8_t *buf, size_t len);

/* ---- ifcheck.c ---- */
/* The built-in transport's TPX_SOCKET_IFNAME selects an interface that is up
 * with an address: 0, or -1 with a message naming the variable and the
 * interfaces there are (exit status 2). */
int bench_ifname_check(const tpx_config_t *cfg, char *err, size_t n);

/* ---- server.c / client.c ---- */
struct bench_server_ready { /* loopback: how the client learns the ports */
  void (*cb)(void *arg, const int *ports); /* pair by pair; NULL: the server failed */
  void *arg;
};
int bench_server(const struct bench_opts *o, const struct bench_server_ready *ready);
int bench_client(const struct bench_opts *o, const char *host, int port, int argc, char **argv);
void bench_make_cfg(const struct bench_opts *o, tpx_config_t *cfg);

#endif
