/* The endpoint's control listener (listen.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "common/ports.h"
#include "engine/admit.h"
#include "engine/control.h"
#include "engine/core.h"
#include "engine/listen.h"
#include "engine/peer.h"

int tpx__listen_open(tpx_endpoint_t *ep, const char *host, int port_req) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
  struct addrinfo *ai = NULL;
  int g = getaddrinfo(host ? host : "0.0.0.0", NULL, &hints, &ai);
  if (g != 0 || !ai)
    return tpx_err(TPX_EINVAL, "endpoint %s: listen address '%s': %s", ep->name, host ? host : "0.0.0.0",
                   gai_strerror(g));
  int first, count;
  if (port_req > 0) first = port_req, count = 1;
  else if (port_req == TPX_PORT_EPHEMERAL) first = 0, count = 1;
  else first = ep->cfg.port_base + (ep->gpu > 0 ? ep->gpu : 0), count = ep->cfg.port_span;
  int rc = TPX_EADDRINUSE, fd = -1, tried = 0;
  for (int i = 0; i < count; i++) {
    int port = first + i;
    if (port > 65535) break;
    tried++;
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      rc = tpx_err(TPX_ESYSTEM, "endpoint %s: socket: %s", ep->name, strerror(errno));
      break;
    }
    int e = tpx__bind_port(fd, ai->ai_addr, ai->ai_addrlen, port);
    if (e == 0 && listen(fd, 256) != 0) e = errno;
    if (e == 0) {
      rc = 0;
      break;
    }
    close(fd);
    fd = -1;
    if (e != EADDRINUSE) {
      rc = tpx_err(TPX_ESYSTEM, "endpoint %s: bind/listen on port %d: %s", ep->name, port, strerror(e));
      break;
    }
  }
  freeaddrinfo(ai);
  if (rc == TPX_EADDRINUSE && count == 1 && port_req > 0)
    return tpx_err(TPX_EADDRINUSE, "endpoint %s: port %d is in use (another program listens there: "
                   "`ss -ltnp 'sport = :%d'` names it); pick another port", ep->name, first, first);
  if (rc == TPX_EADDRINUSE)
    return tpx_err(TPX_EADDRINUSE, "endpoint %s: ports %d..%d are all in use (TPX_PORT_BASE + gpu, TPX_PORT_SPAN=%d)",
                   ep->name, first, first + count - 1, ep->cfg.port_span);
  if (rc) return rc;
  struct sockaddr_storage sa;
  socklen_t sl = sizeof(sa);
  getsockname(fd, (struct sockaddr *)&sa, &sl);
  ep->port = ntohs(sa.ss_family == AF_INET ? ((struct sockaddr_in *)&sa)->sin_port
                                            : ((struct sockaddr_in6 *)&sa)->sin6_port);
  ep->listen_fd = fd;
  snprintf(ep->listen_host, sizeof(ep->listen_host), "%s", host ? host : "");
  struct epoll_event e = {.events = EPOLLIN, .data.ptr = &ep->listen_fd};
  if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, fd, &e) != 0)
    return tpx_err(TPX_ESYSTEM, "endpoint %s: epoll: %s", ep->name, strerror(errno));
  /* Moved past a busy port: peers dialling the usual one would not find us
   * (and would reach whatever holds it). Say so, with the port to dial. */
  if (port_req == 0 && ep->port != first)
    TPX_WARN("endpoint %s: control port %d is in use; listening on port %d instead: peers must dial port %d "
             "(tpx-bench client HOST --port %d; or free port %d)", ep->name, first, ep->port, ep->port, ep->port,
             first);
  else
    TPX_INFO("endpoint %s: control port %d%s (after %d attempt(s))", ep->name, ep->port,
             port_req == 0 ? " (port base + gpu)" : "", tried);
  return 0;
}

void tpx__listen_fmt_addr(const struct sockaddr *sa, char *out, size_t cap) {
  char h[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, h, sizeof(h));
    port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
    snprintf(out, cap, "%s:%d", h, port);
  } else {
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, h, sizeof(h));
    port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    snprintf(out, cap, "[%s]:%d", h, port);
  }
}

/* Log refused (or evicted) connections at most once per second, with a count. */
#define ACCEPT_LOG_NS 1000000000ull
/* Out of fds: the listener stays readable, so stop watching it this long. */
#define ACCEPT_PAUSE_NS 100000000ull

static void refused(tpx_endpoint_t *ep, const char *why) {
  uint64_t now = tpx__now_ns();
  ep->accept_refused++;
  if (now < ep->accept_log_next) return;
  TPX_WARN("endpoint %s: %llu control connection(s) refused or evicted in the last second: %s", ep->name,
           (unsigned long long)ep->accept_refused, why);
  ep->accept_refused = 0;
  ep->accept_log_next = now + ACCEPT_LOG_NS;
}

static void listen_watch(tpx_endpoint_t *ep, uint32_t events) {
  struct epoll_event e = {.events = events, .data.ptr = &ep->listen_fd};
  if (epoll_ctl(ep->epfd, EPOLL_CTL_MOD, ep->listen_fd, &e) != 0)
    TPX_WARN("endpoint %s: epoll (listener): %s", ep->name, strerror(errno));
}

void tpx__listen_resume(tpx_endpoint_t *ep, uint64_t now) {
  if (!ep->accept_resume || now < ep->accept_resume) return;
  ep->accept_resume = 0;
  listen_watch(ep, EPOLLIN);
}

static void accept_failed(tpx_endpoint_t *ep, int e) {
  if (e == EAGAIN || e == EWOULDBLOCK || e == EINTR || e == ECONNABORTED) return;
  if (e == EMFILE || e == ENFILE || e == ENOBUFS || e == ENOMEM) {
    /* Pending connections wait in the kernel's backlog meanwhile. */
    ep->accept_resume = tpx__now_ns() + ACCEPT_PAUSE_NS;
    listen_watch(ep, 0);
  }
  refused(ep, strerror(e));
}

int tpx__listen_accept(tpx_endpoint_t *ep) {
  int did = 0;
  for (int i = 0; i < 16 && !ep->accept_resume; i++) {
    struct sockaddr_storage sa;
    socklen_t sl = sizeof(sa);
    int fd = accept4(ep->listen_fd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      accept_failed(ep, errno);
      break;
    }
    did++;
    struct tpx_src src;
    tpx__src_of((struct sockaddr *)&sa, &src);
    const char *why;
    int ok = tpx__admit(ep, &src, &why);
    if (why) refused(ep, why);
    if (!ok) {
      if (why) tpx__ctl_refuse(ep, fd, TPX_EAGAIN, why);
      else close(fd);
      continue;
    }
    tpx__ctl_set_nodelay(fd);
    char where[96];
    tpx__listen_fmt_addr((struct sockaddr *)&sa, where, sizeof(where));
    struct tpx_peer *p = tpx__peer_new(ep, fd, 1, where);
    if (!p) {
      close(fd);
      TPX_WARN("endpoint %s: out of memory for incoming peer %s", ep->name, where);
      continue;
    }
    p->src = src;
    TPX_DEBUG("endpoint %s: control connection from %s", ep->name, where);
  }
  return did;
}
