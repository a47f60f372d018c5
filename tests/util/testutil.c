#include "testutil.h"

#include <dirent.h>

static inline uint8_t pattern_byte(uint32_t seed, size_t i) {
  uint64_t x = (uint64_t)seed * 0x9E3779B97F4A7C15ull + (uint64_t)(i >> 3) * 0xBF58476D1CE4E5B9ull;
  x ^= x >> 29;
  return (uint8_t)(x >> ((i & 7) * 8));
}

void tu_fill(void *buf, size_t len, uint32_t seed, size_t offset) {
  uint8_t *p = buf;
  for (size_t i = 0; i < len; i++) p[i] = pattern_byte(seed, offset + i);
}

size_t tu_check(const void *buf, size_t len, uint32_t seed, size_t offset) {
  const uint8_t *p = buf;
  for (size_t i = 0; i < len; i++)
    if (p[i] != pattern_byte(seed, offset + i)) return i;
  return SIZE_MAX;
}

int tu_count_fds(void) {
  DIR *d = opendir("/proc/self/fd");
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL)
    if (e->d_name[0] != '.') n++;
  closedir(d);
  return n - 1; /* the DIR's own fd */
}

static int fd_baseline;

int tu_fd_setup(void **state) {
  (void)state;
  fd_baseline = tu_count_fds();
  return 0;
}

int tu_fd_teardown(void **state) {
  (void)state;
  /* Every test closes what it opened: nothing may leave an fd behind. */
  assert_int_equal(tu_count_fds(), fd_baseline);
  return 0;
}
