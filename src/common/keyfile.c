/* The authentication key's checks (keyfile.h). */
#include "common/keyfile.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "common/error.h"
#include "common/hmac.h"
#include "tpx/config.h"

int tpx__key_len_check(size_t len, const char *what) {
  if (len == 0) return tpx_err_quiet(TPX_EINVAL, "config: %s: the key is empty", what);
  if (len < TPX_AUTH_KEY_MIN)
    return tpx_err_quiet(
        TPX_EINVAL,
        "config: %s: the key has %zu bytes, at least %d are needed (e.g. openssl rand -hex 32)",
        what, len, TPX_AUTH_KEY_MIN);
  if (len > TPX_AUTH_KEY_MAX)
    return tpx_err_quiet(TPX_EINVAL, "config: %s: the key is oversize (more than %d bytes)", what,
                         TPX_AUTH_KEY_MAX);
  return 0;
}

/* Who may read the file: only its owner (this user, or root who can read
 * everything anyway). Execute bits give nothing away. */
static int keyfile_mode_ok(const char *path, const struct stat *st) {
  if (!S_ISREG(st->st_mode))
    return tpx_err_quiet(TPX_EINVAL, "config: TPX_AUTH_KEY_FILE %s is not a regular file", path);
  if (st->st_uid != geteuid() && st->st_uid != 0)
    return tpx_err_quiet(
        TPX_EINVAL,
        "config: TPX_AUTH_KEY_FILE %s is owned by uid %u, not by this user (%u) or root", path,
        (unsigned)st->st_uid, (unsigned)geteuid());
  if (st->st_mode & (S_IRGRP | S_IWGRP | S_IROTH | S_IWOTH))
    return tpx_err_quiet(
        TPX_EINVAL,
        "config: TPX_AUTH_KEY_FILE %s is readable or writable by group or others (mode %04o); "
        "refused: chmod 600 it",
        path, (unsigned)(st->st_mode & 07777));
  return 0;
}

static int read_upto(int fd, uint8_t *buf, size_t cap, size_t *got) {
  *got = 0;
  while (*got < cap) {
    ssize_t n = read(fd, buf + *got, cap - *got);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return TPX_ESYSTEM;
    if (n == 0) break;
    *got += (size_t)n;
  }
  return 0;
}

int tpx__keyfile_read(const char *path, uint8_t *out, size_t *len) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY);
  if (fd < 0)
    return tpx_err_quiet(TPX_EINVAL, "config: TPX_AUTH_KEY_FILE %s: %s", path, strerror(errno));
  struct stat st;
  int rc = fstat(fd, &st) != 0 ? tpx_err_quiet(TPX_EINVAL, "config: TPX_AUTH_KEY_FILE %s: %s", path,
                                               strerror(errno))
                               : keyfile_mode_ok(path, &st);
  uint8_t buf[TPX_AUTH_KEY_MAX + 3]; /* the largest key, its "\r\n", and one byte to see more */
  size_t n = 0;
  if (rc == 0 && read_upto(fd, buf, sizeof(buf), &n) != 0)
    rc = tpx_err_quiet(TPX_EINVAL, "config: TPX_AUTH_KEY_FILE %s: %s", path, strerror(errno));
  close(fd);
  if (rc == 0 && n > 0 && buf[n - 1] == '\n') n--;
  if (rc == 0 && n > 0 && buf[n - 1] == '\r') n--;
  char what[300];
  snprintf(what, sizeof(what), "TPX_AUTH_KEY_FILE %s", path);
  if (rc == 0) rc = tpx__key_len_check(n, what);
  if (rc == 0) {
    memcpy(out, buf, n);
    *len = n;
  }
  tpx__cleanse(buf, sizeof(buf));
  return rc;
}
