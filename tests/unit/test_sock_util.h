/* Helpers shared by the built-in transport's tests (tests/unit/test_sock_*.c):
 * open the transport on lo, connect a send/recv comm pair with the retry loop
 * NCCL uses, and wait on requests with bounded loops. Header-only so each
 * test stays one executable. */
#ifndef TPX_TEST_SOCK_UTIL_H
#define TPX_TEST_SOCK_UTIL_H

#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/util.h"
#include "testutil.h"
#include "tpx/config.h"
#include "tpx/error.h"
#include "tpx/net.h"

#define TS_TIMEOUT_MS 20000

static inline tpx_net_t *ts_open_cfg(const tpx_config_t *cfg) {
  tpx_net_t *net = NULL;
  int rc = tpx_net_open_builtin(cfg, &net);
  if (rc != 0) fail_msg("tpx_net_open_builtin: %d %s", rc, tpx_last_error());
  assert_non_null(net);
  return net;
}

static inline void ts_cfg(tpx_config_t *cfg, int strict, int nsocks, int nthreads) {
  tpx_config_from_env(cfg);
  cfg->sock_strict = strict;
  if (nsocks > 0) cfg->nsocks = nsocks;
  if (nthreads > 0) cfg->nthreads = nthreads;
}

static inline tpx_net_t *ts_open(int strict, int nsocks, int nthreads) {
  tpx_config_t cfg;
  ts_cfg(&cfg, strict, nsocks, nthreads);
  return ts_open_cfg(&cfg);
}

/* listen on dev 0, then alternate connect/accept (same handle buffer, same
 * listen comm) until both ends are up. Closes the listen comm. */
static inline void ts_pair(tpx_net_t *net, void **send, void **recv) {
  unsigned char *handle = calloc(1, TPX_NET_HANDLE_BYTES);
  assert_non_null(handle);
  void *lc = NULL;
  assert_int_equal(net->ops->listen(net, 0, handle, &lc), 0);
  assert_non_null(lc);
  *send = *recv = NULL;
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  while ((*send == NULL || *recv == NULL) && tpx__now_ns() < end) {
    if (*send == NULL) assert_int_equal(net->ops->connect(net, 0, handle, send, NULL), 0);
    if (*recv == NULL) assert_int_equal(net->ops->accept(net, lc, recv, NULL), 0);
  }
  assert_non_null(*send);
  assert_non_null(*recv);
  assert_int_equal(net->ops->close_listen(net, lc), 0);
  free(handle);
}

/* ts_pair's other end: close both comms (each must succeed) and the
 * transport. */
static inline void ts_close_pair(tpx_net_t *net, void *send, void *recv) {
  assert_int_equal(net->ops->close_send(net, send), 0);
  assert_int_equal(net->ops->close_recv(net, recv), 0);
  net->ops->destroy(net);
}

/* Test until done or error or timeout. Returns the test rc (TPX_ETIMEDOUT on
 * timeout); *size gets the reported size when sizes are written. */
static inline int ts_wait(tpx_net_t *net, void *req, size_t *size) {
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  for (;;) {
    int done = 0;
    int rc = net->ops->test(net, req, &done, size);
    if (rc != 0) return rc;
    if (done) return 0;
    if (tpx__now_ns() > end) return TPX_ETIMEDOUT;
  }
}

/* One message each way of an established pair: posts, then drives both. */
static inline void ts_xfer(tpx_net_t *net, void *s, void *r, size_t ssize, size_t rsize,
                           uint32_t seed) {
  unsigned char *sb = malloc(ssize ? ssize : 1), *rb = malloc(rsize ? rsize : 1);
  assert_non_null(sb);
  assert_non_null(rb);
  tu_fill(sb, ssize, seed, 0);
  memset(rb, 0xEE, rsize ? rsize : 1);
  void *sreq = NULL, *rreq = NULL;
  void *rdata[1] = {rb};
  size_t rsz[1] = {rsize};
  int tag[1] = {0};
  assert_int_equal(net->ops->irecv(net, r, 1, rdata, rsz, tag, NULL, &rreq), 0);
  assert_non_null(rreq);
  assert_int_equal(net->ops->isend(net, s, sb, ssize, 0, NULL, &sreq), 0);
  assert_non_null(sreq);
  size_t got_s = 0, got_r = 0;
  assert_int_equal(ts_wait(net, sreq, &got_s), 0);
  assert_int_equal(ts_wait(net, rreq, &got_r), 0);
  assert_int_equal(got_s, ssize);
  assert_int_equal(got_r, ssize);
  assert_int_equal(tu_check(rb, ssize, seed, 0), SIZE_MAX);
  free(sb);
  free(rb);
}

#endif
