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
  const char *base = strrchr(file, '/');
  /* One fprintf per line so concurrent threads do not interleave. */
  fprintf(stderr, "[tpx %ld.%06ld %d:%ld %s %s:%d] %s\n", (long)ts.tv_sec, ts.tv_nsec / 1000L,
          (int)getpid(), (long)syscall(SYS_gettid), tags[level > 0 && level <= 5 ? level : 0],
          base ? base + 1 : file, line, msg);
}
