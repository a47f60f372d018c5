/* NCCL_SOCKET_IFNAME / TPX_SOCKET_IFNAME: which network interfaces to use.
 * The one matcher for the built-in transport's devices (src/sock/ifaces.c)
 * and the engine's control plane, with NCCL's semantics:
 *
 *   eth          prefixes: eth0, eth1, ... (comma-separated list: eth,ens)
 *   =eth0        exact names: eth0 only (=eth0,eth1)
 *   ^docker      exclude prefixes: anything but docker*
 *   ^=docker0    exclude exact names: anything but docker0
 *
 * Blanks around the whole value and around each name are trimmed (NCCL does
 * not trim; names never contain blanks). As in NCCL, an item's ":<port>"
 * suffix is dropped (NCCL reads it for IB ports; interfaces match any port),
 * empty items are skipped, and a value of at most one character (unset, "",
 * "^", "=") is no list at all: NCCL honours NCCL_SOCKET_IFNAME only when it
 * is longer than one character.
 *
 * Without a list, NCCL chooses automatically, in tiers: interfaces named ib*
 * (IP over InfiniBand) if any; else every interface but docker*, lo* and
 * virbr*; else docker*; else lo*; else virbr* (NCCL's src/misc/socket.cc,
 * ncclFindInterfaces; its NCCL_COMM_ID subnet hint between the first two
 * tiers is not reproduced). Only the best tier present is used. */
#ifndef TPX_COMMON_IFNAME_H
#define TPX_COMMON_IFNAME_H

#include <stddef.h>

/* Names in one list; interface names are shorter than IFNAMSIZ (16). */
#define TPX_IFNAME_MAX_ITEMS 32
#define TPX_IFNAME_LEN 16

/* For messages: what the automatic choice is. */
#define TPX_IFNAME_DEFAULT_DESC                                                                    \
  "NCCL's default: ib*, else all but docker*/lo*/virbr*, else docker*, else lo*, else virbr*"

/* Tiers of the automatic choice, best first. An explicit list puts every
 * interface it selects in tier 0. */
enum tpx__ifname_tier {
  TPX_IFNAME_TIER_IB = 0, /* ib* */
  TPX_IFNAME_TIER_OTHER,  /* anything not below */
  TPX_IFNAME_TIER_DOCKER, /* docker* */
  TPX_IFNAME_TIER_LO,     /* lo* */
  TPX_IFNAME_TIER_VIRBR,  /* virbr* (libvirt bridges) */
  TPX_IFNAME_TIERS
};

typedef struct tpx_ifname_spec {
  int automatic; /* no list: the tiers above */
  int exclude;   /* '^': select what the names do not match */
  int exact;     /* '=': names, not prefixes */
  int n;
  char names[TPX_IFNAME_MAX_ITEMS][TPX_IFNAME_LEN];
} tpx_ifname_spec_t;

/* Parse spec (NULL = unset). 0, or TPX_EINVAL (more than TPX_IFNAME_MAX_ITEMS
 * names, or a name of TPX_IFNAME_LEN characters or more, which no interface
 * could match). An include list without names (",") selects nothing, an
 * exclude list without names ("^,") everything. */
int tpx__ifname_parse(const char *spec, tpx_ifname_spec_t *out);

/* Tier of interface `name` under s: -1 when s rejects it, else 0 for an
 * explicit list's match or the tpx__ifname_tier for the automatic choice. A
 * caller choosing among interfaces keeps those of the lowest tier it sees. */
int tpx__ifname_tier(const tpx_ifname_spec_t *s, const char *name);

/* One name, one question: 1 when spec selects name, 0 when not, TPX_EINVAL
 * for a malformed spec. Without a list: 1 for the first two tiers (ib* and
 * ordinary interfaces), i.e. NCCL's "not docker, lo or virbr" (that ib* wins
 * over the others and the fallbacks need the whole set: tpx__ifname_select). */
int tpx__ifname_match(const char *spec, const char *name);

/* The whole choice among candidate interfaces (the caller's usable ones;
 * repeats allowed, e.g. one entry per address): sel[i] = 1 for the chosen.
 * Returns how many entries were chosen, or TPX_EINVAL. */
int tpx__ifname_select(const char *spec, const char *const *names, int n, unsigned char *sel);

/* The text for a spec that selects none of the interfaces this machine has
 * (names[0..n), repeats allowed; `kind` says which ones, e.g. "up with an
 * IPv4 address"): names the variable and lists what exists, as a user who
 * mistyped a NIC name needs both. A malformed spec (tpx__ifname_parse
 * refused it) is called that. */
void tpx__ifname_none(const char *spec, int malformed, const char *kind, const char *const *names, int n, char *buf,
                      size_t cap);

#endif
