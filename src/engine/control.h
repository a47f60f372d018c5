/* The control connection's I/O: frames out (buffered, flushed without
 * blocking), bytes in (buffered until dispatch.c parses them), epoll
 * interest, and the lingering close of finished control sockets. Errors are
 * returned (tpx_err_quiet detail); failing the peer is the caller's call. */
#ifndef TPX_ENGINE_CONTROL_H
#define TPX_ENGINE_CONTROL_H

#include <stdint.h>

#include "tpx/endpoint.h"

struct tpx_peer;

void tpx__ctl_epoll_set(tpx_endpoint_t *ep, struct tpx_peer *p, uint32_t events);
/* Send what p->out holds, as far as the socket takes it. */
int tpx__ctl_flush(struct tpx_peer *p);
/* After appending a frame to p->out (rc: the append's result): flush it. */
int tpx__ctl_send(struct tpx_peer *p, int rc);
/* Read what is there into p->in: > 0 bytes read, 0 nothing (or no room
 * until a frame is parsed), TPX_ECLOSED at EOF / reset (p->eof set, the
 * socket closed), other < 0 errors. */
int tpx__ctl_read(struct tpx_peer *p);
/* Close the control socket: gracefully (last frames, FIN, linger until the
 * peer's FIN so unread bytes never turn into a RST) or at once. */
void tpx__ctl_drop(struct tpx_peer *p, int graceful);
/* Lingering closes: step them (force: close all now). */
void tpx__ctl_closing_step(tpx_endpoint_t *ep, uint64_t now, int force);
int tpx__ctl_set_nodelay(int fd);
/* The kernel's liveness on a control socket (engine/live.h): keepalive
 * probes after a second of silence, and the connection aborted (ETIMEDOUT,
 * which tpx__ctl_read reports as TPX_ETIMEDOUT) once nothing came back for
 * timeout_ms, probes and unacknowledged data alike. 0, or TPX_ESYSTEM with
 * tpx_err_quiet detail. */
int tpx__ctl_set_keepalive(int fd, int timeout_ms);
/* A connection refused before it became a peer (limits): one ERROR frame
 * saying why, sent without waiting (best effort), then closed. With a key
 * the text is only "refused": the connector is not authenticated. */
void tpx__ctl_refuse(tpx_endpoint_t *ep, int fd, int code, const char *why);

#endif
