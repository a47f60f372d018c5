/* Setup readiness of the built-in transport (sock.h, "setup readiness").
 *
 * The engine calls accept on every listen comm of every peer in setup, on
 * every progress pass: with a thousand peers in setup that was two thousand
 * accept() calls a pass finding nothing, a core's worth. One level-triggered
 * epoll set per net watches every listen socket and every accepted
 * connection still owing its hello; a refresh (at most once per
 * READY_REFRESH_NS, by whichever accept call comes first) marks the listen
 * comms with something to read, and accept touches the sockets of marked
 * ones only. The refresh and the freeing of a listen comm hold the same
 * mutex, so a mark never lands on a freed comm (a net may be shared by
 * endpoints of several threads). */
#define _GNU_SOURCE
#include <errno.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "sock/sock.h"

#define READY_REFRESH_NS 100000ull /* 100 us: a new connection waits at most this for its accept */
#define READY_EVENTS 256
#define READY_ROUNDS 64 /* bounds one refresh: 16k ready sockets */

int tpx__sock_ready_init(tpx_sock_ready_t *r) {
  r->ep = epoll_create1(EPOLL_CLOEXEC);
  if (r->ep < 0) return tpx_err_quiet(TPX_ESYSTEM, "sock: epoll_create1: %s", strerror(errno));
  pthread_mutex_init(&r->mu, NULL);
  atomic_store(&r->polled, 0);
  return 0;
}

void tpx__sock_ready_fini(tpx_sock_ready_t *r) {
  if (r->ep < 0) return;
  close(r->ep);
  r->ep = -1;
  pthread_mutex_destroy(&r->mu);
}

int tpx__sock_ready_watch(tpx_sock_ready_t *r, int fd, uint64_t token) {
  struct epoll_event e = {.events = EPOLLIN, .data.u64 = token};
  if (epoll_ctl(r->ep, EPOLL_CTL_ADD, fd, &e) != 0)
    return tpx_err_quiet(TPX_ESYSTEM, "sock: epoll (setup readiness): %s", strerror(errno));
  return 0;
}

void tpx__sock_ready_unwatch(tpx_sock_ready_t *r, int fd) {
  if (epoll_ctl(r->ep, EPOLL_CTL_DEL, fd, NULL) != 0)
    TPX_DEBUG("sock: epoll del (setup readiness): %s", strerror(errno));
}

void tpx__sock_ready_refresh(tpx_sock_net_t *sn, void (*mark)(void *listen)) {
  tpx_sock_ready_t *r = &sn->ready;
  uint64_t now = tpx__now_ns();
  if (now - atomic_load(&r->polled) < READY_REFRESH_NS) return;
  if (pthread_mutex_trylock(&r->mu) != 0) return; /* another thread refreshes now */
  atomic_store(&r->polled, now);
  struct epoll_event ev[READY_EVENTS];
  int n = READY_EVENTS;
  for (int round = 0; round < READY_ROUNDS && n == READY_EVENTS; round++) {
    n = epoll_wait(r->ep, ev, READY_EVENTS, 0);
    for (int i = 0; i < n; i++) {
      void *l = tpx__sock_reg_get(&sn->reg, ev[i].data.u64, TPX_SK_LISTEN, NULL);
      if (l) mark(l);
    }
  }
  pthread_mutex_unlock(&r->mu);
}
