#define _GNU_SOURCE /* process_vm_readv */
#include "testutil.h"

#include <arpa/inet.h>
#include <dirent.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/log.h"

static inline uint64_t pattern_word(uint32_t seed, size_t w) {
  uint64_t x = (uint64_t)seed * 0x9E3779B97F4A7C15ull + (uint64_t)w * 0xBF58476D1CE4E5B9ull;
  return x ^ (x >> 29);
}

static inline uint8_t pattern_byte(uint32_t seed, size_t i) {
  return (uint8_t)(pattern_word(seed, i >> 3) >> ((i & 7) * 8));
}

/* Whole 8-byte words of the pattern at once where offset + i is a multiple of
 * 8 (a little-endian word holds its 8 bytes in order): one access instead of
 * eight, which is what keeps the tests' fills and checks of many megabytes
 * quick under ThreadSanitizer, whose cost is per access. */
#if defined(__BYTE_ORDER__) && __BYTE_ORDER__ == __ORDER_LITTLE_ENDIAN__
#define TU_WORDS 1
#else
#define TU_WORDS 0
#endif

void tu_fill(void *buf, size_t len, uint32_t seed, size_t offset) {
  uint8_t *p = buf;
  size_t i = 0;
  for (; i < len && (!TU_WORDS || (offset + i) % 8); i++) p[i] = pattern_byte(seed, offset + i);
  for (; TU_WORDS && i + 8 <= len; i += 8) {
    uint64_t w = pattern_word(seed, (offset + i) >> 3);
    memcpy(p + i, &w, 8);
  }
  for (; i < len; i++) p[i] = pattern_byte(seed, offset + i);
}

size_t tu_check(const void *buf, size_t len, uint32_t seed, size_t offset) {
  const uint8_t *p = buf;
  size_t i = 0;
  for (; i < len && (!TU_WORDS || (offset + i) % 8); i++)
    if (p[i] != pattern_byte(seed, offset + i)) return i;
  for (; TU_WORDS && i + 8 <= len; i += 8) {
    uint64_t v;
    memcpy(&v, p + i, 8);
    if (v != pattern_word(seed, (offset + i) >> 3)) break; /* the byte loop below names it */
  }
  for (; i < len; i++)
    if (p[i] != pattern_byte(seed, offset + i)) return i;
  return SIZE_MAX;
}

int tu_peek(void *dst, const void *src, size_t len) {
  struct iovec l = {dst, len}, r = {(void *)src, len};
  return process_vm_readv(getpid(), &l, 1, &r, 1, 0) == (ssize_t)len ? 0 : -1;
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

void tu_fds_snapshot(tu_fds_t *s) {
  memset(s, 0, sizeof(*s));
  DIR *d = opendir("/proc/self/fd");
  if (!d) return;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    int fd = atoi(e->d_name);
    if (e->d_name[0] != '.' && fd >= 0 && fd < TU_FDS_MAX && fd != dirfd(d)) s->bits[fd / 64] |= 1ull << (fd % 64);
  }
  closedir(d);
}

void tu_fds_print_new(const tu_fds_t *s, const char *prefix) {
  tu_fds_t now;
  tu_fds_snapshot(&now);
  for (int fd = 0; fd < TU_FDS_MAX; fd++) {
    if (!(now.bits[fd / 64] >> (fd % 64) & 1) || (s->bits[fd / 64] >> (fd % 64) & 1)) continue;
    char path[32], what[256];
    snprintf(path, sizeof(path), "/proc/self/fd/%d", fd);
    ssize_t n = readlink(path, what, sizeof(what) - 1);
    what[n > 0 ? n : 0] = '\0';
    fprintf(stderr, "%sfd %d: %s\n", prefix, fd, n > 0 ? what : "?");
  }
}

static int fd_baseline;

int tu_fd_setup(void **state) {
  (void)state;
  fd_baseline = tu_count_fds();
  return 0;
}

int tu_fd_teardown(void **state) {
  (void)state;
  /* Every test closes what it opened: nothing may leave an fd behind. A
   * transport's threads may still be closing sockets of a comm torn down a
   * moment ago (sooner or later by scheduling): up to 5 s for that. */
  int n = tu_count_fds();
  for (int i = 0; i < 500 && n != fd_baseline; i++) {
    usleep(10000);
    n = tu_count_fds();
  }
  assert_int_equal(n, fd_baseline);
  return 0;
}

void tu_log_capture_start(tu_log_capture_t *c) { tu_log_capture_start_at(c, TPX_LOG_WARN); }

void tu_log_capture_start_at(tu_log_capture_t *c, int level) {
  snprintf(c->path, sizeof(c->path), "/tmp/tpx_logXXXXXX");
  c->fd = mkstemp(c->path);
  assert_true(c->fd >= 0);
  fflush(stderr);
  c->saved = dup(2);
  assert_true(c->saved >= 0);
  assert_int_equal(dup2(c->fd, 2), 2);
  (void)tpx_config_global(); /* read first: its TPX_LOG would reset the level */
  c->level = tpx__log_level;
  tpx__log_level = level;
}

int tu_log_capture_end(tu_log_capture_t *c, const char *what) {
  fflush(stderr);
  tpx__log_level = c->level;
  assert_int_equal(dup2(c->saved, 2), 2);
  close(c->saved);
  close(c->fd);
  FILE *f = fopen(c->path, "r");
  assert_non_null(f);
  char line[2048];
  int n = 0;
  while (fgets(line, sizeof(line), f))
    if (strstr(line, what)) n++;
  fclose(f);
  unlink(c->path);
  return n;
}

char *tu_log_capture_text(tu_log_capture_t *c, size_t *len) {
  fflush(stderr);
  tpx__log_level = c->level;
  assert_int_equal(dup2(c->saved, 2), 2);
  close(c->saved);
  off_t n = lseek(c->fd, 0, SEEK_END);
  assert_true(n >= 0);
  char *text = malloc((size_t)n + 1);
  assert_non_null(text);
  assert_int_equal(pread(c->fd, text, (size_t)n, 0), n);
  text[n] = 0;
  close(c->fd);
  unlink(c->path);
  *len = (size_t)n;
  return text;
}

int tu_held_port(uint16_t *port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_true(fd >= 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
  socklen_t sl = sizeof(sa);
  assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &sl), 0);
  *port = ntohs(sa.sin_port);
  return fd;
}
