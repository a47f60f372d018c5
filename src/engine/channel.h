/* Channels: a peer's parallel transport connections. Each has one send and
 * one receive comm (each with its window), on net device
 * (channel + gpu) % ndev, or over the GPU's nearest NICs (placement.h). Which
 * chunk takes which channel: route.h; a lost channel: failover.h. */
#ifndef TPX_ENGINE_CHANNEL_H
#define TPX_ENGINE_CHANNEL_H

#include <stdint.h>

#include "common/retry.h"
#include "engine/window.h"
#include "tpx/net.h"

struct tpx_peer;

/* What the transport sees on every retry of one connect: the handle buffer
 * and the device-handle storage, on the heap so that a connect the channel
 * abandons keeps them where they were (abandon.h). */
struct dial_buf {
  uint8_t handle[TPX_NET_HANDLE_BYTES];
  tpx_net_dev_handle_t dev;
  int started; /* connect said "not yet": the transport holds state for this buffer */
};

/* A loaded plugin's failed connect or accept of the channel, retried with a
 * fresh listen handle (relisten.h). Generation 0 is the HELLO's handle. */
struct chan_retry {
  uint32_t send_gen;  /* of the peer's handle our connect uses */
  uint32_t recv_gen;  /* of our listen handle */
  int want_handle;    /* our connect failed: nothing to connect to until the peer's next handle */
  int ask_due;        /* and the ASK for it goes once conn.next_ns passed */
  int relisten_due;   /* our accept failed: listen anew once acc.next_ns passed */
  int asks;           /* fresh handles the peer asked for */
  int conn_code, acc_code; /* our last connect's / accept's failure (the ASK / HANDLE says it) */
  struct tpx_retry conn, acc;           /* our connects' and accepts' failures */
  struct tpx_retry peer_acc, peer_conn; /* as the peer told: its accepts of our connects, its connects */
};

struct channel {
  int idx, dev;
  struct window sq, rq;
  void *listen_comm;
  uint8_t my_handle[TPX_NET_HANDLE_BYTES];
  struct dial_buf *dial;          /* the peer's handle, connected to; NULL once given away */
  tpx_net_dev_handle_t recv_dev;  /* caller-owned device handle storage of accept */
  struct chan_retry rt;
  int down;                       /* lost (failover.h): its comms are closed, its chunks go elsewhere */
  uint32_t losses;                /* times it was lost */
  uint32_t rejoins;               /* times it came back */
  uint64_t rejoin_next_ns;        /* rejoin.h: the next attempt */
  int rejoin_wait_ms;             /* and the pause after a failed one */
  uint32_t rj_gen;                /* our listen handle's generation (CHAN_REJOIN) */
  int rj_listening;               /* our fresh handle went to the peer */
  int rj_have_handle;             /* the peer's fresh handle is in dial->handle */
  int rj_up_sent, rj_peer_up;     /* CHAN_UP sent / received for this attempt */
  uint64_t rj_deadline;           /* this attempt ends */
};

/* Which transport call failed in tpx__channels_connect. */
struct chan_fail {
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
int tpx__channels_connect(struct tpx_peer *p, int *did, struct chan_fail *f);
/* A fresh handle is coming for ch's connect: its comm (if it came up) closes,
 * a connect in progress is abandoned (abandon.h), the dial buffer is clean.
 * 0 or TPX_ENOMEM. */
int tpx__channel_drop_send(struct tpx_peer *p, struct channel *ch);
/* ch listens anew: its accepted comm (if any) and its listen comm close. */
void tpx__channel_drop_recv(struct tpx_peer *p, struct channel *ch);
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
