/* The client side: connect, announce the buffer size of the whole sweep, then
 * one run per (op, batch, size), each a RUN / READY / iterations / END
 * exchange with the server. Per iteration: post, wait (bounded), and with
 * --check verify every byte of the destination (the server does it for write
 * and send and answers). A failed transfer ends the sweep (the peer is gone
 * or broken), unless --keep-going: then it is counted, printed ([FAIL]) and
 * the run goes on while the peer lives; a failed check is an error of that
 * iteration; neither is ever averaged in. --duration ends a run's timed
 * transfers after that many seconds. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "version.h"

struct client {
  const struct bench_opts *o;
  int idx, gpu;             /* pair idx (0 unless --gpus) on this GPU */
  struct bench_gate *gate;  /* --gpus: the pairs start each run together */
  tpx_config_t cfg;
  tpx_endpoint_t *ep;
  tpx_peer_t *peer;
  struct bench_buf buf;
  tpx_mem_t *mem;
  tpx_rmem_t *srv;
  size_t region; /* bytes from one copy of the layout to the next (--regions) */
  double *t;
  int timeout_ms;
  char why[640]; /* a tool_error() text and what was being done */
};

static int wait_msg(struct client *c, int timeout_ms, tpx_notif_t *n, const char *what, int want) {
  int rc = bench_wait_msg(c->ep, c->peer, timeout_ms, n, what, c->why, sizeof(c->why));
  if (rc) return rc;
  int t = bench_msg_type(n);
  if (t == want) return 0;
  char text[200] = "";
  uint64_t a;
  if (t == M_ERR && bench_msg_get_simple(n, &a, text, sizeof(text)) == 0)
    snprintf(c->why, sizeof(c->why), "the server failed: %s", text);
  else snprintf(c->why, sizeof(c->why), "expected %s, got message %d", what, t);
  return TPX_EPROTO;
}

static int setup(struct client *c, const char *host, int port) {
  size_t span = bench_layout_buf_bytes(c->o);
  c->region = bench_layout_max_span(c->o);
  /* loopback: the server's buffer (and a GPU buffer's host shadow) too; the
   * pairs not yet set up as well (span <= BENCH_MAX_SPAN: no overflow) */
  size_t need = span * (c->o->mode == BENCH_LOOPBACK ? 2 : 1) * (size_t)(c->o->ngpus - c->idx);
  int rc = !bench_phys_ok(need) ? TPX_ENOMEM : 0;
  if (rc == 0) rc = bench_buf_alloc(&c->buf, span, c->o->cuda, c->gpu);
  if (rc) {
    snprintf(c->why, sizeof(c->why), "cannot allocate %zu bytes of %s memory (%s)", span, c->o->cuda ? "GPU" : "host",
             rc == TPX_ENOMEM ? "more than this machine has" : tpx_last_error());
    return rc;
  }
  if (!(c->t = calloc((size_t)c->o->iters, sizeof(double)))) return TPX_ENOMEM;
  if (c->o->rdv_peer) { /* through etcd: the lookup waits for the server to publish */
    tpx_rdv_t *rdv = NULL;
    if ((rc = tpx_rdv_open(&c->cfg, &rdv)) == 0) rc = tpx_rdv_connect(rdv, c->ep, c->o->rdv_peer, -1, &c->peer);
    if (rc)
      snprintf(c->why, sizeof(c->why), "--peer %s: %s", c->o->rdv_peer, tool_error(rc));
    tpx_rdv_close(rdv);
    if (rc) return rc;
  } else if ((rc = tpx_connect(c->ep, host, port, &c->peer))) {
    snprintf(c->why, sizeof(c->why), "connect to %s:%d: %s", host, port, tool_error(rc));
    return rc;
  }
  tpx_mem_desc_t d = {c->buf.p, span, c->buf.cuda ? TPX_MEM_CUDA : TPX_MEM_HOST, c->gpu, TPX_ACCESS_WRITE};
  struct bench_hello h = {span, c->o->cuda, c->o->ngpus, c->idx};
  uint8_t blob[TPX_MD_MAX], m[BENCH_MSG_MAX];
  size_t bl = 0;
  if ((rc = tpx_mem_register(c->ep, &d, &c->mem)) || (rc = tpx_mem_get_public_data(c->mem, blob, sizeof(blob), &bl)) ||
      (rc = bench_send(c->peer, m, bench_msg_hello(m, &h, blob, bl)))) {
    snprintf(c->why, sizeof(c->why), "register / announce: %s", tool_error(rc));
    return rc;
  }
  tpx_notif_t n;
  /* the server allocates and touches as much as we do: allow for it */
  if ((rc = wait_msg(c, c->timeout_ms + (int)(span >> 17), &n, "the server's descriptor", M_MD))) return rc;
  uint64_t mdl = 0;
  if (bench_msg_get_simple(&n, &mdl, NULL, 0) || mdl > TPX_MD_MAX || n.len != 13 + mdl ||
      (rc = tpx_load_remote_md(n.msg + 13, mdl, &c->srv))) {
    snprintf(c->why, sizeof(c->why), "malformed descriptor from the server");
    return TPX_EPROTO;
  }
  return 0;
}

/* The transfers of one run: `n` handles, handle k on copy k % --regions of
 * the layout (all on the same ranges without --regions). */
static int prep(struct client *c, const struct bench_layout *l, const struct bench_run_msg *r, tpx_xfer_t **x,
                tpx_xfer_t **back, int n) {
  uint8_t ping[32];
  size_t pl = bench_msg_simple(ping, M_PING, 0, NULL);
  int rc = 0;
  if (r->op == TPX_OP_SEND) {
    rc = tpx_xfer_prep_send(c->peer, c->mem, 0, l->block, 1, &x[0]);
    if (rc == 0 && r->latency) rc = tpx_xfer_prep_recv(c->peer, c->mem, 0, l->block, 2, back);
    return rc;
  }
  tpx_iov_t *v = calloc((size_t)l->batch, sizeof(*v));
  if (!v) return TPX_ENOMEM;
  for (int k = 0; k < n && rc == 0; k++) {
    struct bench_layout lk = bench_layout_at(l, k % r->regions, r->region);
    for (int i = 0; i < l->batch; i++) {
      tpx_iov_t e = {c->mem, bench_layout_client_off(&lk, i), c->srv, bench_layout_server_off(&lk, i), l->block};
      v[i] = e;
    }
    rc = r->op == TPX_OP_WRITE ? tpx_xfer_prep_write(c->peer, v, (size_t)l->batch, r->latency ? ping : NULL,
                                                     r->latency ? pl : 0, &x[k])
                               : tpx_xfer_prep_read(c->peer, v, (size_t)l->batch, NULL, 0, &x[k]);
  }
  free(v);
  return rc;
}

/* --check of copy k of the layout (--regions) after an iteration (or a
 * pipelined run): 0 intact, 1 mismatch, < 0 failure. */
static int check(struct client *c, const struct bench_layout *l0, const struct bench_run_msg *r, int k,
                 struct bench_result *res) {
  size_t bad = 0;
  struct bench_layout lk = bench_layout_at(l0, k, r->region), *l = &lk;
  if (r->op == TPX_OP_READ) {
    int mism = bench_buf_check(&c->buf, l, 0, bench_seed(r), &bad) != 0;
    if (mism) snprintf(res->error, sizeof(res->error), "read: destination byte %zu differs", bad);
    int rc = bench_buf_poison(&c->buf, l);
    return rc ? rc : mism;
  }
  uint8_t m[32];
  tpx_notif_t n;
  int rc;
  if (r->op == TPX_OP_WRITE && (rc = bench_send(c->peer, m, bench_msg_simple(m, M_CHK, (uint64_t)k, NULL))))
    return rc;
  if ((rc = wait_msg(c, c->timeout_ms + (int)(bench_layout_span(l) >> 17), &n, "the server's check", M_CHK_REPLY)))
    return rc;
  uint64_t a = 0;
  bench_msg_get_simple(&n, &a, NULL, 0);
  if (a && !res->error[0]) snprintf(res->error, sizeof(res->error), "server: destination byte %llu differs", (unsigned long long)a - 1);
  return a != 0;
}

/* One transfer (or ping-pong) from post to completion, in ms. */
static int once(struct client *c, const struct bench_run_msg *r, tpx_xfer_t *x, tpx_xfer_t *back, double *ms) {
  int rc, to = c->timeout_ms + (int)(r->block * (uint64_t)r->batch >> 17);
  double t0 = bench_now_ms();
  if (back && (rc = tpx_xfer_post(back))) return rc;
  if ((rc = tpx_xfer_post(x)) || (rc = bench_wait_xfer(x, c->peer, to, c->why, sizeof(c->why)))) return rc;
  if (back && (rc = bench_wait_xfer(back, c->peer, to, c->why, sizeof(c->why)))) return rc;
  if (r->latency && r->op == TPX_OP_WRITE) {
    tpx_notif_t n;
    if ((rc = wait_msg(c, to, &n, "the pong", M_PING))) return rc;
  }
  *ms = bench_now_ms() - t0;
  return 0;
}

static void progress(const struct client *c, const struct bench_result *res, int done, int total) {
  if (c->idx == 0) bench_progress(c->o, res, done, total, 0); /* one line for every pair */
}

static void fatal(struct client *c, struct bench_result *res, int rc, int iter) {
  if (!c->why[0]) snprintf(c->why, sizeof(c->why), "%s", tool_error(rc));
  if (!res->error[0]) snprintf(res->error, sizeof(res->error), "iteration %d: %s", iter, c->why);
}

/* --keep-going: one failed transfer, printed; 1 when the run may go on (the
 * peer lives and the handle is done with, so it can be posted again). */
static int failed_one(struct client *c, const struct bench_run_msg *r, tpx_xfer_t *x, int rc, int iter, double ms,
                      struct bench_result *res) {
  char lb[64];
  int more = c->o->keep_going && rc != TPX_ECANCELED && !bench_stop && !bench_abort &&
             tpx_xfer_test(x) != TPX_EINPROGRESS && tpx_peer_status(c->peer) == 0;
  if (!c->o->keep_going) return 0; /* the run ends; [ERROR] says why, once */
  const char *why = c->why[0] ? c->why : tool_error(rc);
  printf("[FAIL] %s: transfer %d failed after %.1f ms: %s%s\n",
         bench_run_label(r->op, r->block, r->batch, lb, sizeof lb), iter, ms, why,
         more ? "; going on (--keep-going)" : "; the run ends");
  fflush(stdout);
  if (more && !res->error[0]) snprintf(res->error, sizeof(res->error), "transfer %d: %s", iter, why);
  if (more) c->why[0] = '\0'; /* this transfer's, not the next one's */
  return more;
}

/* --duration: the run's timed transfers end at this time (ms), or never (0). */
static double run_end(const struct client *c) { return c->o->duration > 0 ? bench_now_ms() + c->o->duration * 1e3 : 0; }

/* One at a time, transfer i on handle i % nx; returns < 0 when the run (and
 * the sweep) must end. */
static int serial(struct client *c, const struct bench_layout *l, const struct bench_run_msg *r, tpx_xfer_t **xs,
                  int nx, tpx_xfer_t *back, struct bench_result *res, int *n_ok) {
  int total = r->iters + r->warmup;
  double end = 0;
  res->iters = 0;
  double start = 0;
  for (int i = 0; i < total && !bench_stop && !bench_abort; i++) {
    if (i == r->warmup) end = run_end(c), start = bench_now_ms();
    if (end > 0 && bench_now_ms() > end) break;
    double ms = 0, u0, s0, u1, s1, t0 = bench_now_ms();
    bench_cpu_now(&u0, &s0);
    int rc = once(c, r, xs[i % nx], back, &ms);
    bench_cpu_now(&u1, &s1);
    if (i >= r->warmup) res->cpu_user_s += u1 - u0, res->cpu_sys_s += s1 - s0, res->iters++; /* the checks not counted */
    if (rc) {
      res->errors += i >= r->warmup;
      if (failed_one(c, r, xs[i % nx], rc, i - r->warmup, bench_now_ms() - t0, res)) continue;
      fatal(c, res, rc, i - r->warmup);
      res->wall_ms = start > 0 ? bench_now_ms() - start : 0;
      return rc;
    }
    int bad = r->check ? check(c, l, r, i % r->regions, res) : 0;
    if (bad < 0) {
      fatal(c, res, bad, i - r->warmup);
      return bad;
    }
    if (i >= r->warmup) {
      if (bad) res->errors++;
      else c->t[(*n_ok)++] = ms;
      res->checked += r->check && !bad;
      progress(c, res, i - r->warmup + 1, r->iters);
    }
  }
  res->wall_ms = start > 0 ? bench_now_ms() - start : 0;
  return 0;
}

/* --inflight N: warm-up one at a time, then N posted; each completion (in
 * posting order) records the time since the previous one and posts the next.
 * Transfer i is on handle i % nx (nx >= N: none is posted twice at once). */
static int pipelined(struct client *c, const struct bench_layout *l, const struct bench_run_msg *r, tpx_xfer_t **xs,
                     int nx, struct bench_result *res, int *n_ok) {
  int rc = 0, n = r->inflight, to = c->timeout_ms + (int)(bench_layout_bytes(l) * (uint64_t)n >> 17);
  for (int i = 0; i < r->warmup && rc == 0; i++)
    if ((rc = tpx_xfer_post(xs[0])) == 0) rc = bench_wait_xfer(xs[0], c->peer, to, c->why, sizeof(c->why));
  double u0, s0;
  bench_cpu_now(&u0, &s0);
  double last = bench_now_ms(), end = run_end(c), start = last;
  int posted = 0, failed = 0;
  double *t_post = calloc((size_t)nx, sizeof(double)); /* when the transfer on each handle was posted */
  if (!t_post) rc = TPX_ENOMEM;
  for (; rc == 0 && posted < n && posted < r->iters; posted++)
    if ((rc = tpx_xfer_post(xs[posted])) == 0) t_post[posted] = bench_now_ms();
  for (int i = 0; i < posted; i++) {
    int w = bench_wait_xfer(xs[i % nx], c->peer, to, c->why, sizeof(c->why));
    double now = bench_now_ms();
    if (w) {
      failed++;
      if (!failed_one(c, r, xs[i % nx], w, i, now - t_post[i % nx], res)) {
        rc = rc ? rc : w;
        continue; /* the others still complete or fail before their handles go */
      }
    } else {
      c->t[(*n_ok)++] = now - last;
      progress(c, res, i + 1, r->iters);
    }
    last = now;
    if (rc == 0 && posted < r->iters && !(end > 0 && now > end) && !bench_stop && !bench_abort &&
        (rc = tpx_xfer_post(xs[posted % nx])) == 0)
      t_post[posted % nx] = bench_now_ms(), posted++;
  }
  free(t_post);
  res->wall_ms = bench_now_ms() - start;
  bench_cpu_now(&res->cpu_user_s, &res->cpu_sys_s);
  res->cpu_user_s -= u0, res->cpu_sys_s -= s0;
  res->errors += failed;
  res->iters = posted;
  if (rc) {
    fatal(c, res, rc, *n_ok);
    return rc;
  }
  int bad = 0; /* every copy of the layout a timed transfer wrote (transfer i: copy i % regions) */
  for (int k = 0; r->check && k < r->regions && k < posted && bad == 0; k++) bad = check(c, l, r, k, res);
  if (bad < 0) fatal(c, res, bad, posted);
  if (bad > 0) { /* cannot tell which transfer: none of them counts */
    res->errors += *n_ok;
    *n_ok = 0;
  }
  res->checked = r->check && bad == 0 ? *n_ok : 0;
  return bad < 0 ? bad : 0;
}

static int run(struct client *c, int op, int batch, size_t size, struct bench_result *res) {
  const struct bench_opts *o = c->o;
  struct bench_layout l;
  bench_layout_init(&l, size, batch);
  int one = op == TPX_OP_SEND || o->latency; /* args.c: no --inflight or --regions for these */
  struct bench_run_msg r = {op,   batch,    o->iters, o->warmup, one ? 1 : o->inflight, o->check, o->latency,
                            size, l.stride, one ? 1 : o->regions, c->region};
  memset(res, 0, sizeof(*res));
  res->op = op, res->batch = batch, res->block = size, res->bytes = bench_layout_bytes(&l);
  res->chunk = tpx_config_chunk(&c->cfg, res->bytes, tpx_peer_num_channels(c->peer));
  res->iters = o->iters, res->latency = o->latency;
  c->why[0] = '\0';
  uint8_t m[128];
  tpx_notif_t n;
  int rc = 0, n_ok = 0;
  for (int k = 0; k < r.regions && o->check && rc == 0; k++) {
    struct bench_layout lk = bench_layout_at(&l, k, r.region);
    rc = op != TPX_OP_READ ? bench_buf_fill(&c->buf, &lk, 0, bench_seed(&r)) : bench_buf_poison(&c->buf, &lk);
  }
  if (rc == 0) rc = bench_send(c->peer, m, bench_msg_run(m, &r));
  if (rc == 0) rc = wait_msg(c, c->timeout_ms + (int)(bench_layout_span(&l) >> 17), &n, "the server's ready", M_READY);
  tpx_xfer_t *xs[BENCH_MAX_INFLIGHT] = {NULL}, *back = NULL;
  int nx = bench_layout_handles(r.inflight, r.regions); /* args.c: <= BENCH_MAX_INFLIGHT */
  if (rc == 0 && (rc = prep(c, &l, &r, xs, &back, nx)) != 0)
    snprintf(c->why, sizeof(c->why), "prepare: %s", tool_error(rc));
  if (rc == 0 && c->gate && (rc = bench_gate_wait(c->gate, c->timeout_ms)) != 0)
    snprintf(c->why, sizeof(c->why), "%s", rc == TPX_ETIMEDOUT ? "the other pairs did not get ready in time"
                                                                 : "stopped (another pair failed, or a signal)");
  if (rc == 0)
    rc = r.inflight > 1 ? pipelined(c, &l, &r, xs, nx, res, &n_ok) : serial(c, &l, &r, xs, nx, back, res, &n_ok);
  for (int k = 0; k < BENCH_MAX_INFLIGHT; k++) tpx_xfer_free(xs[k]);
  tpx_xfer_free(back);
  if (c->idx == 0) bench_progress(o, res, 0, 0, 1);
  if (rc == 0 && (bench_stop || bench_abort))
    rc = TPX_ECANCELED, snprintf(c->why, sizeof(c->why), "stopped by %s", bench_stop ? "a signal" : "another pair's failure");
  /* END says how many transfers completed (warm-up included): the server's CPU per GB */
  if (rc == 0 && (rc = bench_send(c->peer, m, bench_msg_simple(m, M_END, (uint64_t)(n_ok + r.warmup), NULL))) == 0)
    rc = wait_msg(c, c->timeout_ms, &n, "the server's end of the run", M_END);
  if (rc && !res->error[0]) fatal(c, res, rc, n_ok + res->errors);
  bench_stats(res, c->t, n_ok, 1, o->latency && op != TPX_OP_READ ? 2.0 : 1.0);
  return rc;
}

static size_t next_size(size_t s, int f) { return s > BENCH_MAX_SIZE / (size_t)f ? BENCH_MAX_SIZE + 1 : s * (size_t)f; }

static int count_runs(const struct bench_opts *o) {
  int k = 0;
  for (size_t s = o->size_min; s <= o->size_max; s = next_size(s, o->factor)) k++;
  return k * o->nops * o->nbatch;
}

/* After one op's table: the [PERF] and [CPU] lines scripts read, per run;
 * one [CHECK] line for the table (a run not fully checked gets its own). */
static void summary(const struct client *c, const struct bench_result *r, int n) {
  char lb[64];
  int all = 1, total = 0;
  for (int i = 0; i < n; i++) {
    bench_perf_lines(&r[i], c->o->ngpus);
    bench_run_label(r[i].op, r[i].block, r[i].batch, lb, sizeof lb);
    if (c->o->check && r[i].ok && r[i].checked != r[i].ok) {
      all = 0;
      printf("[CHECK] client: %s: %d of %d completed transfer(s) checked intact\n", lb, r[i].checked, r[i].ok);
    }
    total += r[i].checked;
    if (!r[i].latency && r[i].ok) {
      double gb = (double)r[i].bytes * r[i].ok / 1e9, wall = r[i].avg_us * r[i].ok / c->o->ngpus / 1e3;
      printf("[CPU] client: %.3f s user + %.3f s system per GB, %.2f cores busy on average (%s)\n", r[i].cpu_user_s / gb,
             r[i].cpu_sys_s / gb, (r[i].cpu_user_s + r[i].cpu_sys_s) / (wall * 1e-3), lb);
    }
  }
  if (c->o->check && all && total) {
    const char *who = r[0].op == TPX_OP_READ ? "here, after each read" : "by the server, after each transfer";
    if (n == 1)
      printf("[CHECK] client: ok, %s: every byte of %d transfer(s) x %zu bytes checked (%s, %s memory%s)\n", lb, total,
             r[0].bytes, who, c->buf.cuda ? "GPU" : "host", c->o->multi ? ", every pair" : "");
    else
      printf("[CHECK] client: ok, every byte of the %d transfer(s) of the %d runs above checked (%s, %s memory%s)\n",
             total, n, who, c->buf.cuda ? "GPU" : "host", c->o->multi ? ", every pair" : "");
  }
  fflush(stdout);
}

/* ---- --gpus: every pair runs the same run at once, one thread each ---- */
struct job {
  struct client *c;
  int op, batch, rc;
  size_t size;
  struct bench_result r;
};

static void *job_main(void *arg) {
  struct job *j = arg;
  j->rc = run(j->c, j->op, j->batch, j->size, &j->r);
  if (j->rc) bench_abort_all(); /* the other pairs stop waiting for this one */
  return NULL;
}

/* The pairs' results as one: iterations counted over every pair, latencies
 * from every pair's times, GB/s total = the sum of the pairs' rates (they
 * ran at the same time: each run starts at a gate), per GPU = total / pairs.
 * The error shown is the first pair's own, not a pair stopped because of it. */
static void merge(struct client *cs, struct job *jobs, int n, struct bench_result *out, double *all) {
  *out = jobs[0].r;
  out->iters = out->ok = out->errors = out->checked = 0;
  out->error[0] = '\0';
  out->npairs = n;
  int k = 0, first = -1;
  double total = 0;
  for (int i = 0; i < n; i++) {
    const struct bench_result *p = &jobs[i].r;
    out->iters += p->iters, out->errors += p->errors, out->checked += p->checked;
    for (int j = 0; j < p->ok; j++) all[k++] = cs[i].t[j];
    total += p->ok ? p->gbps_gpu : 0;
    struct bench_pair_result pr = {cs[i].gpu, p->ok, p->errors, p->ok ? p->gbps_gpu : 0, p->p50_us};
    out->pair[i] = pr;
    if (p->error[0] && (first < 0 || (jobs[first].rc == TPX_ECANCELED && jobs[i].rc != TPX_ECANCELED))) first = i;
  }
  if (first >= 0)
    snprintf(out->error, sizeof(out->error), "pair %d (GPU %d): %.640s", first, cs[first].gpu, jobs[first].r.error);
  bench_stats(out, all, k, 1, out->latency && out->op != TPX_OP_READ ? 2.0 : 1.0);
  if (!out->latency && k) out->gbps_total = total, out->gbps_gpu = total / n;
}

static int run_pairs(struct client *cs, int op, int batch, size_t size, struct bench_result *out) {
  const struct bench_opts *o = cs[0].o;
  if (!o->multi) return run(&cs[0], op, batch, size, out);
  int n = o->ngpus, rc = 0;
  struct job *jobs = calloc((size_t)n, sizeof(*jobs));
  pthread_t *th = calloc((size_t)n, sizeof(*th));
  double *all = calloc((size_t)n * (size_t)o->iters, sizeof(double));
  if (!jobs || !th || !all) {
    free(jobs), free(th), free(all);
    snprintf(cs[0].why, sizeof(cs[0].why), "out of memory");
    return TPX_ENOMEM;
  }
  int started = 0;
  for (; started < n; started++) {
    struct job j = {.c = &cs[started], .op = op, .batch = batch, .size = size};
    jobs[started] = j;
    if (pthread_create(&th[started], NULL, job_main, &jobs[started]) != 0) break;
  }
  if (started < n) bench_abort_all(), rc = TPX_ESYSTEM, snprintf(cs[0].why, sizeof(cs[0].why), "cannot start a thread");
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < started && rc == 0; i++) rc = jobs[i].rc;
  if (started) merge(cs, jobs, started, out, all);
  if (rc && out->error[0]) snprintf(cs[0].why, sizeof(cs[0].why), "%.639s", out->error);
  free(jobs), free(th), free(all);
  return rc;
}

/* Every run of the sweep, op by op; the table rows as they finish. */
static int sweep(struct client *cs, struct bench_result *res, int *nres) {
  const struct bench_opts *o = cs[0].o;
  int rc = 0;
  for (int oi = 0; oi < o->nops && rc == 0; oi++) {
    int first = *nres;
    bench_table_header(o, o->ops[oi], tpx_endpoint_transport(cs[0].ep), tpx_peer_num_channels(cs[0].peer),
                       cs[0].cfg.chunk_bytes);
    for (int bi = 0; bi < o->nbatch && rc == 0; bi++)
      for (size_t s = o->size_min; s <= o->size_max && rc == 0; s = next_size(s, o->factor)) {
        struct bench_result *r = &res[(*nres)++];
        rc = run_pairs(cs, o->ops[oi], o->batch[bi], s, r);
        bench_table_row(r);
      }
    summary(&cs[0], res + first, *nres - first);
  }
  return rc;
}

/* Pair i: its endpoint on GPU gpus[i], connected to the server's pair i
 * (port P + i; loopback: that endpoint's port). */
static int open_pair(struct client *c, const char *host, int port) {
  const struct bench_opts *o = c->o;
  bench_make_cfg(o, &c->cfg);
  c->timeout_ms = c->cfg.timeout_ms;
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &c->cfg;
  p.name = "bench-client";
  p.net = o->net;
  p.gpu = c->gpu;
  p.no_listen = 1;
  int rc = tpx_endpoint_create(&p, &c->ep);
  if (rc) {
    snprintf(c->why, sizeof(c->why), "endpoint: %s", tool_error(rc));
    return rc;
  }
  port = o->ports ? o->ports[c->idx] : (port > 0 ? port : c->cfg.port_base) + c->idx;
  return setup(c, host, port);
}

static void close_pair(struct client *c) {
  if (c->mem) tpx_peer_close(c->peer), c->peer = NULL, tpx_mem_deregister(c->mem);
  tpx_peer_close(c->peer);
  tpx_rmem_free(c->srv);
  tpx_endpoint_destroy(c->ep);
  bench_buf_free(&c->buf);
  free(c->t);
}

/* What each channel of pair 0 carried (tpx_peer_channel_stats): the share
 * of the striping pattern it had at the end, chunks each way, losses and
 * rejoins; one [CHANNELS] line per channel. */
static void channel_lines(const struct client *c) {
  int n = c->peer ? tpx_peer_num_channels(c->peer) : 0;
  for (int ch = 0; ch < n; ch++) {
    tpx_channel_stats_t st;
    if (tpx_peer_channel_stats(c->peer, ch, &st) != 0) return;
    printf("[CHANNELS] channel %d: device %d, %s, share %u of %u%s, %.1f / %.1f MB sent / received, lost %u, back %u\n",
           ch, st.dev, st.up ? "up" : "lost", st.share, st.slots, st.adaptive ? " (adaptive)" : " (fixed)",
           (double)st.bytes_sent / 1e6, (double)st.bytes_recv / 1e6, st.losses, st.rejoins);
  }
}

static void banner(const struct client *cs) {
  const struct bench_opts *o = cs[0].o;
  char cb[24];
  printf("[BENCH] %s%s, transport %s, %d channel(s), chunk %s, %s memory, GPU %d, peer GPU %d", o->latency ? "latency" : "bandwidth",
         o->check ? " with --check" : "", tpx_endpoint_transport(cs[0].ep), tpx_peer_num_channels(cs[0].peer),
         bench_chunk_str(cs[0].cfg.chunk_bytes, cb, sizeof cb), o->cuda ? "cuda" : "host", cs[0].gpu,
         tpx_peer_gpu(cs[0].peer));
  if (o->multi) {
    printf(", %d pairs in this process:", o->ngpus);
    for (int i = 0; i < o->ngpus; i++) printf(" %d->%d", cs[i].gpu, tpx_peer_gpu(cs[i].peer));
  }
  printf("\n");
}

int bench_client(const struct bench_opts *o, const char *host, int port, int argc, char **argv) {
  int n = o->ngpus, rc = 0, nres = 0, opened = 0;
  struct client *cs = calloc((size_t)n, sizeof(*cs));
  struct bench_result *res = calloc((size_t)count_runs(o), sizeof(*res));
  struct bench_gate *gate = o->multi ? bench_gate_new(n) : NULL;
  if (!cs || !res || (o->multi && !gate)) {
    fprintf(stderr, "tpx-bench: out of memory\n");
    free(cs), free(res), bench_gate_free(gate);
    return 1;
  }
  for (; opened < n && rc == 0; opened++) {
    struct client c = {.o = o, .idx = opened, .gpu = o->gpus[opened], .gate = gate};
    cs[opened] = c;
    if ((rc = open_pair(&cs[opened], host, port)) && o->multi) {
      char why[sizeof(c.why)];
      snprintf(why, sizeof(why), "pair %d (GPU %d): %.200s", opened, cs[opened].gpu, cs[opened].why);
      memcpy(cs[0].why, why, sizeof(why));
    }
  }
  if (rc == 0) {
    banner(cs);
    rc = sweep(cs, res, &nres);
    uint8_t m[32];
    for (int i = 0; i < n && rc == 0; i++) (void)bench_send(cs[i].peer, m, bench_msg_simple(m, M_BYE, 0, NULL));
    bench_summary_line(res, nres, o->check);
    channel_lines(&cs[0]);
  }
  int errors = 0;
  for (int i = 0; i < nres; i++) errors += res[i].errors;
  if (rc) fprintf(stderr, "tpx-bench: %s\n", cs[0].why[0] ? cs[0].why : tpx_strerror(rc));
  if (o->json) {
    struct bench_json_ctx j = {o, argc, argv, cs[0].ep ? tpx_endpoint_transport(cs[0].ep) : "",
                               cs[0].peer ? tpx_peer_num_channels(cs[0].peer) : 0, cs[0].cfg.chunk_bytes,
                               rc ? cs[0].why : NULL};
    if (bench_json_write(&j, res, nres) != 0) rc = rc ? rc : TPX_ESYSTEM;
  }
  for (int i = 0; i < opened; i++) close_pair(&cs[i]);
  bench_gate_free(gate);
  free(cs);
  free(res);
  if (errors && !rc) fprintf(stderr, "tpx-bench: %d failed iteration(s)\n", errors);
  return rc || errors ? 1 : 0;
}

void bench_make_cfg(const struct bench_opts *o, tpx_config_t *cfg) {
  tpx_config_from_env(cfg);
  if (o->channels > 0) cfg->num_channels = o->channels;
  if (o->chunk > 0) cfg->chunk_bytes = o->chunk;
  if (o->timeout_ms > 0) cfg->timeout_ms = o->timeout_ms;
}
