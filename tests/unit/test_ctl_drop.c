/* Dropping a control connection (src/engine/control.c): whatever the last
 * flush meets, the dropped socket leaves the endpoint's epoll set. A flush
 * that finds the socket buffer full arms EPOLLOUT; done after leaving the
 * set, it put the socket back in it, where it stayed while the socket
 * lingered in the closing list, naming a peer that could be freed by then
 * (a heap-use-after-free in the progress thread under ASan). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "engine/control.h"
#include "engine/core.h"
#include "engine/peer.h"
#include "testutil.h"

/* A connected loopback TCP pair, both non-blocking, with small buffers. */
static void tcp_pair(int *a, int *b) {
  int l = socket(AF_INET, SOCK_STREAM, 0);
  assert_true(l >= 0);
  struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t sl = sizeof(sa);
  assert_int_equal(bind(l, (struct sockaddr *)&sa, sizeof(sa)), 0);
  assert_int_equal(listen(l, 1), 0);
  assert_int_equal(getsockname(l, (struct sockaddr *)&sa, &sl), 0);
  *a = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
  assert_true(*a >= 0);
  int small = 4096;
  assert_int_equal(setsockopt(*a, SOL_SOCKET, SO_SNDBUF, &small, sizeof(small)), 0);
  assert_true(connect(*a, (struct sockaddr *)&sa, sizeof(sa)) == 0 || errno == EINPROGRESS);
  *b = accept4(l, NULL, NULL, SOCK_NONBLOCK);
  assert_true(*b >= 0);
  assert_int_equal(setsockopt(*b, SOL_SOCKET, SO_RCVBUF, &small, sizeof(small)), 0);
  close(l);
}

/* Registered events of the endpoint's epoll set: a wait that returns none. */
static int events_now(int epfd) {
  struct epoll_event ev[4];
  int n = epoll_wait(epfd, ev, 4, 0);
  assert_true(n >= 0);
  return n;
}

static void drop_with_full_socket(int graceful) {
  tpx_endpoint_t *ep = calloc(1, sizeof(*ep));
  struct tpx_peer *p = calloc(1, sizeof(*p));
  assert_non_null(ep);
  assert_non_null(p);
  ep->epfd = epoll_create1(EPOLL_CLOEXEC);
  assert_true(ep->epfd >= 0);
  ep->cfg.max_ctl_out_bytes = 1 << 20;
  snprintf(ep->name, sizeof(ep->name), "test");
  snprintf(p->where, sizeof(p->where), "test peer");
  p->ep = ep;
  int other;
  tcp_pair(&p->fd, &other);
  tpx__ctl_epoll_set(ep, p, EPOLLIN);
  /* Fill the path to the peer, which reads nothing, until the socket refuses. */
  static uint8_t junk[65536];
  size_t sent = 0;
  for (int i = 0; i < 100000; i++) {
    ssize_t n = send(p->fd, junk, sizeof(junk), MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0) {
      assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
      break;
    }
    sent += (size_t)n;
  }
  assert_true(sent > 0);
  /* Frames still queued, under the limit: the last flush meets a full socket. */
  p->out.p = calloc(1, 8192);
  assert_non_null(p->out.p);
  p->out.len = p->out.cap = 8192;
  assert_int_equal(tpx__ctl_flush(p), 0);
  assert_true(p->ev & EPOLLOUT); /* armed, as on a live peer */
  tpx__ctl_drop(p, graceful);
  assert_int_equal(p->fd, -1);
  assert_int_equal(p->ev, 0);
  /* The lingering socket, half closed, is writable: were it still in the
   * set, the wait would report it. */
  assert_int_equal(events_now(ep->epfd), 0);
  assert_int_equal(ep->nclosing, graceful ? 1 : 0);
  tpx__ctl_closing_step(ep, 0, 1);
  assert_int_equal(ep->nclosing, 0);
  close(other);
  close(ep->epfd);
  free(ep->closing);
  tpx__wbuf_free(&p->out);
  free(p);
  free(ep);
}

static void test_graceful_drop_leaves_epoll(void **state) {
  (void)state;
  drop_with_full_socket(1);
}

static void test_abrupt_drop_leaves_epoll(void **state) {
  (void)state;
  drop_with_full_socket(0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_graceful_drop_leaves_epoll),
      cmocka_unit_test(test_abrupt_drop_leaves_epoll),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
