/* Connect retries on transient errors (docs/RELIABILITY.md, "Connection
 * setup"): which errors are transient, the pause before the next attempt,
 * and the causes of the failed attempts, kept run by run so a final failure
 * names every attempt's cause in bounded space. Used by the built-in
 * transport's data connects, the engine's control connect, and a loaded
 * plugin's channel connects and accepts (engine/relisten.h) alike. A cause
 * is an errno (> 0) or, for a plugin's call, a tpx error code (< 0). */
#ifndef TPX_COMMON_RETRY_H
#define TPX_COMMON_RETRY_H

#include <limits.h>
#include <stddef.h>
#include <stdint.h>

#define TPX_RETRY_RUNS 6        /* distinct runs of causes kept; later ones merge into the last */
#define TPX_RETRY_PAUSE_MAX_MS 1000 /* a pause never grows past this (or past the base pause) */
#define TPX_RETRY_SEVERAL INT_MIN  /* a run standing for several causes */

struct tpx_retry {
  int failed;   /* attempts that failed so far */
  uint64_t next_ns; /* when the next attempt may start */
  int nruns;
  struct {
    int err; /* cause of attempts first..last (TPX_RETRY_SEVERAL: the kept runs were full) */
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
/* A loaded ncclNet plugin's connect or accept failed with code (< 0): the
 * same, with plugin_transient's rule instead of errno's. */
int tpx__retry_failed_plugin(struct tpx_retry *r, int code, int max_retries, int pause_ms, uint64_t now_ns);
/* A plugin's result carries no errno: ncclSystemError, ncclInternalError
 * and ncclRemoteError (TPX_ESYSTEM, TPX_EINTERNAL, TPX_EREMOTE) are how it
 * reports a socket, its peer or a helper (GPUDirect-TCPX's RxDM) failing,
 * and may pass; the other codes say the call itself was wrong (invalid
 * argument or usage), out of memory or CUDA, which a retry repeats. */
int tpx__retry_plugin_transient(int code);
/* Records a failure that another side decided (no retry here). */
void tpx__retry_note(struct tpx_retry *r, int err);
/* "No route to host (attempts 1-3), Connection refused (attempt 4)" (a tpx
 * code by its tpx_strerror: "internal error (attempts 1-2)"); "" when
 * nothing failed. Always NUL-terminated. */
void tpx__retry_causes(const struct tpx_retry *r, char *buf, size_t cap);
/* 1 when at least one attempt failed and every one with err (ECONNREFUSED:
 * nothing listens there). */
int tpx__retry_all_were(const struct tpx_retry *r, int err);

#endif
