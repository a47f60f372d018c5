/* The integrity tests' fault injector: this program's own recvmsg(), which
 * the library's data path (src/sock/comm.c, unpack.c: chunk bytes; control
 * frames come through recv) calls instead of libc's. While flip_every is n >
 * 0 it flips one bit of every n-th read's chunk bytes after the kernel
 * handed them over, as a NIC, a middlebox or a bad DIMM would; flips counts
 * them. Include it once per program (it defines recvmsg). */
#ifndef TPX_TESTS_FLIP_INJECT_H
#define TPX_TESTS_FLIP_INJECT_H

#include <dlfcn.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>

#include "sock/wire.h"

static atomic_int flip_every; /* 0: off */
static atomic_uint flip_reads, flips;

typedef ssize_t (*flip_recvmsg_fn)(int, struct msghdr *, int);

ssize_t recvmsg(int fd, struct msghdr *mh, int flags) {
  static _Atomic(flip_recvmsg_fn) real; /* every I/O thread may come first */
  flip_recvmsg_fn f = atomic_load(&real);
  if (!f) atomic_store(&real, f = (flip_recvmsg_fn)dlsym(RTLD_NEXT, "recvmsg"));
  ssize_t n = f(fd, mh, flags);
  int every = atomic_load(&flip_every);
  /* part headers come alone, at most TPX_WIRE_PART_BYTES: only chunk bytes are
   * flipped (a next part's header rides last, never first) */
  if (n <= 0 || !every || mh->msg_iovlen == 0 || mh->msg_iov[0].iov_len <= TPX_WIRE_PART_BYTES)
    return n;
  unsigned k = atomic_fetch_add(&flip_reads, 1) + 1;
  if (k % (unsigned)every) return n;
  struct iovec *v = &mh->msg_iov[0];
  size_t in = (size_t)n < v->iov_len ? (size_t)n : v->iov_len;
  size_t bit = ((size_t)k * 2654435761u) % (in * 8);
  ((uint8_t *)v->iov_base)[bit / 8] ^= (uint8_t)(1u << (bit % 8));
  atomic_fetch_add(&flips, 1);
  return n;
}

#endif
