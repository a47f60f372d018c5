/* Interface selection for the built-in transport: the NCCL_SOCKET_IFNAME list
 * syntax, the choice of one address per interface, and address printing. */
#include <arpa/inet.h>
#include <ctype.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#include "common/error.h"
#include "sock/sock.h"

int tpx_sock_iflist_parse(const char *spec, tpx_sock_iflist_t *out) {
  memset(out, 0, sizeof(*out));
  if (spec == NULL) return 0;
  const char *p = spec;
  while (isspace((unsigned char)*p))
    p++;
  if (*p == '^') out->exclude = 1, p++;
  if (*p == '=') out->exact = 1, p++;
  while (*p) {
    const char *end = strchr(p, ',');
    if (end == NULL) end = p + strlen(p);
    const char *a = p, *b = end;
    while (a < b && isspace((unsigned char)*a))
      a++;
    while (b > a && isspace((unsigned char)b[-1]))
      b--;
    size_t len = (size_t)(b - a);
    if (len > 0) {
      if (len >= TPX_SOCK_IFNAMSIZ)
        return tpx_err(TPX_EINVAL, "socket ifname list '%s': '%.*s' is longer than %d characters",
                       spec, (int)len, a, TPX_SOCK_IFNAMSIZ - 1);
      if (out->n >= TPX_SOCK_IFLIST_MAX)
        return tpx_err(TPX_EINVAL, "socket ifname list '%s': more than %d names", spec,
                       TPX_SOCK_IFLIST_MAX);
      memcpy(out->names[out->n], a, len);
      out->names[out->n][len] = '\0';
      out->n++;
    }
    p = *end ? end + 1 : end;
  }
  return 0;
}

int tpx_sock_iflist_match(const tpx_sock_iflist_t *l, const char *ifname) {
  int hit = 0;
  for (int i = 0; i < l->n && !hit; i++) {
    if (l->exact)
      hit = strcmp(ifname, l->names[i]) == 0;
    else
      hit = strncmp(ifname, l->names[i], strlen(l->names[i])) == 0;
  }
  return l->exclude ? !hit : hit;
}

int tpx_sock_parse_family(const char *s) {
  if (s == NULL || s[0] == '\0') return 0;
  static const char *v4[] = {"AF_INET", "inet", "ipv4", "4"};
  static const char *v6[] = {"AF_INET6", "inet6", "ipv6", "6"};
  for (int i = 0; i < 4; i++) {
    if (strcasecmp(s, v4[i]) == 0) return AF_INET;
    if (strcasecmp(s, v6[i]) == 0) return AF_INET6;
  }
  return tpx_err(TPX_EINVAL, "socket family '%s' is not AF_INET or AF_INET6", s);
}

/* Rank of an address for its interface: higher is preferred, -1 unusable. */
static int addr_rank(const tpx_sock_ifaddr_t *a, int family) {
  int fam = a->addr.ss_family;
  if (fam != AF_INET && fam != AF_INET6) return -1;
  if (family != 0 && fam != family) return -1;
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

int tpx_sock_select(const char *spec, int family, const tpx_sock_ifaddr_t *all, int n,
                    tpx_sock_ifaddr_t *out, int max) {
  tpx_sock_iflist_t list;
  int use_default = spec == NULL || spec[0] == '\0';
  if (!use_default) {
    int rc = tpx_sock_iflist_parse(spec, &list);
    if (rc != 0) return rc;
  }
  /* Two passes for the default: non-loopback first, then loopback alone. */
  for (int pass = 0; pass < (use_default ? 2 : 1); pass++) {
    int cnt = 0;
    int ranks[TPX_SOCK_MAX_DEVS];
    for (int i = 0; i < n; i++) {
      const tpx_sock_ifaddr_t *a = &all[i];
      if (!a->up) continue;
      if (use_default) {
        if (pass == 0 && a->loopback) continue;
        if (pass == 1 && !a->loopback) continue;
      } else if (!tpx_sock_iflist_match(&list, a->name)) {
        continue;
      }
      int r = addr_rank(a, family);
      if (r < 0) continue;
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
    if (cnt > 0 || !use_default) return cnt;
  }
  return 0;
}

socklen_t tpx_sock_addr_len(const struct sockaddr_storage *a) {
  return a->ss_family == AF_INET6 ? sizeof(struct sockaddr_in6) : sizeof(struct sockaddr_in);
}

void tpx_sock_addr_str(const struct sockaddr_storage *a, char *buf, size_t cap) {
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
