/* Connect retries on transient errors (retry.h). */
#include "common/retry.h"

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "tpx/error.h"

int tpx__retry_transient(int err) {
  return err == EHOSTUNREACH || err == ENETUNREACH || err == ECONNREFUSED || err == ETIMEDOUT;
}

int tpx__retry_plugin_transient(int code) {
  return code == TPX_ESYSTEM || code == TPX_EINTERNAL || code == TPX_EREMOTE;
}

void tpx__retry_note(struct tpx_retry *r, int err) {
  int n = ++r->failed;
  if (r->nruns > 0 && r->runs[r->nruns - 1].err == err) {
    r->runs[r->nruns - 1].last = n;
    return;
  }
  if (r->nruns == TPX_RETRY_RUNS) { /* full: the last run stands for the rest */
    r->runs[r->nruns - 1].err = TPX_RETRY_SEVERAL;
    r->runs[r->nruns - 1].last = n;
    return;
  }
  r->runs[r->nruns].err = err;
  r->runs[r->nruns].first = r->runs[r->nruns].last = n;
  r->nruns++;
}

static int schedule(struct tpx_retry *r, int max_retries, int pause_ms, uint64_t now_ns) {
  if (r->failed > max_retries) return 0;
  long long cap = pause_ms > TPX_RETRY_PAUSE_MAX_MS ? pause_ms : TPX_RETRY_PAUSE_MAX_MS;
  long long ms = (long long)r->failed * (pause_ms > 0 ? pause_ms : 0);
  if (ms > cap) ms = cap;
  r->next_ns = now_ns + (uint64_t)ms * 1000000ull;
  return 1;
}

int tpx__retry_failed(struct tpx_retry *r, int err, int max_retries, int pause_ms, uint64_t now_ns) {
  tpx__retry_note(r, err);
  return tpx__retry_transient(err) && schedule(r, max_retries, pause_ms, now_ns);
}

int tpx__retry_failed_plugin(struct tpx_retry *r, int code, int max_retries, int pause_ms, uint64_t now_ns) {
  tpx__retry_note(r, code);
  return tpx__retry_plugin_transient(code) && schedule(r, max_retries, pause_ms, now_ns);
}

void tpx__retry_causes(const struct tpx_retry *r, char *buf, size_t cap) {
  size_t off = 0;
  if (cap == 0) return;
  buf[0] = '\0';
  for (int i = 0; i < r->nruns && off < cap; i++) {
    int e = r->runs[i].err;
    const char *why = e == TPX_RETRY_SEVERAL ? "other errors" : e < 0 ? tpx_strerror(e) : strerror(e);
    int n = r->runs[i].first == r->runs[i].last
                ? snprintf(buf + off, cap - off, "%s%s (attempt %d)", i ? ", " : "", why, r->runs[i].first)
                : snprintf(buf + off, cap - off, "%s%s (attempts %d-%d)", i ? ", " : "", why, r->runs[i].first,
                           r->runs[i].last);
    if (n < 0) break;
    off += (size_t)n;
  }
}

int tpx__retry_all_were(const struct tpx_retry *r, int err) {
  if (r->nruns == 0) return 0;
  for (int i = 0; i < r->nruns; i++)
    if (r->runs[i].err != err) return 0;
  return 1;
}
