/* The server side: accept a client, allocate and register what it asks for
 * (bounded), then follow its runs until it says goodbye; with --forever the
 * next client, until a signal. A client that dies ends its session within the
 * deadline (the peer's failure is noticed by every wait), never the server. */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "version.h"

struct session {
  const struct bench_opts *o;
  tpx_endpoint_t *ep;
  tpx_peer_t *peer;
  int gpu, timeout_ms, quiet;
  int idx; /* --gpus: this endpoint's pair */
  char tag[24]; /* "" or " pair I": in the lines this session prints */
  double check_user, check_sys; /* CPU seconds the current run spent checking */
  int checked;                  /* transfers of the current run verified intact */
  struct bench_buf buf;
  tpx_mem_t *mem;
  tpx_rmem_t *cli;
  char why[640]; /* a tool_error() text and what was being done */
};

static int fail(struct session *s, int rc, const char *what) {
  if (!s->why[0]) snprintf(s->why, sizeof(s->why), "%s: %s", what, tool_error(rc));
  uint8_t m[BENCH_MSG_MAX];
  if (tpx_peer_status(s->peer) == 0) /* tell the client, if it still listens */
    (void)bench_send(s->peer, m, bench_msg_simple(m, M_ERR, 0, s->why));
  return rc ? rc : TPX_EPROTO;
}

static int wait_msg(struct session *s, int timeout_ms, tpx_notif_t *n, const char *what) {
  return bench_wait_msg(s->ep, s->peer, timeout_ms, n, what, s->why, sizeof(s->why));
}

/* HELLO: the client's span and descriptor; we answer with ours. */
/* The client must drive as many pairs as we serve, and this must be its pair
 * for this endpoint: anything else is refused, saying both counts. */
static int hello_pairs(struct session *s, const struct bench_hello *h) {
  if (h->npairs == s->o->ngpus && h->pair == s->idx) return 0;
  if (h->npairs != s->o->ngpus)
    snprintf(s->why, sizeof(s->why),
             "the client drives %d endpoint pair(s), this server %d: start both sides with --gpus lists of one length "
             "(or both with --gpu)", h->npairs, s->o->ngpus);
  else snprintf(s->why, sizeof(s->why), "the client's pair %d reached this server's pair %d (ports P + i out of step?)",
                h->pair, s->idx);
  return fail(s, TPX_EPROTO, "hello");
}

static int hello(struct session *s, tpx_notif_t *n) {
  struct bench_hello h;
  const uint8_t *md;
  size_t mdl;
  int rc = wait_msg(s, s->timeout_ms, n, "the client's hello");
  if (rc) return rc;
  if (bench_msg_get_hello(n, &h, &md, &mdl) != 0 || h.span < 1 || h.span > BENCH_MAX_SPAN) {
    snprintf(s->why, sizeof(s->why), "malformed hello (span out of [1, %llu], bad pair counts or bad descriptor)",
             BENCH_MAX_SPAN);
    return fail(s, TPX_EPROTO, "hello");
  }
  if ((rc = hello_pairs(s, &h))) return rc;
  uint64_t span = h.span;
  if ((rc = tpx_load_remote_md(md, mdl, &s->cli))) return fail(s, rc, "the client's descriptor");
  if ((rc = bench_buf_alloc(&s->buf, span, s->o->cuda, s->gpu))) {
    snprintf(s->why, sizeof(s->why), "cannot allocate %llu bytes of %s memory (%s)", (unsigned long long)span,
             s->o->cuda ? "GPU" : "host", rc == TPX_ENOMEM ? "more than this machine has" : tpx_last_error());
    return fail(s, rc, "allocate");
  }
  tpx_mem_desc_t d = {s->buf.p, span, s->buf.cuda ? TPX_MEM_CUDA : TPX_MEM_HOST, s->gpu,
                      TPX_ACCESS_READ | TPX_ACCESS_WRITE};
  if ((rc = tpx_mem_register(s->ep, &d, &s->mem))) return fail(s, rc, "register");
  uint8_t m[BENCH_MSG_MAX], blob[TPX_MD_MAX + 1] = {0};
  size_t bl = 0;
  if ((rc = tpx_mem_get_public_data(s->mem, blob, TPX_MD_MAX, &bl))) return fail(s, rc, "descriptor");
  size_t k = bench_msg_simple(m, M_MD, bl, NULL);
  memcpy(m + k, blob, bl);
  if ((rc = bench_send(s->peer, m, k + bl))) return fail(s, rc, "notify");
  if (!s->quiet && s->buf.cuda) printf("[SERVER]%s buffer in GPU %d memory\n", s->tag, s->gpu);
  return 0;
}

/* --check: verify the destination of one iteration, poison it for the next,
 * tell the client. Returns 1 for a mismatch (an error of that iteration). */
static int verify(struct session *s, const struct bench_layout *l, unsigned seed, int *bad_count) {
  size_t bad = 0;
  double u0, s0, u1, s1;
  bench_cpu_now(&u0, &s0);
  int mism = bench_buf_check(&s->buf, l, 1, seed, &bad) != 0;
  s->checked += !mism;
  if (mism && (*bad_count)++ == 0)
    printf("[CHECK] server%s: MISMATCH at byte %zu (the transfer's %zu bytes from %zu)\n", s->tag, bad,
           bench_layout_span(l), l->base);
  int rc = bench_buf_poison(&s->buf, l);
  uint8_t m[64];
  if (rc == 0) rc = bench_send(s->peer, m, bench_msg_simple(m, M_CHK_REPLY, mism ? bad + 1 : 0, NULL));
  bench_cpu_now(&u1, &s1);
  s->check_user += u1 - u0, s->check_sys += s1 - s0; /* not the transfer's: left out of [CPU] */
  return rc ? fail(s, rc, "check reply") : 0;
}

/* Two-sided: our receive (and, for latency, the echo) per iteration. */
static int send_iters(struct session *s, const struct bench_run_msg *r, const struct bench_layout *l, int *bad) {
  tpx_xfer_t *rx = NULL, *tx = NULL;
  int rc = tpx_xfer_prep_recv(s->peer, s->mem, 0, r->block, 1, &rx);
  if (rc == 0 && r->latency) rc = tpx_xfer_prep_send(s->peer, s->mem, 0, r->block, 2, &tx);
  for (int i = 0; rc == 0 && i < r->iters + r->warmup; i++) {
    if ((rc = tpx_xfer_post(rx)) || (rc = bench_wait_xfer(rx, s->peer, s->timeout_ms, s->why, sizeof(s->why)))) break;
    if (tx && ((rc = tpx_xfer_post(tx)) || (rc = bench_wait_xfer(tx, s->peer, s->timeout_ms, s->why, sizeof(s->why)))))
      break;
    if (r->check && (rc = verify(s, l, bench_seed(r), bad))) break;
  }
  tpx_xfer_free(rx);
  tpx_xfer_free(tx);
  return rc ? fail(s, rc, "receive") : 0;
}

/* Write latency: a ping (notification) from the client, our write back. */
static int pong_iters(struct session *s, const struct bench_run_msg *r, tpx_notif_t *n) {
  tpx_iov_t v = {s->mem, 0, s->cli, 0, r->block};
  tpx_xfer_t *w = NULL;
  uint8_t pong[32];
  int rc = tpx_xfer_prep_write(s->peer, &v, 1, pong, bench_msg_simple(pong, M_PING, 0, NULL), &w);
  for (int i = 0; rc == 0 && i < r->iters + r->warmup; i++) {
    if ((rc = wait_msg(s, s->timeout_ms, n, "a ping"))) break;
    if (bench_msg_type(n) != M_PING) {
      snprintf(s->why, sizeof(s->why), "expected a ping, got message %d", bench_msg_type(n));
      rc = TPX_EPROTO;
      break;
    }
    if ((rc = tpx_xfer_post(w)) == 0) rc = bench_wait_xfer(w, s->peer, s->timeout_ms, s->why, sizeof(s->why));
  }
  tpx_xfer_free(w);
  return rc ? fail(s, rc, "pong") : 0;
}

/* The client's run; ends with its END, which we answer with ours. */
static int run(struct session *s, const tpx_notif_t *req, tpx_notif_t *n) {
  struct bench_run_msg r;
  struct bench_layout l;
  if (bench_msg_get_run(req, &r) != 0) {
    snprintf(s->why, sizeof(s->why), "malformed run request");
    return fail(s, TPX_EPROTO, "run");
  }
  bench_layout_init(&l, r.block, r.batch);
  if (r.region > s->buf.len / (size_t)r.regions) { /* bench_msg_get_run: span <= region */
    snprintf(s->why, sizeof(s->why), "run of %d x %llu bytes beyond the %zu announced", r.regions,
             (unsigned long long)r.region, s->buf.len);
    return fail(s, TPX_EPROTO, "run");
  }
  int rc = 0, bad = 0, checks_by_us = r.check && r.op != TPX_OP_READ, done = r.iters + r.warmup;
  for (int k = 0; k < r.regions && rc == 0; k++) {
    struct bench_layout lk = bench_layout_at(&l, k, r.region);
    if (r.op == TPX_OP_READ) rc = bench_buf_fill(&s->buf, &lk, 1, bench_seed(&r));
    else if (r.check) rc = bench_buf_poison(&s->buf, &lk);
  }
  uint8_t m[64];
  if (rc || (rc = bench_send(s->peer, m, bench_msg_simple(m, M_READY, 0, NULL)))) return fail(s, rc, "prepare");
  double u0, s0, t0 = bench_now_ms();
  bench_cpu_now(&u0, &s0);
  s->check_user = s->check_sys = 0;
  s->checked = 0;
  long long run_ms = (long long)s->timeout_ms * (r.iters + r.warmup + 1);
  int run_to = run_ms > 0x7fffffff ? 0x7fffffff : (int)run_ms;
  if (r.op == TPX_OP_SEND) rc = send_iters(s, &r, &l, &bad);
  else if (r.op == TPX_OP_WRITE && r.latency) rc = pong_iters(s, &r, n);
  for (int got_end = 0; rc == 0 && !got_end;) { /* write --check: CHK per iteration; every op: END */
    if ((rc = wait_msg(s, run_to, n, "the end of the run"))) break;
    int t = bench_msg_type(n);
    if (t == M_CHK && r.check && r.op == TPX_OP_WRITE) {
      uint64_t k = 0; /* the copy of the layout (--regions) the transfer wrote */
      if (bench_msg_get_simple(n, &k, NULL, 0) != 0 || k >= (uint64_t)r.regions) {
        snprintf(s->why, sizeof(s->why), "check of copy %llu of the layout; the run has %d",
                 (unsigned long long)k, r.regions);
        rc = fail(s, TPX_EPROTO, "run");
      } else {
        struct bench_layout lk = bench_layout_at(&l, (int)k, r.region);
        rc = verify(s, &lk, bench_seed(&r), &bad);
      }
    } else if (t == M_END) {
      got_end = 1;
      uint64_t k = 0; /* the transfers that completed, warm-up included (0: an older client) */
      if (bench_msg_get_simple(n, &k, NULL, 0) == 0 && k > 0 && k <= (uint64_t)r.iters + (uint64_t)r.warmup) done = (int)k;
    } else {
      snprintf(s->why, sizeof(s->why), "unexpected message %d during a run", t);
      rc = fail(s, TPX_EPROTO, "run");
    }
  }
  if (rc) return rc;
  char lb[64];
  bench_run_label(r.op, (size_t)r.block, r.batch, lb, sizeof lb);
  if (checks_by_us && bad == 0)
    printf("[CHECK] server%s: ok, %s: %d transfer(s) x %zu bytes intact (%s memory)\n", s->tag, lb, s->checked,
           bench_layout_bytes(&l), s->buf.cuda ? "GPU" : "host");
  if (!r.latency && !s->o->multi) /* warm-up and waits included; checks not. --gpus: the process's CPU is every pair's */
    bench_cpu_line("server", lb, u0 + s->check_user, s0 + s->check_sys, bench_now_ms() - t0,
                   (double)bench_layout_bytes(&l) * done);
  fflush(stdout);
  return bench_send(s->peer, m, bench_msg_simple(m, M_END, (uint64_t)bad, NULL));
}

static int session(struct session *s) {
  tpx_notif_t n;
  int rc = hello(s, &n);
  while (rc == 0) {
    if ((rc = wait_msg(s, 0x7fffffff, &n, "the next run"))) break;
    int t = bench_msg_type(&n);
    if (t == M_BYE) break;
    if (t != M_RUN) {
      snprintf(s->why, sizeof(s->why), "unexpected message %d between runs", t);
      rc = fail(s, TPX_EPROTO, "session");
      break;
    }
    rc = run(s, &n, &n);
  }
  if (s->mem) { /* the peer first: its requests into our memory end with it */
    tpx_peer_close(s->peer);
    s->peer = NULL;
    tpx_mem_deregister(s->mem);
  }
  tpx_peer_close(s->peer);
  tpx_rmem_free(s->cli);
  bench_buf_free(&s->buf);
  return rc;
}

static int accept_one(tpx_endpoint_t *ep, tpx_peer_t **peer) {
  for (;;) {
    int rc = tpx_accept(ep, 200, peer);
    if (rc != TPX_ETIMEDOUT) return rc;
    if (bench_stop || bench_abort) return TPX_ECANCELED;
  }
}

/* One endpoint's clients: one, or with --forever each in turn until a signal. */
struct server_ep {
  const struct bench_opts *o;
  tpx_endpoint_t *ep;
  tpx_config_t cfg;
  int idx, gpu, quiet, ret;
};

static void serve(struct server_ep *e) {
  const struct bench_opts *o = e->o;
  int rc;
  e->ret = 0;
  do {
    struct session s = {.o = o, .ep = e->ep, .gpu = e->gpu, .timeout_ms = e->cfg.timeout_ms, .quiet = e->quiet, .idx = e->idx};
    if (o->multi) snprintf(s.tag, sizeof(s.tag), " pair %d", e->idx);
    if ((rc = accept_one(e->ep, &s.peer))) {
      if (rc != TPX_ECANCELED)
        fprintf(stderr, "tpx-bench: server%s: accept: %s\n", s.tag, tool_error(rc));
      e->ret = o->forever && rc == TPX_ECANCELED ? e->ret : 1;
      break;
    }
    if ((rc = session(&s))) {
      if (!(o->multi && rc == TPX_ECANCELED && bench_abort)) /* the pair that failed says why */
        fprintf(stderr, "tpx-bench: server%s: %s\n", s.tag, s.why[0] ? s.why : tpx_strerror(rc));
      e->ret = 1;
      if (o->multi && !o->forever) bench_abort_all(); /* the client is broken: end every pair */
    } else if (o->forever) {
      printf("[SERVER]%s client done; waiting for the next\n", s.tag);
      fflush(stdout);
    }
  } while (o->forever && !bench_stop);
}

static void *serve_main(void *arg) {
  serve(arg);
  return NULL;
}

/* Endpoint i on GPU gpus[i]: port P + i with --gpus (exactly that port: the
 * client counts on it), else as before (TPX_PORT_BASE + GPU, or --port). */
static int open_ep(const struct bench_opts *o, int i, int loopback, struct server_ep *e) {
  bench_make_cfg(o, &e->cfg);
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &e->cfg;
  p.name = "bench-server";
  p.net = o->net;
  p.gpu = e->gpu = o->multi ? o->gpus[i] : o->server_gpu >= 0 ? o->server_gpu : o->gpu;
  p.port = o->multi && !loopback ? (o->port > 0 ? o->port : e->cfg.port_base) + i : o->port;
  p.listen_host = o->listen_host;
  e->o = o, e->idx = i, e->quiet = loopback;
  int rc = tpx_endpoint_create(&p, &e->ep);
  if (rc)
    fprintf(stderr, "tpx-bench: server endpoint%s %d (GPU %d, port %d): %s\n", o->multi ? " of pair" : "", i,
            p.gpu, p.port, tool_error(rc));
  return rc;
}

static void listening(const struct bench_opts *o, const struct server_ep *es) {
  int n = o->ngpus;
  if (!o->multi)
    printf("[SERVER] listening on port %d (transport %s)", tpx_endpoint_port(es[0].ep), tpx_endpoint_transport(es[0].ep));
  else
    printf("[SERVER] listening on ports %d-%d (%d endpoints in this process, transport %s)", tpx_endpoint_port(es[0].ep),
           tpx_endpoint_port(es[n - 1].ep), n, tpx_endpoint_transport(es[0].ep));
  printf("%s\n", o->forever ? ", serving clients until a signal" : "");
  fflush(stdout);
}

int bench_server(const struct bench_opts *o, const struct bench_server_ready *ready) {
  int n = o->ngpus, opened = 0, rc = 0, ret = 0;
  struct server_ep *es = calloc((size_t)n, sizeof(*es));
  pthread_t *th = calloc((size_t)n, sizeof(*th));
  int *ports = calloc((size_t)n, sizeof(int));
  if (!es || !th || !ports) rc = TPX_ENOMEM, fprintf(stderr, "tpx-bench: server: out of memory\n");
  for (; rc == 0 && opened < n; opened++)
    if ((rc = open_ep(o, opened, ready != NULL, &es[opened])) == 0) ports[opened] = tpx_endpoint_port(es[opened].ep);
  if (ready) ready->cb(ready->arg, rc == 0 ? ports : NULL);
  tpx_rdv_t *rdv = NULL; /* --name (one pair): published while we serve; the keys go with us */
  if (rc == 0 && o->rdv_name &&
      ((rc = tpx_rdv_open(&es[0].cfg, &rdv)) || (rc = tpx_rdv_publish(rdv, es[0].ep, o->rdv_name))))
    fprintf(stderr, "tpx-bench: server: --name %s: %s\n", o->rdv_name, tool_error(rc));
  if (rc == 0 && rdv) printf("[SERVER] published as '%s' in job '%s' (etcd)\n", o->rdv_name, tpx_rdv_job(rdv));
  if (rc == 0 && !ready) listening(o, es);
  int started = 0;
  if (rc == 0 && !o->multi) serve(&es[0]);
  for (; rc == 0 && o->multi && started < n; started++)
    if (pthread_create(&th[started], NULL, serve_main, &es[started]) != 0) {
      fprintf(stderr, "tpx-bench: server: cannot start a thread\n");
      bench_abort_all();
      rc = TPX_ESYSTEM;
      break;
    }
  for (int i = 0; i < started; i++) pthread_join(th[i], NULL);
  for (int i = 0; i < n && es; i++) ret |= es[i].ret;
  tpx_rdv_close(rdv);
  for (int i = 0; i < opened; i++) tpx_endpoint_destroy(es[i].ep);
  free(es), free(th), free(ports);
  if (rc) return 1;
  return o->forever && bench_stop ? 0 : ret;
}
