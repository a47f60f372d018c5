/* Listening on "any free port" when the machine is busy with short-lived
 * connections (ports.c says why bind(0) is not enough). */
#ifndef TPX_COMMON_PORTS_H
#define TPX_COMMON_PORTS_H

#include <sys/socket.h>

/* Sets SO_REUSEADDR on fd: on our listening sockets, and on our connecting
 * sockets so that their TIME_WAIT leftovers do not keep ports from
 * tpx__bind_port. Best effort. */
void tpx__set_reuseaddr(int fd);

/* Bind fd to the address in addr (its port ignored) on `port`, or with
 * port 0 on some free port: bind(0), and after EADDRINUSE random ports of the
 * ephemeral range, a bounded number of times. Sets SO_REUSEADDR. 0, or the
 * errno of the last attempt. */
int tpx__bind_port(int fd, const struct sockaddr *addr, socklen_t len, int port);

#endif
