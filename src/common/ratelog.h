/* Repeated log lines of one kind from one source (a peer, a listen comm)
 * cannot be amplified: the first TPX_RATELOG_BURST are logged in full, the
 * rest only counted, and a summary with the count is logged at most once per
 * TPX_RATELOG_PERIOD_NS (when the next one comes) and when the source ends
 * (tpx__ratelog_flush). After TPX_RATELOG_QUIET_NS without any, lines are
 * logged in full again. Not thread-safe: the owner's lock guards it. */
#ifndef TPX_COMMON_RATELOG_H
#define TPX_COMMON_RATELOG_H

#include <stdint.h>

#define TPX_RATELOG_BURST 5
#define TPX_RATELOG_PERIOD_NS 10000000000ull /* 10 s */
#define TPX_RATELOG_QUIET_NS 60000000000ull  /* 60 s */

struct tpx_ratelog {
  uint64_t last;         /* time of the latest line (0: none yet) */
  uint64_t next_summary; /* no summary before this */
  uint64_t suppressed;   /* counted since the last summary */
  uint32_t full;         /* logged in full since the last quiet spell */
};

enum { TPX_RATELOG_SKIP = 0, TPX_RATELOG_FULL, TPX_RATELOG_SUMMARY };

/* One more line at `now`: FULL (log it), SKIP (counted), or SUMMARY (log
 * the summary of *count lines not logged, this one included). */
int tpx__ratelog(struct tpx_ratelog *r, uint64_t now, uint64_t *count);
/* The same with `burst` lines in full instead of TPX_RATELOG_BURST. */
int tpx__ratelog_burst(struct tpx_ratelog *r, uint64_t now, uint32_t burst, uint64_t *count);
/* Lines counted and not yet summarised (then none). */
uint64_t tpx__ratelog_flush(struct tpx_ratelog *r);

#endif
