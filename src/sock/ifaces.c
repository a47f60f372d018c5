/* Interface selection for the built-in transport: which interfaces (the
 * NCCL_SOCKET_IFNAME matcher of common/ifname.h), one address per interface,
 * and address printing. */
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/error.h"
#include "common/ifname.h"
#include "sock/sock.h"

int tpx__sock_parse_family(const char *s) {
  if (s == NULL || s[0] == '\0') return 0;
  static const char *v4[] = {"AF_INET", "inet", "ipv4", "4"};
  static const char *v6[] = {"AF_INET6", "inet6", "ipv6", "6"};
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(s, v4[i]) == 0) return AF_INET;
    if (strcasecmp(s, v6[i]) == 0) return AF_INET6;
  }
  return tpx_err_quiet(TPX_EINVAL, "socket family '%s' is not AF_INET or AF_INET6", s);
}

/* Rank of an address for its interface: higher is preferred. */
enum { RANK_UNUSABLE = -1 };
static int addr_rank(const tpx_sock_ifaddr_t *a, int family) {
  int fam = a->addr.ss_family;
  if (fam != AF_INET && fam != AF_INET6) return RANK_UNUSABLE;
  if (family != 0 && fam != family) return RANK_UNUSABLE;
  if (fam == AF_INET) {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)&a->addr;
    /* On lo prefer exactly 127.0.0.1 over other 127/8 aliases. */
    if (a->loopback) return ntohl(s4->sin_addr.s_addr) == INADDR_LOOPBACK ? 40 : 35;
    return 30;
  }
  const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)&a->addr;
  if (a->loopback) return IN6_IS_ADDR_LOOPBACK(&s6->sin6_addr) ? 25 : 5;
  if (IN6_IS_ADDR_LINKLOCAL(&s6->sin6_addr)) return 10;
  return 20;
}

int tpx__sock_select(const char *spec, int family, const tpx_sock_ifaddr_t *all, int n,
                    tpx_sock_ifaddr_t *out, int max) {
  tpx_ifname_spec_t s;
  int rc = tpx__ifname_parse(spec, &s);
  if (rc != 0) return rc;
  /* As NCCL, only the best tier among the usable interfaces is used (an
   * explicit list has one tier; the automatic choice falls back to docker
   * and lo only when nothing else is up). */
  int best = -1;
  for (int i = 0; i < n; i++) {
    if (!all[i].up || addr_rank(&all[i], family) < 0) continue;
    int t = tpx__ifname_tier(&s, all[i].name);
    if (t >= 0 && (best < 0 || t < best)) best = t;
  }
  if (best < 0) return 0;
  int cnt = 0;
  int ranks[TPX_SOCK_MAX_DEVS];
  for (int i = 0; i < n; i++) {
    const tpx_sock_ifaddr_t *a = &all[i];
    int r = a->up ? addr_rank(a, family) : RANK_UNUSABLE;
    if (r < 0 || tpx__ifname_tier(&s, a->name) != best) continue;
    int j = 0;
    while (j < cnt && strcmp(out[j].name, a->name) != 0)
      j++;
    if (j < cnt) {
      if (r > ranks[j]) out[j] = *a, ranks[j] = r;
      continue;
    }
    if (cnt >= max || cnt >= TPX_SOCK_MAX_DEVS) continue;
    out[cnt] = *a;
    ranks[cnt] = r;
    cnt++;
  }
  return cnt;
}

socklen_t tpx__sock_addr_len(const struct sockaddr_storage *a) {
  return a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

void tpx__sock_addr_str(const struct sockaddr_storage *a, char *buf, size_t cap) {
  char host[INET6_ADDRSTRLEN] = "?";
  if (a->ss_family == AF_INET) {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)a;
    inet_ntop(AF_INET, &s4->sin_addr, host, sizeof(host));
    snprintf(buf, cap, "%s:%u", host, ntohs(s4->sin_port));
  } else if (a->ss_family == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)a;
    inet_ntop(AF_INET6, &s6->sin6_addr, host, sizeof(host));
    snprintf(buf, cap, "[%s]:%u", host, ntohs(s6->sin6_port));
  } else {
    snprintf(buf, cap, "(family %d)", a->ss_family);
  }
}
