/* Connect retries on transient network errors (docs/RELIABILITY.md,
 * "Connection setup"): which errors are transient, the pause before the next
 * attempt, and the causes of the failed attempts, kept run by run so a final
 * failure names every attempt's cause in bounded space. Used by the built-in
 * transport's data connects and the engine's control connect alike. */
#ifndef TPX_COMMON_RETRY_H
#define TPX_COMMON_RETRY_H

#include <stddef.h>
#include <stdint.h>

#define TPX_RETRY_RUNS 6        /* distinct runs of causes kept; later ones merge into the last */
#define TPX_RETRY_PAUSE_MAX_MS 1000 /* a pause never grows past this (or past the base pause) */

struct tpx_retry {
  int failed;   /* attempts that failed so far */
  uint64_t next_ns; /* when the next attempt may start */
  int nruns;
  struct {
    int err; /* errno of attempts first..last (-1: several, the kept runs were full) */
    int first, last;
  } runs[TPX_RETRY_RUNS];
};

/* EHOSTUNREACH, ENETUNREACH, ECONNREFUSED, ETIMEDOUT: a link that was just
 * down (neighbour entry still FAILED), a listener not there yet. */
int tpx__retry_transient(int err);
/* An attempt failed with errno err at now_ns: records it and returns 1 when
 * another attempt may follow (err transient, fewer than max_retries retries
 * made), with next_ns set after a pause of k * pause_ms before retry k,
 * capped at max(TPX_RETRY_PAUSE_MAX_MS, pause_ms); else 0. */
int tpx__retry_failed(struct tpx_retry *r, int err, int max_retries, int pause_ms, uint64_t now_ns);
/* "No route to host (attempts 1-3), Connection refused (attempt 4)"; "" when
 * nothing failed. Always NUL-terminated. */
void tpx__retry_causes(const struct tpx_retry *r, char *buf, size_t cap);

#endif
