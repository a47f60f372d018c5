/* Vectored requests of the built-in transport (sock.h, "iovec requests"):
 * checking a caller's iovec list, keeping a copy of it with its request,
 * and the byte ranges of it that one part (one socket's share) covers. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "common/error.h"
#include "sock/sock.h"

int tpx__sock_iov_slice(const struct iovec *iov, int cnt, size_t off, size_t len, struct iovec *out,
                        int max, size_t *got) {
  int n = 0;
  size_t done = 0;
  for (int i = 0; i < cnt && done < len && n < max; i++) {
    size_t l = iov[i].iov_len;
    if (off >= l) { /* before the range (empty pieces too) */
      off -= l;
      continue;
    }
    size_t take = l - off;
    if (take > len - done) take = len - done;
    out[n].iov_base = (char *)iov[i].iov_base + off;
    out[n++].iov_len = take;
    done += take;
    off = 0;
  }
  *got = done;
  return n;
}

int tpx__sock_iov_check(const struct iovec *iov, int cnt, size_t *total, const char *fn) {
  if (cnt < 0 || cnt > TPX_NET_IOV_MAX)
    return tpx_err_quiet(TPX_EINVAL, "%s: %d pieces (at most %d per request)", fn, cnt, TPX_NET_IOV_MAX);
  if (iov == NULL && cnt > 0)
    return tpx_err_quiet(TPX_EINVAL, "%s: iovec list is NULL with %d pieces", fn, cnt);
  size_t sum = 0;
  for (int i = 0; i < cnt; i++) {
    size_t l = iov[i].iov_len;
    if (l > 0 && iov[i].iov_base == NULL)
      return tpx_err_quiet(TPX_EINVAL, "%s: piece %d is NULL with %zu bytes", fn, i, l);
    if (l > 0 && (uintptr_t)iov[i].iov_base + l < (uintptr_t)iov[i].iov_base)
      return tpx_err_quiet(TPX_EINVAL, "%s: piece %d (%p + %zu) wraps the address space", fn, i,
                     iov[i].iov_base, l);
    if (l > TPX_SOCK_MAX_MSG - sum)
      return tpx_err_quiet(TPX_EINVAL,
                     "%s: pieces of more than the maximum message of %llu bytes together", fn,
                     (unsigned long long)TPX_SOCK_MAX_MSG);
    sum += l;
  }
  *total = sum;
  return 0;
}

int tpx__sock_req_set_iov(struct tpx_sock_req *r, const struct iovec *iov, int cnt) {
  if (cnt > r->iov_cap) {
    /* Kept with the slot for its next requests: no allocation per request
     * once the slots have seen their largest list. No thread reads it now
     * (the slot is free). */
    struct iovec *n = realloc(r->iov, (size_t)cnt * sizeof(*n));
    if (n == NULL) return tpx_err_quiet(TPX_ENOMEM, "out of memory for %d pieces", cnt);
    r->iov = n;
    r->iov_cap = cnt;
  }
  if (cnt > 0) memcpy(r->iov, iov, (size_t)cnt * sizeof(*iov));
  r->iovcnt = cnt;
  return 0;
}
