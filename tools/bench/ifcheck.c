/* Before any endpoint: does TPX_SOCKET_IFNAME select an interface this
 * machine has? Said before a server waits or a client dials, in the
 * transport's words (tpx__ifname_none). */
#define _DEFAULT_SOURCE /* getifaddrs */
#include <ifaddrs.h>
#include <net/if.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "bench.h"
#include "common/ifname.h"
#include "tpx/net.h"

#define MAX_IFS 64

int bench_ifname_check(const tpx_config_t *cfg, char *err, size_t n) {
  /* a plugin chooses its own devices; a value of one character is no list (ifname.h) */
  if (!tpx_net_spec_is_builtin(cfg->net_plugin) || strlen(cfg->socket_ifname) <= 1) return 0;
  struct ifaddrs *ifs = NULL;
  if (getifaddrs(&ifs) != 0) return 0; /* cannot tell: the transport will say */
  char names[MAX_IFS][IF_NAMESIZE];
  const char *ptr[MAX_IFS];
  int k = 0;
  for (struct ifaddrs *a = ifs; a && k < MAX_IFS; a = a->ifa_next) {
    if (!a->ifa_addr || !(a->ifa_flags & IFF_UP)) continue;
    if (a->ifa_addr->sa_family != AF_INET && a->ifa_addr->sa_family != AF_INET6) continue;
    int dup = 0;
    for (int i = 0; i < k && !dup; i++) dup = !strcmp(names[i], a->ifa_name);
    if (dup) continue;
    snprintf(names[k], sizeof names[k], "%s", a->ifa_name);
    ptr[k] = names[k];
    k++;
  }
  freeifaddrs(ifs);
  unsigned char sel[MAX_IFS] = {0};
  int chosen = tpx__ifname_select(cfg->socket_ifname, ptr, k, sel);
  if (chosen > 0) return 0;
  tpx__ifname_none(cfg->socket_ifname, chosen < 0, "up with an address", ptr, k, err, n);
  return -1;
}
