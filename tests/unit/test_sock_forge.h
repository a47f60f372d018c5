/* For tests that play a lying peer of the built-in transport: raw sockets
 * dialled to a listen handle with valid hellos, and whole sends. */
#ifndef TPX_TEST_SOCK_FORGE_H
#define TPX_TEST_SOCK_FORGE_H

#include <errno.h>
#include <netinet/in.h>
#include <string.h>
#include <sys/socket.h>

#include "sock/wire.h"
#include "common/util.h"
#include "test_sock_util.h"
#include "testutil.h"
#include "tpx/net.h"

static inline void ts_send_all(int fd, const void *p, size_t n) {
  const char *b = p;
  while (n > 0) {
    ssize_t k = send(fd, b, n, MSG_NOSIGNAL);
    if (k < 0 && errno == EINTR) continue;
    assert_true(k > 0);
    b += k;
    n -= (size_t)k;
  }
}

/* Dial nsocks + 1 raw sockets (socket 0 and the data sockets) to the listen
 * handle h and send each its hello; the caller accepts the comm they form. */
static inline void ts_forge_dial(const unsigned char *h, int nsocks, int *fd, uint64_t seed) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof(a));
  a.sin_family = AF_INET;
  memcpy(&a.sin_addr, h + TPX_WH_ADDR, 4);
  memcpy(&a.sin_port, h + TPX_WH_PORT, 2);
  for (int i = 0; i <= nsocks; i++) {
    fd[i] = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    assert_true(fd[i] >= 0);
    assert_int_equal(connect(fd[i], (struct sockaddr *)&a, sizeof(a)), 0);
    uint8_t hello[TPX_WIRE_HELLO_BYTES];
    memset(hello, 0, sizeof(hello));
    tpx__put32(hello, TPX_WIRE_HELLO_MAGIC);
    tpx__put16(hello + 4, TPX_WIRE_VERSION);
    tpx__put16(hello + 6, TPX_WIRE_HELLO_BYTES);
    tpx__put64(hello + 8, tpx__get64(h + TPX_WH_NONCE));
    tpx__put64(hello + 16, seed);
    tpx__put16(hello + 24, (uint16_t)i);
    tpx__put16(hello + 26, (uint16_t)nsocks);
    ts_send_all(fd[i], hello, sizeof(hello));
  }
}

/* A listen comm on `net`, nsocks + 1 forged sockets dialled to it, and the
 * recv comm they form, accepted (dev: the device handle of an UNPACK accept). */
static inline void *ts_forge_accept(tpx_net_t *net, int nsocks, int *fd, uint64_t seed, void *dev, void **lc) {
  unsigned char h[TPX_NET_HANDLE_BYTES];
  memset(h, 0, sizeof(h));
  assert_int_equal(net->ops->listen(net, 0, h, lc), 0);
  assert_int_equal(tpx__get16(h + TPX_WH_NSOCKS), nsocks);
  ts_forge_dial(h, nsocks, fd, seed);
  void *r = NULL;
  uint64_t end = tpx__now_ns() + (uint64_t)TS_TIMEOUT_MS * 1000000ull;
  while (r == NULL && tpx__now_ns() < end) assert_int_equal(net->ops->accept(net, *lc, &r, dev), 0);
  assert_non_null(r);
  return r;
}

#endif
