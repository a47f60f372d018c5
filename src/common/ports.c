/* bind() to port 0 takes no port that one of our connections in TIME_WAIT
 * still holds from its connect() side. A process that sets up and tears down
 * many connections a minute (NCCL communicators, our 1000-peer close tests)
 * leaves tens of thousands of those for 60 s, and bind(0) then fails with
 * EADDRINUSE while no port is really in use. A port named explicitly is
 * granted when every other user of it had SO_REUSEADDR (TCP still keeps each
 * connection's 4-tuple unique), so after EADDRINUSE we name random ports of
 * the ephemeral range ourselves. */
#include "common/ports.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"
#include "common/util.h"

#define PORT_TRIES 256

void tpx__set_reuseaddr(int fd) {
  int one = 1;
  (void)setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
}

static void ephemeral_range(int *lo, int *hi) {
  *lo = 32768;
  *hi = 60999;
  FILE *f = fopen("/proc/sys/net/ipv4/ip_local_port_range", "re");
  if (f == NULL) return;
  int a, b;
  if (fscanf(f, "%d %d", &a, &b) == 2 && a > 0 && b >= a && b < 65536) {
    *lo = a;
    *hi = b;
  }
  fclose(f);
}

static void set_port(struct sockaddr_storage *sa, uint16_t port) {
  if (sa->ss_family == AF_INET) ((struct sockaddr_in *)sa)->sin_port = htons(port);
  else ((struct sockaddr_in6 *)sa)->sin6_port = htons(port);
}

int tpx__bind_port(int fd, const struct sockaddr *addr, socklen_t len, int port) {
  if (len > sizeof(struct sockaddr_storage) || port < 0 || port > 65535) return EINVAL;
  struct sockaddr_storage sa;
  memset(&sa, 0, sizeof(sa));
  memcpy(&sa, addr, len);
  tpx__set_reuseaddr(fd);
  set_port(&sa, (uint16_t)port);
  if (bind(fd, (struct sockaddr *)&sa, len) == 0) return 0;
  if (errno != EADDRINUSE || port != 0) return errno;
  int lo, hi;
  ephemeral_range(&lo, &hi);
  for (int i = 0; i < PORT_TRIES; i++) {
    uint16_t p = (uint16_t)(lo + (int)(tpx__random_u64() % (uint64_t)(hi - lo + 1)));
    set_port(&sa, p);
    if (bind(fd, (struct sockaddr *)&sa, len) == 0) {
      TPX_DEBUG("bind: no port free for port 0; took %u after %d tries", p, i + 1);
      return 0;
    }
    if (errno != EADDRINUSE) return errno;
  }
  return EADDRINUSE;
}
