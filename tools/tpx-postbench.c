/* tpx-postbench: what preparing and posting a transfer costs the caller,
 * through the public C API, two endpoints in one process over loopback.
 *
 *   tpx-postbench [--block N] [--batch N] [--op write|read] [--iters N]
 *                 [--poll test|wait]
 *
 * Per iteration: tpx_xfer_prep_write/read of --batch blocks of --block bytes
 * (block i of the local buffer to block i of the remote one, as NIXL's
 * make_prepped_xfer with block-index lists), tpx_xfer_post, then completion
 * by polling tpx_xfer_test (--poll test, what NIXL's checkXfer does) or
 * tpx_xfer_wait (--poll wait), then tpx_xfer_free. Prints the median and p99
 * of prep, post and prep+post in microseconds, the average time from post to
 * completion, and GB/s (1e9 B/s) over the timed iterations. Exit status 0,
 * 1 on a failure. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpx/tpx.h"
#include "version.h"

struct opts {
  size_t block, batch;
  int write, iters, poll_test;
};

static double now_us(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec * 1e6 + (double)ts.tv_nsec / 1e3;
}

static int cmp_d(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return x < y ? -1 : x > y;
}

static double pct(double *v, int n, double p) {
  qsort(v, (size_t)n, sizeof(*v), cmp_d);
  int i = (int)(p * (n - 1) + 0.5);
  return v[i];
}

static size_t parse_size(const char *s) {
  char *end;
  size_t v = strtoull(s, &end, 10);
  if (*end == 'K' || *end == 'k') v <<= 10;
  else if (*end == 'M' || *end == 'm') v <<= 20;
  return v;
}

static int parse(int argc, char **argv, struct opts *o) {
  *o = (struct opts){64 << 10, 64, 1, 200, 1};
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!v) return -1;
    if (!strcmp(a, "--block")) o->block = parse_size(v);
    else if (!strcmp(a, "--batch")) o->batch = (size_t)atol(v);
    else if (!strcmp(a, "--op")) o->write = strcmp(v, "read") != 0;
    else if (!strcmp(a, "--iters")) o->iters = atoi(v);
    else if (!strcmp(a, "--poll")) o->poll_test = strcmp(v, "wait") != 0;
    else return -1;
    i++;
  }
  return o->block && o->batch && o->batch <= TPX_XFER_MAX_IOV && o->iters > 0 ? 0 : -1;
}

struct side {
  tpx_endpoint_t *ep;
  void *buf;
  tpx_mem_t *mem;
  tpx_rmem_t *rmem;
};

static int side_open(struct side *s, const char *name, size_t len) {
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.port = TPX_PORT_EPHEMERAL;
  p.listen_host = "127.0.0.1";
  p.name = name;
  if (tpx_endpoint_create(&p, &s->ep)) return -1;
  s->buf = aligned_alloc(4096, (len + 4095) & ~(size_t)4095);
  if (!s->buf) return -1;
  memset(s->buf, 1, len);
  tpx_mem_desc_t d = {s->buf, len, TPX_MEM_HOST, 0, TPX_ACCESS_READ | TPX_ACCESS_WRITE};
  uint8_t blob[TPX_MD_MAX];
  size_t bl = 0;
  if (tpx_mem_register(s->ep, &d, &s->mem) || tpx_mem_get_public_data(s->mem, blob, sizeof(blob), &bl) ||
      tpx_load_remote_md(blob, bl, &s->rmem))
    return -1;
  return 0;
}

static int complete(tpx_xfer_t *x, int poll_test) {
  if (!poll_test) return tpx_xfer_wait(x, 60000);
  double until = now_us() + 60e6;
  int rc;
  while ((rc = tpx_xfer_test(x)) == TPX_EINPROGRESS && now_us() < until) {
  }
  return rc;
}

/* prep, post, complete, free; times into the arrays at index i. */
static int one(const struct opts *o, tpx_peer_t *peer, tpx_iov_t *iov, double *prep, double *post, double *xfer) {
  tpx_xfer_t *x = NULL;
  double t0 = now_us();
  int rc = o->write ? tpx_xfer_prep_write(peer, iov, o->batch, NULL, 0, &x)
                    : tpx_xfer_prep_read(peer, iov, o->batch, NULL, 0, &x);
  double t1 = now_us();
  if (rc == 0) rc = tpx_xfer_post(x);
  double t2 = now_us();
  if (rc == 0) rc = complete(x, o->poll_test);
  *prep = t1 - t0;
  *post = t2 - t1;
  *xfer = now_us() - t2;
  tpx_xfer_free(x);
  return rc;
}

static int run(const struct opts *o, tpx_peer_t *peer, struct side *a, struct side *b) {
  tpx_iov_t *iov = calloc(o->batch, sizeof(*iov));
  double *prep = calloc((size_t)o->iters, sizeof(double)), *post = calloc((size_t)o->iters, sizeof(double));
  double *sum = calloc((size_t)o->iters, sizeof(double));
  if (!iov || !prep || !post || !sum) return 1;
  for (size_t i = 0; i < o->batch; i++) iov[i] = (tpx_iov_t){a->mem, i * o->block, b->rmem, i * o->block, o->block};
  int warm = o->iters / 10 + 2, rc = 0;
  double xfer_total = 0, t_start = 0;
  for (int it = 0; rc == 0 && it < warm + o->iters; it++) {
    if (it == warm) t_start = now_us();
    double p, q, x;
    rc = one(o, peer, iov, &p, &q, &x);
    if (it < warm) continue;
    prep[it - warm] = p;
    post[it - warm] = q;
    sum[it - warm] = p + q;
    xfer_total += x;
  }
  double wall = now_us() - t_start;
  if (rc) {
    fprintf(stderr, "tpx-postbench: transfer failed: %s\n", tool_error(rc));
  } else {
    int n = o->iters;
    printf("%-5s %7zu x %-5zu prep med %7.1f p99 %7.1f  post med %7.1f p99 %7.1f  prep+post med %7.1f p99 %7.1f"
           "  xfer avg %8.1f us  %6.3f GB/s\n",
           o->write ? "write" : "read", o->block, o->batch, pct(prep, n, 0.5), pct(prep, n, 0.99), pct(post, n, 0.5),
           pct(post, n, 0.99), pct(sum, n, 0.5), pct(sum, n, 0.99), xfer_total / n,
           (double)o->block * (double)o->batch * n / wall / 1e3);
  }
  free(iov);
  free(prep);
  free(post);
  free(sum);
  return rc ? 1 : 0;
}

int main(int argc, char **argv) {
  struct opts o;
  if (parse(argc, argv, &o)) {
    fprintf(stderr, "usage: tpx-postbench [--block N] [--batch N] [--op write|read] [--iters N] [--poll test|wait]\n");
    return 2;
  }
  size_t len = o.block * o.batch;
  struct side a = {0}, b = {0};
  tpx_peer_t *ab = NULL, *ba = NULL;
  if (side_open(&a, "A", len) || side_open(&b, "B", len) ||
      tpx_connect(a.ep, "127.0.0.1", tpx_endpoint_port(b.ep), &ab) || tpx_accept(b.ep, 10000, &ba)) {
    fprintf(stderr, "tpx-postbench: setup failed: %s\n", tpx_last_error());
    return 1;
  }
  int rc = run(&o, ab, &a, &b);
  tpx_peer_close(ab);
  tpx_peer_close(ba);
  tpx_mem_deregister(a.mem);
  tpx_mem_deregister(b.mem);
  tpx_rmem_free(a.rmem);
  tpx_rmem_free(b.rmem);
  tpx_endpoint_destroy(a.ep);
  tpx_endpoint_destroy(b.ep);
  free(a.buf);
  free(b.buf);
  return rc;
}
