/* The two-process side channel: a plain TCP connection that carries the
 * 128-byte net handles and barrier tags. Frames are a 4-byte big-endian
 * length and the payload; every wait is bounded. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "conformance.h"

#define SC_MAX_FRAME 65536u

static int split_hostport(const char *hp, char *host, size_t hcap, char *port, size_t pcap) {
  const char *colon = strrchr(hp, ':');
  if (!colon || colon == hp || colon[1] == '\0') return -1;
  size_t hl = (size_t)(colon - hp);
  const char *h = hp;
  if (h[0] == '[' && hl >= 2 && h[hl - 1] == ']') { /* [::1]:port */
    h++;
    hl -= 2;
  }
  if (hl + 1 > hcap || strlen(colon + 1) + 1 > pcap) return -1;
  memcpy(host, h, hl);
  host[hl] = '\0';
  strcpy(port, colon + 1);
  return 0;
}

static int resolve(const char *hostport, int passive, struct addrinfo **res) {
  char host[256], port[32];
  if (split_hostport(hostport, host, sizeof(host), port, sizeof(port)) != 0) {
    fprintf(stderr, "tpx-conformance: --peer wants HOST:PORT, got '%s'\n", hostport);
    return -1;
  }
  struct addrinfo hints;
  memset(&hints, 0, sizeof(hints));
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  int rc = getaddrinfo(host, port, &hints, res);
  if (rc != 0) {
    fprintf(stderr, "tpx-conformance: cannot resolve %s: %s\n", hostport, gai_strerror(rc));
    return -1;
  }
  return 0;
}

int cf_sc_listen(const char *hostport, int *lfd, int *port) {
  struct addrinfo *res = NULL;
  if (resolve(hostport, 1, &res) != 0) return -1;
  int fd = -1;
  for (struct addrinfo *a = res; a; a = a->ai_next) {
    fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    int one = 1;
    (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 4) == 0) break;
    close(fd);
    fd = -1;
  }
  freeaddrinfo(res);
  if (fd < 0) {
    fprintf(stderr, "tpx-conformance: cannot listen on %s: %s\n", hostport, strerror(errno));
    return -1;
  }
  struct sockaddr_storage ss;
  socklen_t sl = sizeof(ss);
  if (getsockname(fd, (struct sockaddr *)&ss, &sl) != 0) {
    close(fd);
    return -1;
  }
  *port = ss.ss_family == AF_INET6 ? ntohs(((struct sockaddr_in6 *)&ss)->sin6_port)
                                   : ntohs(((struct sockaddr_in *)&ss)->sin_port);
  *lfd = fd;
  return 0;
}

static int wait_fd(int fd, short ev, uint64_t deadline_ns) {
  for (;;) {
    uint64_t now = cf_now_ns();
    if (now >= deadline_ns) return -1;
    int ms = (int)((deadline_ns - now) / 1000000u) + 1;
    struct pollfd p = {.fd = fd, .events = ev};
    int rc = poll(&p, 1, ms);
    if (rc > 0) return 0;
    if (rc < 0 && errno != EINTR) return -1;
  }
}

int cf_sc_accept(int lfd, int timeout_ms) {
  if (wait_fd(lfd, POLLIN, cf_now_ns() + (uint64_t)timeout_ms * 1000000u) != 0) {
    fprintf(stderr, "tpx-conformance: no client on the side channel within %d ms\n", timeout_ms);
    return -1;
  }
  int fd = accept4(lfd, NULL, NULL, SOCK_CLOEXEC);
  if (fd < 0) return -1;
  int one = 1;
  (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
  return fd;
}

int cf_sc_connect(const char *hostport, int timeout_ms) {
  uint64_t deadline = cf_now_ns() + (uint64_t)timeout_ms * 1000000u;
  /* The server may not be listening yet: retry until the deadline. */
  while (cf_now_ns() < deadline) {
    struct addrinfo *res = NULL;
    if (resolve(hostport, 0, &res) != 0) return -1;
    for (struct addrinfo *a = res; a; a = a->ai_next) {
      int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        int one = 1;
        (void)setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        freeaddrinfo(res);
        return fd;
      }
      close(fd);
    }
    freeaddrinfo(res);
    struct timespec ts = {0, 100 * 1000 * 1000};
    nanosleep(&ts, NULL);
  }
  fprintf(stderr, "tpx-conformance: cannot reach the server at %s within %d ms\n", hostport,
          timeout_ms);
  return -1;
}

static int io_all(int fd, void *p, size_t len, int writing, uint64_t deadline) {
  unsigned char *b = p;
  size_t off = 0;
  while (off < len) {
    if (wait_fd(fd, writing ? POLLOUT : POLLIN, deadline) != 0) return -1;
    ssize_t r = writing ? send(fd, b + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT)
                        : recv(fd, b + off, len - off, MSG_DONTWAIT);
    if (r > 0) {
      off += (size_t)r;
      continue;
    }
    if (r == 0) return -1; /* peer closed */
    if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
  }
  return 0;
}

int cf_sc_send(int fd, const void *p, uint32_t len, int timeout_ms) {
  if (len > SC_MAX_FRAME) return -1;
  uint64_t deadline = cf_now_ns() + (uint64_t)timeout_ms * 1000000u;
  uint32_t be = htonl(len);
  if (io_all(fd, &be, 4, 1, deadline) != 0) return -1;
  return io_all(fd, (void *)p, len, 1, deadline);
}

int cf_sc_recv(int fd, void *p, uint32_t cap, uint32_t *len, int timeout_ms) {
  uint64_t deadline = cf_now_ns() + (uint64_t)timeout_ms * 1000000u;
  uint32_t be;
  if (io_all(fd, &be, 4, 0, deadline) != 0) return -1;
  uint32_t n = ntohl(be);
  if (n > cap || n > SC_MAX_FRAME) return -1;
  if (io_all(fd, p, n, 0, deadline) != 0) return -1;
  *len = n;
  return 0;
}
