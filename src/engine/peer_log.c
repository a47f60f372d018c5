/* Rate-limited log lines of a peer (peer_log.h). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>

#include "common/util.h"
#include "engine/core.h"
#include "engine/peer_log.h"

static const struct {
  const char *what;
  int level;
} kinds[PL_KINDS] = {
    [PL_WRITE_REFUSED] = {"refused writes", TPX_LOG_ERROR},
    [PL_READ_REFUSED] = {"refused reads", TPX_LOG_ERROR},
    [PL_NOTIF_DROPPED] = {"dropped notifications of failed requests", TPX_LOG_WARN},
    [PL_SEND_TRUNC] = {"sends larger than the matching receive", TPX_LOG_WARN},
    [PL_CHANNEL_LOST] = {"channels lost (a flapping link)", TPX_LOG_WARN},
};

static void summary(struct tpx_peer *p, int kind, uint64_t n, const char *when) {
  if (n == 0 || kinds[kind].level > tpx__log_level) return;
  tpx__log_emit(kinds[kind].level, __FILE__, __LINE__,
                "endpoint %s: peer %s: %llu more %s %s (repeated lines of one kind from one peer are "
                "rate-limited)", p->ep->name, p->where, (unsigned long long)n, kinds[kind].what, when);
}

int tpx__peer_log_ok(struct tpx_peer *p, int kind) {
  uint64_t n = 0;
  int v = tpx__ratelog(&p->logs[kind], tpx__now_ns(), &n);
  if (v == TPX_RATELOG_SUMMARY) summary(p, kind, n, "not logged since the last summary");
  return v == TPX_RATELOG_FULL;
}

void tpx__peer_log_flush(struct tpx_peer *p) {
  for (int k = 0; k < PL_KINDS; k++) summary(p, k, tpx__ratelog_flush(&p->logs[k]), "not logged before it ended");
}

/* ---- connections refused before they became peers ---- */

static int same_src(const struct tpx_src *a, const struct tpx_src *b) {
  return a->fam == b->fam && memcmp(a->b, b->b, sizeof(a->b)) == 0;
}

static int refused_slot(struct tpx__refused_log *r, const struct tpx_src *src) {
  int lru = 0;
  for (int i = 0; i < REFUSED_LOG_SOURCES; i++) {
    if (r->s[i].seen && same_src(&r->s[i].src, src)) return i;
    if (r->s[i].seen < r->s[lru].seen) lru = i;
  }
  memset(&r->s[lru], 0, sizeof(r->s[lru]));
  r->s[lru].src = *src;
  return lru;
}

static void refused_summary(tpx_endpoint_t *ep, uint64_t n) {
  struct tpx__refused_log *r = &ep->refused_log;
  int most = -1;
  for (int i = 0; i < REFUSED_LOG_SOURCES; i++)
    if (r->s[i].counted && (most < 0 || r->s[i].counted > r->s[most].counted)) most = i;
  char from[128] = "";
  if (most >= 0) {
    char a[INET6_ADDRSTRLEN] = "?";
    const struct tpx_src *s = &r->s[most].src;
    if (s->fam == 4) inet_ntop(AF_INET, s->b, a, sizeof(a));
    else if (s->fam == 6) {
      uint8_t b16[16] = {0};
      memcpy(b16, s->b, 8);
      inet_ntop(AF_INET6, b16, a, sizeof(a));
    }
    snprintf(from, sizeof(from), "; the most from %s%s: %llu", a, s->fam == 6 ? "/64" : "",
             (unsigned long long)r->s[most].counted);
  }
  for (int i = 0; i < REFUSED_LOG_SOURCES; i++) r->s[i].counted = 0;
  if (n && TPX_LOG_ERROR <= tpx__log_level)
    tpx__log_emit(TPX_LOG_ERROR, __FILE__, __LINE__, "endpoint %s: %llu more control connections refused or failed "
                  "before they became peers, not logged since the last summary%s (rate-limited)", ep->name,
                  (unsigned long long)n, from);
}

int tpx__refused_log_ok(struct tpx_peer *p) {
  struct tpx__refused_log *r = &p->ep->refused_log;
  uint64_t now = tpx__now_ns(), n = 0;
  int i = refused_slot(r, &p->src);
  r->s[i].seen = now;
  uint64_t ignored;
  int mine = tpx__ratelog(&r->s[i].rl, now, &ignored); /* its own burst; its count goes to the total */
  (void)tpx__ratelog_flush(&r->s[i].rl);
  int full = mine == TPX_RATELOG_FULL;
  if (full) {
    int all = tpx__ratelog_burst(&r->all, now, REFUSED_LOG_BURST, &n);
    if (all == TPX_RATELOG_FULL) return 1;
    if (all == TPX_RATELOG_SUMMARY) refused_summary(p->ep, n);
    r->s[i].counted++; /* (the total counted it) */
    return 0;
  }
  r->s[i].counted++;
  r->all.suppressed++; /* past its source's burst: counted in the total without using its burst */
  if (!r->all.next_summary) {
    r->all.next_summary = now + TPX_RATELOG_PERIOD_NS;
  } else if (now >= r->all.next_summary) {
    n = tpx__ratelog_flush(&r->all);
    r->all.next_summary = now + TPX_RATELOG_PERIOD_NS;
    refused_summary(p->ep, n);
  }
  return 0;
}

void tpx__refused_log_flush(tpx_endpoint_t *ep) {
  uint64_t n = tpx__ratelog_flush(&ep->refused_log.all);
  if (n) refused_summary(ep, n);
}
