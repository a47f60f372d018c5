/* Small helpers shared by every layer. */
#ifndef TPX_COMMON_UTIL_H
#define TPX_COMMON_UTIL_H

#include <stdint.h>
#include <time.h>

static inline uint64_t tpx_now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

#define TPX_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define TPX_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TPX_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
