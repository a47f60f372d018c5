/* Channels: a peer's parallel transport connections. Each has one send and
 * one receive comm (each with its window), on net device
 * (channel + gpu) % ndev, or over the GPU's nearest NICs (placement.h). Which
 * chunk takes which channel: route.h; a lost channel: failover.h. struct
 * channel is core.h's. */
#ifndef TPX_ENGINE_CHANNEL_H
#define TPX_ENGINE_CHANNEL_H

#include <stdint.h>

#include "common/retry.h"
#include "engine/window.h"
#include "tpx/net.h"

struct tpx_peer;

/* Which transport call failed in tpx__channels_connect. */
struct tpx__chan_fail {
  int ch;     /* -1: none of the channel's connect / accept (memory, GPU binding) */
  int accept; /* 1 accept, 0 connect */
  int code;   /* the transport's code */
};

/* Data progress of channel c's two windows: state changes, or < 0 with the
 * window's detail. */
int tpx__channel_progress(struct tpx_peer *p, int c);
/* Transport connect / accept of channel c alone (a channel rejoining): 1 both
 * comms up, 0 not yet, < 0 error. */
int tpx__channel_connect(struct tpx_peer *p, int c);

/* Errors are returned with tpx_err_quiet's detail; the caller fails the peer. */
int tpx__channels_alloc(struct tpx_peer *p, int n);
/* Listen once per channel; the handles are kept for the whole setup. */
int tpx__channels_listen(struct tpx_peer *p, int from, int to);
/* Keep only the first n channels (the peer agreed to fewer). */
void tpx__channels_trim(struct tpx_peer *p, int n);
/* Transport connect/accept of every channel, retried until all are up:
 * 1 all up, 0 not yet (did: comms that came up), < 0 error (f says which
 * call). A channel waiting for a fresh handle (rt) is not up. */
int tpx__channels_connect(struct tpx_peer *p, int *did, struct tpx__chan_fail *f);
/* A fresh handle is coming for ch's connect: its comm (if it came up) closes,
 * a connect in progress is abandoned (abandon.h), the dial buffer is clean.
 * 0 or TPX_ENOMEM. */
int tpx__channel_drop_send(struct tpx_peer *p, struct tpx__channel *ch);
/* ch listens anew: its accepted comm (if any) and its listen comm close. */
void tpx__channel_drop_recv(struct tpx_peer *p, struct tpx__channel *ch);
/* Setup ran out of time with channel c not up (c == nch: all up, the peer's
 * were not): the first connect still in progress from channel c on is given
 * up now, and what the transport says it went through (failed attempts,
 * net.h connect_abort) goes to why, then the failed attempts of plugin
 * connects and accepts retried with fresh handles (rt: channel c's, or with
 * c == nch every channel's) ("" when nothing). */
void tpx__channels_setup_why(struct tpx_peer *p, int c, char *why, size_t cap);
/* Close every comm (their requests with them) and listen comm; a connect
 * still in progress is abandoned (abandon.h). */
void tpx__channels_close(struct tpx_peer *p);
/* Post and drain every window of the peer. Returns the number of state
 * changes, or < 0 with the failure's detail in tpx_last_error(). */
/* Anything still queued or in flight on any channel? */
int tpx__channels_busy(const struct tpx_peer *p);

#endif
