/* Shared helpers for the cmocka tests. */
#ifndef TPX_TESTUTIL_H
#define TPX_TESTUTIL_H

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

/* Deterministic pattern: byte i of stream `seed` (so receivers can verify). */
void tu_fill(void *buf, size_t len, uint32_t seed, size_t offset);
/* Returns the index of the first mismatching byte, or SIZE_MAX when all match. */
size_t tu_check(const void *buf, size_t len, uint32_t seed, size_t offset);
/* Copy len bytes at src into dst through the kernel (process_vm_readv on
 * this process): a look at memory that a transport thread may be writing at
 * that moment, to see whether a transfer is under way or has got this far.
 * The kernel copies, so it is an observation from outside the program's
 * threads, not a data race; never the way to check the bytes of a finished
 * transfer (read those after the completion that publishes them). 0 or -1. */
int tu_peek(void *dst, const void *src, size_t len);
/* Number of open file descriptors of this process (leak checks). */
int tu_count_fds(void);
/* Which descriptors below TU_FDS_MAX are open now, one bit each (a leak
 * check's baseline), and the open ones a snapshot lacks, printed with what
 * they are (readlink of /proc/self/fd/N): what a leak left. */
#define TU_FDS_MAX 4096
typedef struct tu_fds {
  uint64_t bits[TU_FDS_MAX / 64];
} tu_fds_t;
void tu_fds_snapshot(tu_fds_t *s);
void tu_fds_print_new(const tu_fds_t *s, const char *prefix);
/* cmocka setup/teardown pair: the test must leave as many fds open as it found. */
int tu_fd_setup(void **state);
int tu_fd_teardown(void **state);

/* The library's log (stderr) into a file between start and end, at the
 * default level `warn` (the suite runs at TPX_LOG=error), to count what a
 * failure or a refused setting logged. end restores both and returns how
 * many lines contain `what`. */
typedef struct tu_log_capture {
  char path[32];
  int fd, saved, level;
} tu_log_capture_t;
void tu_log_capture_start(tu_log_capture_t *c);
/* The same at `level` (TPX_LOG_INFO: what an API call's error logs). */
void tu_log_capture_start_at(tu_log_capture_t *c, int level);
int tu_log_capture_end(tu_log_capture_t *c, const char *what);
/* The same end, returning all the text (NUL-terminated, caller frees) and
 * its length instead. */
char *tu_log_capture_text(tu_log_capture_t *c, size_t *len);

/* A socket bound to 127.0.0.1:<ephemeral> that does not listen: connects to
 * its port (*port) are refused, and no other test takes the port while it
 * is open. Returns the socket. */
int tu_held_port(uint16_t *port);

#endif
