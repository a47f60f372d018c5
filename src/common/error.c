#include "common/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/log.h"

static _Thread_local char last_error[512];
/* Its code, and whether it was logged already: a failure is logged once, by
 * the first tpx_err or tpx_err_surface that sees it. Both log at INFO: their
 * code and text go back to the caller, who reports them (a tool prints them,
 * Python raises them); a failure nobody is returned to (a peer failing in the
 * progress thread) is logged at WARN or ERROR where it is decided. */
static _Thread_local int last_code, last_logged;

static const char *const messages[] = {
    [0] = "success",
    [1] = "CUDA error",
    [2] = "system error",
    [3] = "internal error",
    [4] = "invalid argument",
    [5] = "invalid usage",
    [6] = "remote error",
    [7] = "in progress",
    [8] = "timed out",
    [9] = "out of memory",
    [10] = "not supported",
    [11] = "not found",
    [12] = "no known ncclNet symbol",
    [13] = "unsupported version",
    [14] = "message truncated",
    [15] = "connection closed",
    [16] = "protocol error",
    [17] = "access outside registered memory",
    [18] = "address in use",
    [19] = "resource temporarily unavailable",
    [20] = "cancelled",
    [21] = "authentication failed",
    [22] = "data integrity check failed",
};

const char *tpx_strerror(int err) {
  int i = -err;
  if (i < 0 || i >= (int)(sizeof(messages) / sizeof(messages[0]))) return "unknown error";
  return messages[i];
}

const char *tpx_last_error(void) { return last_error; }

void tpx__err_clear(void) { last_error[0] = '\0'; }

int tpx_to_nccl(int err) {
  if (err == 0) return 0;
  if (err <= -1 && err >= -7) return -err;
  switch (err) {
  case TPX_ETRUNC: return 5; /* invalid usage, as NCCL's socket transport */
  case TPX_ECLOSED: return 6;
  case TPX_ETIMEDOUT:
  case TPX_EADDRINUSE: return 2;
  case TPX_EACCES:
  case TPX_ENOTSUP: return 5;
  default: return 3;
  }
}

int tpx_from_nccl(int r) {
  if (r == 0) return 0;
  if (r >= 1 && r <= 7) return -r;
  return TPX_EINTERNAL;
}

size_t tpx__err_untail(const char *msg, int err) {
  char tail[64];
  snprintf(tail, sizeof(tail), " (%s)", tpx_strerror(err));
  size_t ml = strlen(msg), tl = strlen(tail);
  while (ml >= tl && strncmp(msg + ml - tl, tail, tl) == 0) ml -= tl;
  return ml;
}

int tpx__err_at(int err, int quiet, const char *file, int line, const char *fmt, ...) {
  char msg[400];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  /* A detail taken from a lower layer's tpx_last_error() ends with the code's
   * name already: it is named once, at the end. */
  snprintf(last_error, sizeof(last_error), "%.*s (%s)", (int)tpx__err_untail(msg, err), msg, tpx_strerror(err));
  last_code = err;
  last_logged = !quiet;
  if (quiet) TPX_LOG_AT(TPX_LOG_DEBUG, "%s", last_error);
  else if (TPX_LOG_INFO <= tpx__log_level) tpx__log_emit(TPX_LOG_INFO, file, line, "%s", last_error);
  return err;
}

int tpx__err_surface_at(int err, const char *file, int line) {
  if (err >= 0 || (last_logged && err == last_code)) return err;
  /* Unlogged detail is this failure's (its code may have been mapped on the
   * way up); after a logged one, a new code nothing recorded gets its text. */
  int detail = !last_logged && last_error[0];
  last_code = err;
  last_logged = 1;
  if (TPX_LOG_INFO <= tpx__log_level)
    tpx__log_emit(TPX_LOG_INFO, file, line, "%s", detail ? last_error : tpx_strerror(err));
  return err;
}
