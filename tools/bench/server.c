/* The server side: accept a client, allocate and register what it asks for
 * (bounded), then follow its runs until it says goodbye; with --forever the
 * next client, until a signal. A client that dies ends its session within the
 * deadline (the peer's failure is noticed by every wait), never the server. */
#include <stdio.h>
#include <string.h>

#include "bench.h"

struct session {
  const struct bench_opts *o;
  tpx_endpoint_t *ep;
  tpx_peer_t *peer;
  int gpu, timeout_ms, quiet;
  double check_user, check_sys; /* CPU seconds the current run spent checking */
  struct bench_buf buf;
  tpx_mem_t *mem;
  tpx_rmem_t *cli;
  char why[256];
};

static int fail(struct session *s, int rc, const char *what) {
  if (!s->why[0]) snprintf(s->why, sizeof(s->why), "%s: %s (%s)", what, tpx_strerror(rc), tpx_last_error());
  uint8_t m[BENCH_MSG_MAX];
  if (tpx_peer_status(s->peer) == 0) /* tell the client, if it still listens */
    (void)bench_send(s->peer, m, bench_msg_simple(m, M_ERR, 0, s->why));
  return rc ? rc : TPX_EPROTO;
}

static int wait_msg(struct session *s, int timeout_ms, tpx_notif_t *n, const char *what) {
  return bench_wait_msg(s->ep, s->peer, timeout_ms, n, what, s->why, sizeof(s->why));
}

/* HELLO: the client's span and descriptor; we answer with ours. */
static int hello(struct session *s, tpx_notif_t *n) {
  uint64_t span;
  const uint8_t *md;
  size_t mdl;
  int rc = wait_msg(s, s->timeout_ms, n, "the client's hello");
  if (rc) return rc;
  if (bench_msg_get_hello(n, &span, &md, &mdl) != 0 || span < 1 || span > BENCH_MAX_SPAN) {
    snprintf(s->why, sizeof(s->why), "malformed hello (span out of [1, %llu] or bad descriptor)", BENCH_MAX_SPAN);
    return fail(s, TPX_EPROTO, "hello");
  }
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
  if (!s->quiet && s->buf.cuda) printf("[SERVER] buffer in GPU %d memory\n", s->gpu);
  return 0;
}

/* --check: verify the destination of one iteration, poison it for the next,
 * tell the client. Returns 1 for a mismatch (an error of that iteration). */
static int verify(struct session *s, const struct bench_layout *l, unsigned seed, int *bad_count) {
  size_t bad = 0;
  double u0, s0, u1, s1;
  bench_cpu_now(&u0, &s0);
  int mism = bench_buf_check(&s->buf, l, 1, seed, &bad) != 0;
  if (mism && (*bad_count)++ == 0) printf("[CHECK] server: MISMATCH at byte %zu of %zu\n", bad, bench_layout_span(l));
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
    if ((rc = tpx_xfer_post(rx)) || (rc = bench_wait_xfer(rx, s->peer, s->timeout_ms))) break;
    if (tx && ((rc = tpx_xfer_post(tx)) || (rc = bench_wait_xfer(tx, s->peer, s->timeout_ms)))) break;
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
    if ((rc = tpx_xfer_post(w)) == 0) rc = bench_wait_xfer(w, s->peer, s->timeout_ms);
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
  if (bench_layout_span(&l) > s->buf.len) {
    snprintf(s->why, sizeof(s->why), "run of %zu bytes beyond the %zu announced", bench_layout_span(&l), s->buf.len);
    return fail(s, TPX_EPROTO, "run");
  }
  int rc = 0, bad = 0, checks_by_us = r.check && r.op != TPX_OP_READ;
  if (r.op == TPX_OP_READ) rc = bench_buf_fill(&s->buf, &l, 1, bench_seed(&r));
  else if (r.check) rc = bench_buf_poison(&s->buf, &l);
  uint8_t m[64];
  if (rc || (rc = bench_send(s->peer, m, bench_msg_simple(m, M_READY, 0, NULL)))) return fail(s, rc, "prepare");
  double u0, s0, t0 = bench_now_ms();
  bench_cpu_now(&u0, &s0);
  s->check_user = s->check_sys = 0;
  long long run_ms = (long long)s->timeout_ms * (r.iters + r.warmup + 1);
  int run_to = run_ms > 0x7fffffff ? 0x7fffffff : (int)run_ms;
  if (r.op == TPX_OP_SEND) rc = send_iters(s, &r, &l, &bad);
  else if (r.op == TPX_OP_WRITE && r.latency) rc = pong_iters(s, &r, n);
  for (int got_end = 0; rc == 0 && !got_end;) { /* write --check: CHK per iteration; every op: END */
    if ((rc = wait_msg(s, run_to, n, "the end of the run"))) break;
    int t = bench_msg_type(n);
    if (t == M_CHK && r.check && r.op == TPX_OP_WRITE) rc = verify(s, &l, bench_seed(&r), &bad);
    else if (t == M_END) got_end = 1;
    else {
      snprintf(s->why, sizeof(s->why), "unexpected message %d during a run", t);
      rc = fail(s, TPX_EPROTO, "run");
    }
  }
  if (rc) return rc;
  if (checks_by_us && bad == 0)
    printf("[CHECK] server: ok, %d iterations x %zu bytes intact (%s memory)\n", r.iters + r.warmup,
           bench_layout_bytes(&l), s->buf.cuda ? "GPU" : "host");
  if (!r.latency) /* warm-up and waits included; checks not */
    bench_cpu_line("server", u0 + s->check_user, s0 + s->check_sys, bench_now_ms() - t0,
                   (double)bench_layout_bytes(&l) * (r.iters + r.warmup));
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
    if (bench_stop) return TPX_ECANCELED;
  }
}

int bench_server(const struct bench_opts *o, const struct bench_server_ready *ready) {
  tpx_config_t cfg;
  bench_make_cfg(o, &cfg);
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.name = "bench-server";
  p.net = o->net;
  p.gpu = o->server_gpu >= 0 ? o->server_gpu : o->gpu;
  p.port = o->port;
  p.listen_host = o->listen_host;
  tpx_endpoint_t *ep = NULL;
  int rc = tpx_endpoint_create(&p, &ep);
  if (ready) ready->cb(ready->arg, rc == 0 ? ep : NULL);
  if (rc) {
    fprintf(stderr, "tpx-bench: server endpoint: %s (%s)\n", tpx_strerror(rc), tpx_last_error());
    return 1;
  }
  tpx_rdv_t *rdv = NULL; /* --name: published while we serve; the keys go with us */
  if (o->rdv_name && ((rc = tpx_rdv_open(&cfg, &rdv)) || (rc = tpx_rdv_publish(rdv, ep, o->rdv_name)))) {
    fprintf(stderr, "tpx-bench: server: --name %s: %s (%s)\n", o->rdv_name, tpx_strerror(rc), tpx_last_error());
    tpx_rdv_close(rdv);
    tpx_endpoint_destroy(ep);
    return 1;
  }
  if (rdv) printf("[SERVER] published as '%s' in job '%s' (etcd)\n", o->rdv_name, tpx_rdv_job(rdv));
  if (!ready) printf("[SERVER] listening on port %d (transport %s)%s\n", tpx_endpoint_port(ep),
                     tpx_endpoint_transport(ep), o->forever ? ", serving clients until a signal" : "");
  fflush(stdout);
  int ret = 0;
  do {
    struct session s = {.o = o, .ep = ep, .gpu = p.gpu, .timeout_ms = cfg.timeout_ms, .quiet = ready != NULL};
    if ((rc = accept_one(ep, &s.peer))) {
      if (rc != TPX_ECANCELED) fprintf(stderr, "tpx-bench: server: accept: %s (%s)\n", tpx_strerror(rc), tpx_last_error());
      ret = o->forever && rc == TPX_ECANCELED ? ret : 1;
      break;
    }
    if ((rc = session(&s))) {
      fprintf(stderr, "tpx-bench: server: %s\n", s.why[0] ? s.why : tpx_strerror(rc));
      ret = 1;
    } else if (o->forever) {
      printf("[SERVER] client done; waiting for the next\n");
      fflush(stdout);
    }
  } while (o->forever && !bench_stop);
  tpx_rdv_close(rdv);
  tpx_endpoint_destroy(ep);
  return o->forever && bench_stop ? 0 : ret;
}
