/* The control connection's connect and its retries (redial.h). */
#include "engine/redial.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <unistd.h>

#include "common/log.h"
#include "common/ports.h"
#include "common/retry.h"
#include "common/util.h"
#include "engine/control.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/peer.h"

static void give_up(struct tpx_peer *p, int err) {
  char causes[256];
  tpx__retry_causes(&p->dial, causes, sizeof(causes));
  if (tpx__retry_all_were(&p->dial, ECONNREFUSED))
    tpx__peer_fail(p, TPX_ECLOSED, "peer %s: nothing listens there: %s: is the server running, on this port?",
                   p->where, causes);
  else if (p->dial.failed <= 1)
    tpx__peer_fail(p, TPX_ECLOSED, "peer %s: control connect failed: %s", p->where, strerror(err));
  else
    tpx__peer_fail(p, TPX_ECLOSED, "peer %s: control connect failed after %d attempts: %s", p->where,
                   p->dial.failed, causes);
}

/* A new socket and its non-blocking connect; 0, or the errno it failed with. */
static int attempt(struct tpx_peer *p) {
  int fd = socket(p->dial_sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return errno;
  tpx__ctl_set_nodelay(fd);
  tpx__set_reuseaddr(fd); /* its TIME_WAIT must not hold the port (common/ports.c) */
  if (connect(fd, (struct sockaddr *)&p->dial_sa, p->dial_len) != 0 && errno != EINPROGRESS) {
    int e = errno;
    close(fd);
    return e;
  }
  p->fd = fd;
  tpx__ctl_epoll_set(p->ep, p, EPOLLIN | EPOLLOUT); /* writable: connected or failed */
  return 0;
}

void tpx__redial_failed(struct tpx_peer *p, int err) {
  tpx_endpoint_t *ep = p->ep;
  if (p->fd >= 0) {
    tpx__ctl_epoll_set(ep, p, 0);
    close(p->fd);
    p->fd = -1;
  }
  int again = p->dial_retries &&
              tpx__retry_failed(&p->dial, err, ep->cfg.socket_retry_cnt, ep->cfg.socket_retry_sleep_msec, tpx__now_ns());
  if (!p->dial_retries) (void)tpx__retry_failed(&p->dial, err, 0, 0, 0); /* recorded, no retry */
  if (!again) {
    give_up(p, err);
    return;
  }
  /* Told at once, not only at the deadline: a server not started (yet), or
   * another port. The retries go on (a server starting beside us). */
  if (err == ECONNREFUSED && p->dial.failed == 1)
    TPX_WARN("peer %s: nothing listens there (connection refused): is the server running, on this port? "
             "Retrying until TPX_CONNECT_TIMEOUT_MS (%d ms) ends", p->where, ep->cfg.connect_timeout_ms);
  /* Past the setup deadline the peer fails there (fail.c), with the causes. */
  TPX_DEBUG("peer %s: control connect: %s; retry %d in %llu ms", p->where, strerror(err), p->dial.failed,
            (unsigned long long)((p->dial.next_ns - tpx__now_ns()) / 1000000ull));
}

int tpx__redial_step(struct tpx_peer *p, uint64_t now) {
  if (p->state != P_CONNECTING || p->fd >= 0 || now < p->dial.next_ns) return 0;
  int e = attempt(p);
  if (e) tpx__redial_failed(p, e);
  return 1;
}

void tpx__redial_start(struct tpx_peer *p, const struct sockaddr *sa, socklen_t len, int retries) {
  memcpy(&p->dial_sa, sa, len);
  p->dial_len = len;
  p->dial_retries = retries;
  int e = attempt(p);
  if (e) tpx__redial_failed(p, e);
}
