/* tpx-setup-load: what peers held in connection setup cost the endpoint
 * they connect to. An endpoint (the built-in transport on loopback) gets
 * `peers` HELLOs by hand, each offering `channels` transport listen handles
 * that name a local listener whose queue takes the endpoint's connects and
 * which never connects back: every peer stays in transport setup, its
 * listen comms waiting, until TPX_CONNECT_TIMEOUT_MS (set long here). The
 * process's CPU time over `seconds` is then the endpoint's setup-time cost.
 *
 *   tpx-setup-load [peers 200] [channels 2] [seconds 3]
 *
 * Prints one line: peers, listen comms waiting, CPU-s per second, and CPU
 * microseconds per second per peer. Internal (engine/wire.h, sock/wire.h:
 * the HELLO and handle formats, as an attacker would write them). */
#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/le.h"
#include "engine/wire.h"
#include "internal.h"
#include "sock/wire.h"
#include "tpx/tpx.h"

static double cpu_s(void) {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return (double)ru.ru_utime.tv_sec + (double)ru.ru_stime.tv_sec +
         (double)(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

static int tcp_to(uint16_t port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(port)};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  if (fd >= 0 && connect(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

/* A loopback listener that never accepts (its queue takes the connects). */
static int sink(uint16_t *port) {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  struct sockaddr_in sa = {.sin_family = AF_INET};
  inet_pton(AF_INET, "127.0.0.1", &sa.sin_addr);
  socklen_t sl = sizeof(sa);
  if (fd < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) != 0 || listen(fd, 65535) != 0 ||
      getsockname(fd, (struct sockaddr *)&sa, &sl) != 0)
    return -1;
  *port = ntohs(sa.sin_port);
  return fd;
}

static int send_hello(int fd, uint16_t port, int nch) {
  static uint8_t hs[WIRE_MAX_CHANNELS * TPX_NET_HANDLE_BYTES];
  for (int c = 0; c < nch; c++) {
    uint8_t *h = hs + (size_t)c * TPX_NET_HANDLE_BYTES;
    memset(h, 0, TPX_NET_HANDLE_BYTES);
    tpx__put32(h + TPX_WH_MAGIC, TPX_WIRE_HANDLE_MAGIC);
    tpx__put16(h + TPX_WH_VERSION, TPX_WIRE_VERSION);
    tpx__put16(h + TPX_WH_FAMILY, 4);
    inet_pton(AF_INET, "127.0.0.1", h + TPX_WH_ADDR);
    uint16_t np = htons(port);
    memcpy(h + TPX_WH_PORT, &np, 2);
    tpx__put16(h + TPX_WH_NSOCKS, 1);
  }
  struct tpx__wbuf w = {0};
  struct tpx__wire_hello h = {(uint64_t)fd, 0, (uint16_t)nch, 0, "load", hs};
  int ok = tpx__wire_put_hello(&w, 0, &h) == 0 && send(fd, w.p, w.len, 0) == (ssize_t)w.len;
  tpx__wbuf_free(&w);
  return ok ? 0 : -1;
}

int main(int argc, char **argv) {
  int peers = argc > 1 ? atoi(argv[1]) : 200, nch = argc > 2 ? atoi(argv[2]) : 2;
  int secs = argc > 3 ? atoi(argv[3]) : 3;
  if (peers < 1 || nch < 1 || nch > WIRE_MAX_CHANNELS || secs < 1) {
    fprintf(stderr, "usage: tpx-setup-load [peers] [channels 1..%d] [seconds]\n", WIRE_MAX_CHANNELS);
    return 2;
  }
  tpx_config_t cfg;
  tpx_config_from_env(&cfg);
  cfg.num_channels = nch;
  cfg.connect_timeout_ms = 600000;
  cfg.max_unauth = cfg.max_unauth_per_source = cfg.max_peers = peers + 16;
  tpx_endpoint_params_t p = {.name = "server", .listen_host = "127.0.0.1", .port = TPX_PORT_EPHEMERAL,
                             .cfg = &cfg};
  tpx_endpoint_t *ep;
  int rc = tpx_endpoint_create(&p, &ep);
  if (rc) {
    fprintf(stderr, "tpx-setup-load: endpoint: %s\n", tpx_last_error());
    return 1;
  }
  uint16_t sport;
  int sfd = sink(&sport);
  int *fds = calloc((size_t)peers, sizeof(int));
  if (sfd < 0 || !fds) return 1;
  for (int i = 0; i < peers; i++) {
    fds[i] = tcp_to((uint16_t)tpx_endpoint_port(ep));
    if (fds[i] < 0 || send_hello(fds[i], sport, nch) != 0) {
      fprintf(stderr, "tpx-setup-load: peer %d: could not connect\n", i);
      return 1;
    }
  }
  sleep(1); /* every HELLO handled, every connect through */
  double c0 = cpu_s();
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  sleep((unsigned)secs);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  double wall = (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9;
  double cpu = (cpu_s() - c0) / wall;
  printf("peers %d, listen comms waiting %d: %.3f CPU-s per s, %.1f CPU-us per s per peer\n", peers,
         peers * nch, cpu, cpu * 1e6 / peers);
  for (int i = 0; i < peers; i++) close(fds[i]);
  free(fds);
  close(sfd);
  tpx_endpoint_destroy(ep);
  return 0;
}
