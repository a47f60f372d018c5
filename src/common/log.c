#include "common/log.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

int tpx__log_level = TPX_LOG_WARN;

void tpx__log_emit(int level, const char *file, int line, const char *fmt, ...) {
  static const char *tags[] = {"", "ERROR", "WARN", "INFO", "DEBUG", "TRACE"};
  char msg[1024];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  /* ISO 8601 in UTC, to the microsecond: comparable across hosts and with
   * other programs' logs (2026-12-05T13:36:11.766320Z). */
  struct tm tm;
  char when[32] = "?";
  if (gmtime_r(&ts.tv_sec, &tm)) strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
  const char *base = strrchr(file, '/');
  /* One fprintf per line so concurrent threads do not interleave. */
  fprintf(stderr, "[tpx %s.%06ldZ %d:%ld %s %s:%d] %s\n", when, ts.tv_nsec / 1000L, (int)getpid(),
          (long)syscall(SYS_gettid), tags[level > 0 && level <= 5 ? level : 0], base ? base + 1 : file, line, msg);
}
