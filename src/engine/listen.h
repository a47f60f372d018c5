/* The endpoint's control listener: a port (explicit, ephemeral, or
 * TPX_PORT_BASE + gpu retried over TPX_PORT_SPAN), and new connections
 * accepted as peers in setup. */
#ifndef TPX_ENGINE_LISTEN_H
#define TPX_ENGINE_LISTEN_H

#include <stddef.h>
#include <sys/socket.h>

#include "tpx/endpoint.h"

int tpx__listen_open(tpx_endpoint_t *ep, const char *host, int port_req);
/* Accept what is pending (bounded per call; admission: admit.h;
 * EMFILE/ENFILE pause the listener). Returns connections taken. */
int tpx__listen_accept(tpx_endpoint_t *ep);
/* The listener paused after EMFILE/ENFILE is watched again once its time
 * is up (called from the periodic scan). */
void tpx__listen_resume(tpx_endpoint_t *ep, uint64_t now);
/* "a.b.c.d:port" or "[v6]:port". */
void tpx__listen_fmt_addr(const struct sockaddr *sa, char *out, size_t cap);

#endif
