/* Rate-limited repeated log lines (ratelog.h). */
#include "common/ratelog.h"

int tpx__ratelog(struct tpx_ratelog *r, uint64_t now, uint64_t *count) {
  return tpx__ratelog_burst(r, now, TPX_RATELOG_BURST, count);
}

int tpx__ratelog_burst(struct tpx_ratelog *r, uint64_t now, uint32_t burst, uint64_t *count) {
  if (r->last && now - r->last > TPX_RATELOG_QUIET_NS && r->suppressed == 0) r->full = 0;
  r->last = now;
  if (r->full < burst) {
    if (++r->full == burst) r->next_summary = now + TPX_RATELOG_PERIOD_NS;
    return TPX_RATELOG_FULL;
  }
  r->suppressed++;
  if (now < r->next_summary) return TPX_RATELOG_SKIP;
  *count = tpx__ratelog_flush(r);
  r->next_summary = now + TPX_RATELOG_PERIOD_NS;
  return TPX_RATELOG_SUMMARY;
}

uint64_t tpx__ratelog_flush(struct tpx_ratelog *r) {
  uint64_t n = r->suppressed;
  r->suppressed = 0;
  return n;
}
