/* Recording an error: tpx_err() stores the detail for tpx_last_error(), logs
 * it (info: the caller gets code and text and reports them; debug for
 * expected conditions via tpx_err_quiet) and returns the code, so call sites
 * read `return tpx_err(TPX_EINVAL, "isend: size %zu", n);`. A failure with
 * nobody to return it to (a peer failing in the progress thread) is logged
 * at WARN/ERROR where it is decided (tpx__peer_fail), not through these. */
#ifndef TPX_COMMON_ERROR_H
#define TPX_COMMON_ERROR_H

#include <stddef.h>

#include "tpx/error.h"

int tpx__err_at(int err, int quiet, const char *file, int line, const char *fmt, ...)
    __attribute__((format(printf, 5, 6)));

#define tpx_err(code, ...) tpx__err_at((code), 0, __FILE__, __LINE__, __VA_ARGS__)
#define tpx_err_quiet(code, ...) tpx__err_at((code), 1, __FILE__, __LINE__, __VA_ARGS__)

/* Length of msg without the " (<code's name>)" tails that tpx_err appends
 * (a detail from tpx_last_error() carries one). */
size_t tpx__err_untail(const char *msg, int err);

/* Forget the recorded detail: a call that may record one can be told apart. */
void tpx__err_clear(void);

/* A quiet error from below becomes a failure here, where it is decided:
 * log the recorded detail (info) unless a tpx_err or an earlier surface on
 * this thread logged it already, and return the code. The rule: lower layers
 * (sock/, net/, cuda/, tcpx/, topo/) record with tpx_err_quiet and return;
 * the engine (tpx__peer_fail, its API calls), the NCCL plugin's table and
 * the tools log, once. */
int tpx__err_surface_at(int err, const char *file, int line);
#define tpx_err_surface(code) tpx__err_surface_at((code), __FILE__, __LINE__)

#endif
