/* Rate-limited log lines of a peer (peer_log.h). */
#include "common/util.h"
#include "engine/endpoint.h"
#include "engine/peer.h"
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
