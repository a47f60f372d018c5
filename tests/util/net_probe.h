/* A transport wrapper for tests: forwards every call to a real transport
 * (the built-in one, in any mode) and records, at each listen, connect,
 * accept and regMr, the CUDA device the calling thread is bound to, as
 * GPUDirect-TCPX reads it there (cudaGetDevice). `device` is the probe: the
 * GPU tests pass tpx__gpu_current_device, CPU tests a function reading the
 * engine's bind hook. Header-only, one probe per process. */
#ifndef TPX_TESTS_NET_PROBE_H
#define TPX_TESTS_NET_PROBE_H

#include <string.h>

#include "tpx/net.h"

enum { NP_LISTEN, NP_CONNECT, NP_ACCEPT, NP_REGMR, NP_KINDS };

typedef struct net_probe {
  tpx_net_t *base;
  tpx_net_t net; /* what the endpoint gets */
  tpx_net_ops_t ops;
  int (*device)(void);
  int want; /* the device every call should see */
  int calls[NP_KINDS];
  int wrong[NP_KINDS];  /* calls that saw another device */
  int seen[NP_KINDS];   /* the device the last call saw */
  void *comm[NP_KINDS]; /* the last comm connect / accept returned */
  int stuck;            /* test() answers rc 2, not done, as TCPX once its peer is gone */
} net_probe_t;

static net_probe_t np_g;

static void np_note(int kind) {
  int d = np_g.device();
  __atomic_add_fetch(&np_g.calls[kind], 1, __ATOMIC_RELAXED);
  np_g.seen[kind] = d;
  if (d != np_g.want) __atomic_add_fetch(&np_g.wrong[kind], 1, __ATOMIC_RELAXED);
}

#define NP_B np_g.base
static int np_devices(tpx_net_t *n, int *nd) {
  (void)n;
  return NP_B->ops->devices(NP_B, nd);
}
static int np_props(tpx_net_t *n, int d, tpx_net_props_t *p) {
  (void)n;
  return NP_B->ops->get_properties(NP_B, d, p);
}
static int np_listen(tpx_net_t *n, int d, void *h, void **lc) {
  (void)n;
  np_note(NP_LISTEN);
  return NP_B->ops->listen(NP_B, d, h, lc);
}
static int np_connect(tpx_net_t *n, int d, void *h, void **sc, tpx_net_dev_handle_t *sd) {
  (void)n;
  np_note(NP_CONNECT);
  int rc = NP_B->ops->connect(NP_B, d, h, sc, sd);
  if (rc == 0 && *sc) np_g.comm[NP_CONNECT] = *sc;
  return rc;
}
static int np_accept(tpx_net_t *n, void *lc, void **rc, tpx_net_dev_handle_t *rd) {
  (void)n;
  np_note(NP_ACCEPT);
  int r = NP_B->ops->accept(NP_B, lc, rc, rd);
  if (r == 0 && *rc) np_g.comm[NP_ACCEPT] = *rc;
  return r;
}
static int np_reg(tpx_net_t *n, void *c, void *d, size_t s, int t, void **mh) {
  (void)n;
  np_note(NP_REGMR);
  return NP_B->ops->reg_mr(NP_B, c, d, s, t, mh);
}
static int np_dereg(tpx_net_t *n, void *c, void *mh) {
  (void)n;
  return NP_B->ops->dereg_mr(NP_B, c, mh);
}
static int np_isend(tpx_net_t *n, void *c, void *d, size_t s, int t, void *mh, void **r) {
  (void)n;
  return NP_B->ops->isend(NP_B, c, d, s, t, mh, r);
}
static int np_irecv(tpx_net_t *n, void *c, int k, void **d, size_t *s, int *t, void **mh,
                    void **r) {
  (void)n;
  return NP_B->ops->irecv(NP_B, c, k, d, s, t, mh, r);
}
static int np_iflush(tpx_net_t *n, void *c, int k, void **d, size_t *s, void **mh, void **r) {
  (void)n;
  return NP_B->ops->iflush(NP_B, c, k, d, s, mh, r);
}
static int np_test(tpx_net_t *n, void *r, int *done, size_t *s) {
  (void)n;
  if (__atomic_load_n(&np_g.stuck, __ATOMIC_ACQUIRE)) {
    *done = 0;
    return TPX_ESYSTEM;
  }
  return NP_B->ops->test(NP_B, r, done, s);
}
static int np_close_send(tpx_net_t *n, void *c) {
  (void)n;
  return NP_B->ops->close_send(NP_B, c);
}
static int np_close_recv(tpx_net_t *n, void *c) {
  (void)n;
  return NP_B->ops->close_recv(NP_B, c);
}
static int np_close_listen(tpx_net_t *n, void *c) {
  (void)n;
  return NP_B->ops->close_listen(NP_B, c);
}
static int np_dmr(tpx_net_t *n, void *c, void *mh, void **d) {
  (void)n;
  return NP_B->ops->get_device_mr(NP_B, c, mh, d);
}
static int np_consumed(tpx_net_t *n, void *c, int k, void *r) {
  (void)n;
  return NP_B->ops->irecv_consumed(NP_B, c, k, r);
}
static int np_dials(tpx_net_t *n, const void *h, struct sockaddr_storage *a, int *conns) {
  (void)n;
  return NP_B->ops->handle_dials(NP_B, h, a, conns);
}
static void np_destroy(tpx_net_t *n) {
  (void)n;
} /* the test closes the base itself */
#undef NP_B

/* Wrap `base` (still owned by the caller); returns the transport to hand to
 * tpx_endpoint_params.net. */
static tpx_net_t *net_probe_wrap(tpx_net_t *base, int (*device)(void), int want) {
  memset(&np_g, 0, sizeof(np_g));
  np_g.base = base;
  np_g.device = device;
  np_g.want = want;
  tpx_net_ops_t o = {np_devices,  np_props,      np_listen,     np_connect,      np_accept,
                     np_reg,      np_dereg,      np_isend,      np_irecv,        np_iflush,
                     np_test,     np_close_send, np_close_recv, np_close_listen, np_dmr,
                     np_consumed, np_destroy, np_dials, NULL, NULL, /* no keyed listen/connect */
                     NULL,        NULL,                                 /* no iovecs */
                     NULL};                                             /* no connect_abort */
  if (!base->ops->handle_dials) o.handle_dials = NULL;
  if (!base->ops->iflush) o.iflush = NULL;
  if (!base->ops->get_device_mr) o.get_device_mr = NULL;
  if (!base->ops->irecv_consumed) o.irecv_consumed = NULL;
  np_g.ops = o;
  np_g.net = *base;
  np_g.net.ops = &np_g.ops;
  return &np_g.net;
}

#endif
