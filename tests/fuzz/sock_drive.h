/* The transport's receive side (src/sock/comm.c) driven in-process, one
 * thread, no I/O threads: a recv comm whose sockets are socketpairs, the
 * harness writing the peer's end, and tpx__sock_conn_progress run on each
 * socket where an I/O thread would run it. What the I/O pool would do on
 * a kick (irecv kicks a socket that stopped for a receive not yet posted)
 * the harness does by running every socket again. */
#ifndef TPX_FUZZ_SOCK_DRIVE_H
#define TPX_FUZZ_SOCK_DRIVE_H

#include <errno.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/socket.h>
#include <unistd.h>

#include "fuzz.h"
#include "sock/sock.h"
#include "sock/wire.h"
#include "tpx/config.h"
#include "tpx/error.h"
#include "tpx/net.h"

#define DRIVE_MAX_NSOCKS 4
#define DRIVE_SETTLE_PASSES 20000 /* bounded: a pass with nothing to do ends it */

struct drive {
  tpx_net_t *net;
  tpx_sock_comm_t *m;
  void *comm; /* its token */
  int nsocks;
  int peer[DRIVE_MAX_NSOCKS + 1]; /* the peer's ends; -1 closed */
  char scratch[TPX_SOCK_SCRATCH];
};

enum { DRIVE_DEFAULT = 0, DRIVE_STRICT, DRIVE_UNPACK };

/* The built-in transport on lo in one of its modes (DRIVE_UNPACK: unpack
 * mode, the TCPX receive contract, strict rules, host-memory bounce pages
 * of the smallest pool), opened once per process. */
static inline tpx_net_t *drive_net(int mode) {
  static tpx_net_t *nets[3];
  if (nets[mode]) return nets[mode];
  setenv("TPX_SOCKET_IFNAME", "lo", 1);
  tpx_config_t cfg;
  FUZZ_CHECK(tpx_config_from_env(&cfg) == 0);
  cfg.sock_strict = mode == DRIVE_STRICT;
  cfg.sock_unpack = mode == DRIVE_UNPACK;
  cfg.sock_bounce_bytes = TPX_SOCK_UNPACK_MAX_MSG;
  FUZZ_CHECK(tpx_net_open_builtin(&cfg, &nets[mode]) == 0);
  return nets[mode];
}

static inline void drive_open(struct drive *d, int mode, int nsocks) {
  d->net = drive_net(mode);
  d->nsocks = nsocks;
  int fds[DRIVE_MAX_NSOCKS + 1];
  for (int i = 0; i <= nsocks; i++) {
    int sv[2];
    FUZZ_CHECK(socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) == 0);
    fds[i] = sv[0];
    d->peer[i] = sv[1];
  }
  tpx_sock_net_t *sn = d->net->impl;
  FUZZ_CHECK(tpx__sock_comm_new(sn, TPX_SK_RECV, 0, nsocks, 1, fds, "fuzz", &d->m) == 0);
  d->m->token = tpx__sock_reg_add(&sn->reg, TPX_SK_RECV, d->m);
  FUZZ_CHECK(d->m->token != 0);
  d->comm = (void *)(uintptr_t)d->m->token;
  /* No kicks from socket to socket (unpack admission): `closing` stops
   * them, as at teardown, and nothing else; drive_settle runs every
   * socket anyway. comm_break kicks none either: the comm is not live. */
  atomic_store(&d->m->closing, 1);
}

static inline void drive_close(struct drive *d) {
  tpx_sock_net_t *sn = d->net->impl;
  tpx__sock_reg_del(&sn->reg, d->m->token);
  tpx__sock_comm_destroy(d->m);
  for (int i = 0; i <= d->nsocks; i++)
    if (d->peer[i] >= 0) close(d->peer[i]);
}

/* One I/O-thread visit of socket i; 1 when it wants another. */
static inline int drive_run(struct drive *d, int i) {
  return tpx__sock_conn_progress(&d->m->conns[i], d->scratch);
}

/* Every socket, until a whole pass finds nothing more to do. */
static inline void drive_settle(struct drive *d) {
  for (int pass = 0; pass < DRIVE_SETTLE_PASSES; pass++) {
    int again = 0;
    for (int i = 0; i <= d->nsocks; i++)
      again |= drive_run(d, i);
    if (!again) {
      /* once more: a socket may have broken the comm for the others */
      for (int i = 0; i <= d->nsocks; i++)
        again |= drive_run(d, i);
      if (!again) return;
    }
  }
  FUZZ_CHECK(0 && "the receive side kept asking to run");
}

/* Post a receive of cap bytes into buf: its request, or NULL (ring full). */
static inline void *drive_post(struct drive *d, void *buf, size_t cap) {
  /* The sockets irecv would kick: taken over here (drive_settle runs them). */
  for (int i = 0; i <= d->nsocks; i++)
    atomic_store(&d->m->conns[i].wait_post, 0);
  void *req = NULL;
  int tag = 0;
  void *mh = NULL;
  int rc = tpx__sock_irecv(d->net, d->comm, 1, &buf, &cap, &tag, &mh, &req);
  FUZZ_CHECK(rc == 0);
  return req;
}

/* The same into a list of pieces (isendv / irecvv, default mode only). */
static inline void *drive_postv(struct drive *d, const struct iovec *iov, int cnt) {
  for (int i = 0; i <= d->nsocks; i++)
    atomic_store(&d->m->conns[i].wait_post, 0);
  void *req = NULL;
  int rc = tpx__sock_irecvv(d->net, d->comm, iov, cnt, 0, NULL, &req);
  FUZZ_CHECK(rc == 0);
  return req;
}

/* Bytes to the peer's end of socket i, as far as it takes them: what it took. */
static inline size_t drive_write(struct drive *d, int i, const void *p, size_t n) {
  if (d->peer[i] < 0 || n == 0) return 0;
  ssize_t k = send(d->peer[i], p, n, MSG_NOSIGNAL | MSG_DONTWAIT);
  return k > 0 ? (size_t)k : 0;
}

/* The receives that can no longer come, by comm.c's rule (recv_fail_lost):
 * once a socket ended, and no socket is still reading, those before the
 * smallest message a socket stopped at. Returns that bound (0: none). */
static inline uint64_t drive_lost_below(struct drive *d) {
  if (atomic_load(&d->m->ndead) == 0) return 0;
  uint64_t lim = UINT64_MAX;
  for (int i = 0; i <= d->nsocks; i++) {
    uint64_t p = atomic_load(&d->m->conns[i].pos);
    if (p == 0) return 0; /* reading */
    if (p != UINT64_MAX && p - 1 < lim) lim = p - 1;
  }
  return lim;
}

static inline void drive_eof(struct drive *d, int i) {
  if (d->peer[i] >= 0) close(d->peer[i]);
  d->peer[i] = -1;
}

#endif
