/* Helpers shared by the loader tests: drive a tpx_net_t through a
 * connection and a transfer, with every wait bounded in count and time. */
#ifndef TPX_TEST_LOADER_UTIL_H
#define TPX_TEST_LOADER_UTIL_H

#include <stdint.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "testutil.h"
#include "tpx/error.h"
#include "tpx/net.h"

#define TL_DEADLINE_NS (20ull * 1000 * 1000 * 1000)
#define TL_MAX_SPINS 2000000

static inline uint64_t tl_now(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* A connected pair on device `dev`. Both dev-handle storages are optional. */
struct tl_pair {
  void *lc, *sc, *rc;
  char handle[TPX_NET_HANDLE_BYTES];
  tpx_net_dev_handle_t sdev, rdev;
};

/* Connects with retries (same handle buffer, same listen comm, same device
 * storage every time, as NCCL does). Returns 0 or the first error. */
static inline int tl_connect(tpx_net_t *net, int dev, struct tl_pair *p, int use_rdev) {
  memset(p, 0, sizeof(*p));
  int rc = net->ops->listen(net, dev, p->handle, &p->lc);
  if (rc) return rc;
  uint64_t end = tl_now() + TL_DEADLINE_NS;
  for (int i = 0; i < TL_MAX_SPINS && (p->sc == NULL || p->rc == NULL); i++) {
    if (p->sc == NULL && (rc = net->ops->connect(net, dev, p->handle, &p->sc, &p->sdev)) != 0)
      return rc;
    if (p->rc == NULL &&
        (rc = net->ops->accept(net, p->lc, &p->rc, use_rdev ? &p->rdev : NULL)) != 0)
      return rc;
    if (tl_now() > end) return TPX_ETIMEDOUT;
    if (i > 100) usleep(100);
  }
  return p->sc && p->rc ? 0 : TPX_ETIMEDOUT;
}

static inline void tl_close(tpx_net_t *net, struct tl_pair *p) {
  if (p->sc) assert_int_equal(net->ops->close_send(net, p->sc), 0);
  if (p->rc) assert_int_equal(net->ops->close_recv(net, p->rc), 0);
  if (p->lc) assert_int_equal(net->ops->close_listen(net, p->lc), 0);
  p->sc = p->rc = p->lc = NULL;
}

/* Tests a request until done (bounded). Returns the test result. */
static inline int tl_wait(tpx_net_t *net, void *req, size_t *size) {
  uint64_t end = tl_now() + TL_DEADLINE_NS;
  for (int i = 0; i < TL_MAX_SPINS; i++) {
    int done = 0;
    int rc = net->ops->test(net, req, &done, size);
    if (rc || done) return rc;
    if (tl_now() > end) return TPX_ETIMEDOUT;
    if (i > 100) usleep(50);
  }
  return TPX_ETIMEDOUT;
}

/* Posts a send that may meet back-pressure (request NULL) a bounded number of times. */
static inline int tl_isend(tpx_net_t *net, void *sc, void *buf, size_t len, int tag, void *mh,
                           void **req) {
  for (int i = 0; i < TL_MAX_SPINS; i++) {
    int rc = net->ops->isend(net, sc, buf, len, tag, mh, req);
    if (rc || *req) return rc;
    usleep(50);
  }
  return TPX_ETIMEDOUT;
}

static inline int tl_irecv(tpx_net_t *net, void *rc, void *buf, size_t len, int tag, void *mh,
                           void **req) {
  void *data[1] = {buf};
  size_t sizes[1] = {len};
  int tags[1] = {tag};
  void *mhs[1] = {mh};
  for (int i = 0; i < TL_MAX_SPINS; i++) {
    int r = net->ops->irecv(net, rc, 1, data, sizes, tags, mhs, req);
    if (r || *req) return r;
    usleep(50);
  }
  return TPX_ETIMEDOUT;
}

/* One message of `len` pattern bytes from sc to rc (receive buffer rlen >=
 * len); checks the bytes and the reported sizes. */
static inline void tl_transfer(tpx_net_t *net, struct tl_pair *p, size_t len, size_t rlen,
                               uint32_t seed) {
  uint8_t *s = malloc(len ? len : 1), *r = malloc(rlen ? rlen : 1);
  assert_non_null(s);
  assert_non_null(r);
  tu_fill(s, len, seed, 0);
  memset(r, 0xee, rlen);
  void *smh = NULL, *rmh = NULL;
  assert_int_equal(net->ops->reg_mr(net, p->sc, s, len, TPX_PTR_HOST, &smh), 0);
  assert_int_equal(net->ops->reg_mr(net, p->rc, r, rlen, TPX_PTR_HOST, &rmh), 0);
  void *rreq = NULL, *sreq = NULL;
  assert_int_equal(tl_irecv(net, p->rc, r, rlen, 7, rmh, &rreq), 0);
  assert_int_equal(tl_isend(net, p->sc, s, len, 7, smh, &sreq), 0);
  size_t ssize = SIZE_MAX, rsize = SIZE_MAX;
  assert_int_equal(tl_wait(net, sreq, &ssize), 0);
  assert_int_equal(tl_wait(net, rreq, &rsize), 0);
  assert_int_equal(rsize, len);
  assert_int_equal(tu_check(r, len, seed, 0), SIZE_MAX);
  assert_int_equal(net->ops->dereg_mr(net, p->sc, smh), 0);
  assert_int_equal(net->ops->dereg_mr(net, p->rc, rmh), 0);
  free(s);
  free(r);
}

#endif
