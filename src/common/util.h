/* Small helpers shared by every layer. */
#ifndef TPX_COMMON_UTIL_H
#define TPX_COMMON_UTIL_H

#include <stdint.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

static inline uint64_t tpx__now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static inline uint64_t tpx__ms_to_ns(int ms) { return (uint64_t)ms * 1000000ull; }

/* Non-zero random 64 bits: getrandom (which waits only until the kernel's
 * generator is first seeded), else clock and pid. */
static inline uint64_t tpx__random_u64(void) {
  uint64_t v = 0;
  if (getrandom(&v, sizeof(v), 0) != (ssize_t)sizeof(v)) v = tpx__now_ns() ^ ((uint64_t)getpid() << 32);
  return v ? v : 1;
}

/* CPUs this process may run on (its affinity), at least 1: what the
 * defaults of threads, channels and sockets are sized by (cpus.c). */
int tpx__cpu_count(void);

#define TPX_ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
#define TPX_MIN(a, b) ((a) < (b) ? (a) : (b))
#define TPX_MAX(a, b) ((a) > (b) ? (a) : (b))

#endif
