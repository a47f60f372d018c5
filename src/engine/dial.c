/* Dial policy (dial.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <ifaddrs.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>

#include "common/error.h"
#include "engine/dial.h"
#include "engine/core.h"
#include "engine/listen.h"
#include "engine/peer.h"

/* An address reduced to its family and bytes (IPv4-mapped IPv6 as IPv4). */
struct ip {
  int fam; /* AF_INET / AF_INET6 */
  uint8_t b[16];
};

static int ip_of(const struct sockaddr *sa, struct ip *out) {
  memset(out, 0, sizeof(*out));
  if (sa->sa_family == AF_INET) {
    out->fam = AF_INET;
    memcpy(out->b, &((const struct sockaddr_in *)sa)->sin_addr, 4);
    return 0;
  }
  if (sa->sa_family != AF_INET6) return TPX_ENOTSUP;
  const struct in6_addr *a = &((const struct sockaddr_in6 *)sa)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(a)) {
    out->fam = AF_INET;
    memcpy(out->b, a->s6_addr + 12, 4);
  } else {
    out->fam = AF_INET6;
    memcpy(out->b, a->s6_addr, 16);
  }
  return 0;
}

static int ip_eq(const struct ip *a, const struct ip *b) {
  return a->fam == b->fam && memcmp(a->b, b->b, a->fam == AF_INET ? 4 : 16) == 0;
}

static int ip_loopback(const struct ip *a) {
  static const uint8_t v6[16] = {[15] = 1};
  return a->fam == AF_INET ? a->b[0] == 127 : memcmp(a->b, v6, 16) == 0;
}

/* Loopback, or the address of one of this host's interfaces. */
static int ip_local(const struct ip *a) {
  if (ip_loopback(a)) return 1;
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return 0;
  int found = 0;
  for (struct ifaddrs *i = ifs; i && !found; i = i->ifa_next) {
    struct ip x;
    if (i->ifa_addr && ip_of(i->ifa_addr, &x) == 0) found = ip_eq(&x, a);
  }
  freeifaddrs(ifs);
  return found;
}

static int prefix_match(const struct ip *a, const struct ip *net, int bits) {
  if (a->fam != net->fam) return 0;
  int whole = bits / 8, rest = bits % 8;
  if (memcmp(a->b, net->b, (size_t)whole) != 0) return 0;
  if (rest == 0) return 1;
  uint8_t mask = (uint8_t)(0xff << (8 - rest));
  return (a->b[whole] & mask) == (net->b[whole] & mask);
}

/* One TPX_ALLOW_DIAL item: "*", an address, or address/prefix. */
static int item_match(const struct ip *a, const char *item) {
  if (strcmp(item, "*") == 0) return 1;
  char host[64];
  snprintf(host, sizeof(host), "%s", item);
  char *slash = strchr(host, '/');
  int bits = -1;
  if (slash) {
    *slash = '\0';
    char *end;
    long v = strtol(slash + 1, &end, 10);
    if (*end || end == slash + 1 || v < 0) return 0;
    bits = (int)v;
  }
  struct ip net = {0};
  if (inet_pton(AF_INET, host, net.b) == 1) net.fam = AF_INET;
  else if (inet_pton(AF_INET6, host, net.b) == 1) net.fam = AF_INET6;
  else return 0;
  int max = net.fam == AF_INET ? 32 : 128;
  if (bits < 0) bits = max;
  return bits <= max && prefix_match(a, &net, bits);
}

static int allow_listed(const char *list, const struct ip *a) {
  char buf[sizeof(((tpx_config_t *)0)->allow_dial)];
  snprintf(buf, sizeof(buf), "%s", list);
  char *save = NULL;
  for (char *t = strtok_r(buf, ", ", &save); t; t = strtok_r(NULL, ", ", &save))
    if (item_match(a, t)) return 1;
  return 0;
}

static int allowed(const tpx_endpoint_t *ep, const struct ip *ctl, int ctl_local, const struct ip *a) {
  if (ip_eq(a, ctl)) return 1;
  if (ctl_local && ip_local(a)) return 1;
  return ep->cfg.allow_dial[0] && allow_listed(ep->cfg.allow_dial, a);
}

int tpx__dial_check(struct tpx_peer *p, const uint8_t *handles, int n) {
  tpx_endpoint_t *ep = p->ep;
  tpx_net_t *net = ep->net;
  if (!net->ops->handle_dials) return 0; /* opaque handles: docs/SECURITY.md */
  struct sockaddr_storage ss;
  socklen_t sl = sizeof(ss);
  struct ip ctl;
  if (p->fd < 0 || getpeername(p->fd, (struct sockaddr *)&ss, &sl) != 0 || ip_of((struct sockaddr *)&ss, &ctl) != 0)
    return tpx_err_quiet(TPX_ECLOSED, "peer %s: control connection gone before its handles were checked", p->where);
  int ctl_local = ip_local(&ctl), total = 0;
  for (int c = 0; c < n; c++) {
    int conns = 0;
    struct sockaddr_storage to;
    int rc = net->ops->handle_dials(net, handles + (size_t)c * TPX_NET_HANDLE_BYTES, &to, &conns);
    if (rc) return tpx_err_quiet(TPX_EPROTO, "peer %s: channel %d: bad transport handle: %s", p->where, c, tpx_last_error());
    char where[96];
    tpx__listen_fmt_addr((struct sockaddr *)&to, where, sizeof(where));
    struct ip a;
    if (ip_of((struct sockaddr *)&to, &a) != 0 || !allowed(ep, &ctl, ctl_local, &a))
      return tpx_err_quiet(TPX_EPROTO, "peer %s: channel %d: handle names %s, not the control connection's "
                           "address: not dialled (TPX_ALLOW_DIAL)", p->where, c, where);
    total += conns;
    if (total > ep->cfg.max_dials)
      return tpx_err_quiet(TPX_EPROTO, "peer %s: handles ask for more than %d connections: not dialled "
                           "(TPX_MAX_DIALS)", p->where, ep->cfg.max_dials);
  }
  return 0;
}
