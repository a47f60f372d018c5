/* The control connection's I/O (control.h). */
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/control.h"
#include "engine/core.h"
#include "engine/ctl_seal.h"

#define IN_INITIAL (64 * 1024)
#define CLOSE_LINGER_MS 1000

int tpx__ctl_set_nodelay(int fd) {
  int one = 1;
  return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

int tpx__ctl_set_keepalive(int fd, int timeout_ms) {
  /* Probes every second once idle for one (keepalive's unit): with
   * TCP_USER_TIMEOUT set, the kernel aborts at the first probe that finds
   * nothing received for timeout_ms, so the bound is timeout_ms plus up to
   * one second. */
  int one = 1, secs = 1, cnt = 127;
  unsigned int ut = (unsigned int)timeout_ms;
  if (setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &secs, sizeof(secs)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &secs, sizeof(secs)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut)) != 0)
    return tpx_err_quiet(TPX_ESYSTEM, "control socket keepalive: %s", strerror(errno));
  return 0;
}

/* The kernel gave up on the connection (tpx__ctl_set_keepalive): the peer's
 * host or the route to it is gone, not the peer's choice to close. */
static int ctl_errno(struct tpx_peer *p, int e, int sending) {
  if (e == ETIMEDOUT && p->ep->cfg.peer_timeout_ms > 0)
    return tpx_err_quiet(TPX_ETIMEDOUT, "peer %s: no sign of life for %d ms: the control connection timed out "
                         "(TCP keepalive, TPX_PEER_TIMEOUT_MS)", p->where, p->ep->cfg.peer_timeout_ms);
  if (e == ETIMEDOUT)
    return tpx_err_quiet(TPX_ETIMEDOUT, "peer %s: the control connection timed out (the kernel's retransmissions)",
                         p->where);
  if (sending) return tpx_err_quiet(TPX_ECLOSED, "peer %s: control send failed: %s", p->where, strerror(e));
  return tpx_err_quiet(TPX_ECLOSED, "%s", e ? "control connection reset" : "peer closed the control connection");
}

void tpx__ctl_refuse(tpx_endpoint_t *ep, int fd, int code, const char *why) {
  struct tpx__wbuf b = {0};
  if (tpx__wire_put_error(&b, code, ep->cfg.auth_key_len ? "refused" : why) == 0) {
    ssize_t n = send(fd, b.p, b.len, MSG_NOSIGNAL | MSG_DONTWAIT);
    (void)n; /* a fresh socket's buffer takes it; if not, the connector sees only the close */
  }
  tpx__wbuf_free(&b);
  close(fd);
}

void tpx__ctl_epoll_set(tpx_endpoint_t *ep, struct tpx_peer *p, uint32_t events) {
  if (p->fd < 0) {
    p->ev = 0;
    return;
  }
  struct epoll_event e = {.events = events, .data.ptr = p};
  if (events == 0) {
    if (p->ev) epoll_ctl(ep->epfd, EPOLL_CTL_DEL, p->fd, &e);
  } else if (p->ev == 0) {
    if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, p->fd, &e) != 0)
      TPX_WARN("endpoint %s: epoll add failed: %s", ep->name, strerror(errno));
  } else if (p->ev != events) {
    epoll_ctl(ep->epfd, EPOLL_CTL_MOD, p->fd, &e);
  }
  p->ev = events;
}

int tpx__ctl_flush(struct tpx_peer *p) {
  if (p->fd < 0) return TPX_ECLOSED;
  if (p->seal) { /* TPX_ENCRYPT: the frames appended since become records */
    int rc = tpx__ctl_seal_out(p->seal, &p->out);
    if (rc) return rc;
  }
  while (p->out_off < p->out.len) {
    ssize_t n = send(p->fd, p->out.p + p->out_off, p->out.len - p->out_off, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) {
      p->out_off += (size_t)n;
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
      if (p->out.len - p->out_off > p->ep->cfg.max_ctl_out_bytes)
        return tpx_err_quiet(TPX_EAGAIN, "peer %s: does not read its control connection: %zu bytes waiting "
                             "(TPX_MAX_CTL_OUT_BYTES=%zu)", p->where, p->out.len - p->out_off,
                             p->ep->cfg.max_ctl_out_bytes);
      if (!(p->ev & EPOLLOUT)) tpx__ctl_epoll_set(p->ep, p, p->ev | EPOLLOUT);
      return 0;
    }
    return ctl_errno(p, errno, 1);
  }
  p->out_off = 0;
  p->out.len = 0;
  if (p->seal) tpx__ctl_seal_out_sent(p->seal);
  if (p->ev & EPOLLOUT && p->state != P_CONNECTING) tpx__ctl_epoll_set(p->ep, p, p->ev & ~(uint32_t)EPOLLOUT);
  return 0;
}

int tpx__ctl_send(struct tpx_peer *p, int rc) {
  if (rc == 0) rc = tpx__ctl_flush(p);
  return rc;
}

/* Room for the frame being read. Before the peer is ready, buffering is
 * bounded (TPX_MAX_PREAUTH_BYTES): before the handshake a larger frame
 * fails the peer; during transport setup (frames of an already-ready side
 * wait) reading stops when the buffer is full and resumes once ready. */
static int in_want(struct tpx_peer *p, size_t *want) {
  size_t pre = p->ep->cfg.max_preauth_bytes;
  int setup = tpx__peer_in_setup(p->state);
  struct tpx__wire_frame f;
  *want = setup ? pre : IN_INITIAL;
  if (p->in_len < WIRE_HDR_BYTES || tpx__wire_frame_parse(p->in, p->in_len, &f) != 0) return 0;
  size_t frame = WIRE_HDR_BYTES + (size_t)f.len;
  if (setup && frame > pre && p->state != P_NET_SETUP)
    return tpx_err_quiet(TPX_EPROTO, "peer %s: a frame of %zu bytes before the handshake (TPX_MAX_PREAUTH_BYTES=%zu)",
                         p->where, frame, pre);
  if (!setup && frame > *want) *want = frame;
  return 0;
}

int tpx__ctl_read(struct tpx_peer *p) {
  if (p->fd < 0) return TPX_ECLOSED;
  size_t want;
  int rc = in_want(p, &want);
  if (rc) return rc;
  if (p->in_cap < want) {
    uint8_t *n = realloc(p->in, want);
    if (!n) return tpx_err_quiet(TPX_ENOMEM, "peer %s: out of memory for control input", p->where);
    p->in = n;
    p->in_cap = want;
  }
  if (p->in_len == p->in_cap) { /* full during transport setup: stop reading until ready */
    tpx__ctl_epoll_set(p->ep, p, p->ev & ~(uint32_t)EPOLLIN);
    return 0;
  }
  for (;;) {
    uint8_t *to = p->in + p->in_len;
    size_t room = p->in_cap - p->in_len;
    if (p->seal && tpx__ctl_seal_in_on(p->seal) && (rc = tpx__ctl_seal_room(p->seal, &to, &room)) != 0) return rc;
    ssize_t n = recv(p->fd, to, room, MSG_DONTWAIT);
    if (n > 0 && to != p->in + p->in_len) { /* records: open them into p->in */
      if ((rc = tpx__ctl_seal_got(p->seal, (size_t)n, &p->in, &p->in_len, &p->in_cap)) != 0)
        return tpx_err_quiet(rc, "peer %s: %s", p->where, tpx_last_error());
      p->live.rx = 1;
      return (int)(n > 0x7fffffff ? 0x7fffffff : n);
    }
    if (n > 0) {
      p->in_len += (size_t)n;
      p->live.rx = 1; /* a sign of life (live.h) */
      return (int)(n > 0x7fffffff ? 0x7fffffff : n);
    }
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return 0;
    /* EOF or reset */
    int e = n < 0 ? errno : 0;
    p->eof = 1;
    (void)tpx__ctl_flush(p);
    tpx__ctl_epoll_set(p->ep, p, 0);
    close(p->fd);
    p->fd = -1;
    return ctl_errno(p, e, 0);
  }
}

static void closing_add(tpx_endpoint_t *ep, int fd) {
  if (ep->nclosing == ep->closing_cap) {
    int n = ep->closing_cap ? ep->closing_cap * 2 : 16;
    struct tpx__closing_fd *c = realloc(ep->closing, (size_t)n * sizeof(*c));
    if (!c) {
      close(fd);
      return;
    }
    ep->closing = c;
    ep->closing_cap = n;
  }
  ep->closing[ep->nclosing].fd = fd;
  ep->closing[ep->nclosing].deadline = tpx__now_ns() + tpx__ms_to_ns(CLOSE_LINGER_MS);
  ep->nclosing++;
}

void tpx__ctl_drop(struct tpx_peer *p, int graceful) {
  if (p->fd < 0) return;
  tpx_endpoint_t *ep = p->ep;
  /* Flush before leaving the epoll set: a flush that meets a full socket
   * buffer arms EPOLLOUT, and an fd left armed in the closing list would
   * wake the progress thread for a peer that may be freed by then. */
  if (graceful && !p->eof) (void)tpx__ctl_flush(p);
  tpx__ctl_epoll_set(ep, p, 0);
  if (graceful && !p->eof) {
    shutdown(p->fd, SHUT_WR);
    closing_add(ep, p->fd);
  } else {
    close(p->fd);
  }
  p->fd = -1;
}

void tpx__ctl_closing_step(tpx_endpoint_t *ep, uint64_t now, int force) {
  for (int i = 0; i < ep->nclosing;) {
    int fd = ep->closing[i].fd, done = force;
    char buf[4096];
    while (!done) {
      ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        done = now > ep->closing[i].deadline;
        break;
      }
      done = 1; /* EOF or error */
    }
    if (done) {
      close(fd);
      ep->closing[i] = ep->closing[--ep->nclosing];
    } else {
      i++;
    }
  }
}
