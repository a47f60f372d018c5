/* Peers: one remote endpoint, its control connection and its channels.
 * This file's functions are the peer object's lifetime (list, references,
 * free); failure and close are fail.c, setup handshake.c, the control
 * stream control.c (I/O) and dispatch.c (incoming frames). */
#ifndef TPX_ENGINE_PEER_H
#define TPX_ENGINE_PEER_H

#include <stdint.h>
#include <sys/socket.h>

#include "engine/admit.h"
#include "common/retry.h"
#include "engine/channel.h"
#include "engine/peer_log.h"
#include "engine/route.h"
#include "engine/wire.h"
#include "tpx/endpoint.h"

struct op;
struct ctl_seal;

/* A window's bytes and busy time when its speed was last sampled (stripe.c). */
struct stripe_base {
  uint64_t bytes, busy;
};

/* A ready peer's silence and pings (live.h). */
struct live {
  int armed;         /* stepping since the peer became ready */
  int judged;        /* the peer sent HELLO_F_LIVE: pinged, and failed when silent */
  int heard;         /* a byte came since it became ready */
  int rx;            /* bytes came since the last step (set by control.c's reads) */
  uint64_t rx_at;    /* last sign of life, ns (shifted past our own gaps) */
  uint64_t step_at;  /* our last step */
  uint64_t ping_at;  /* our last PING_ASK */
  uint32_t seq;      /* our last PING_ASK's seq (0: none yet) */
  uint32_t answered; /* the highest seq the peer answered */
  uint64_t asks_in;  /* the peer's PING_ASKs we answered */
};


enum peer_state {
  P_CONNECTING = 1, /* TCP connect in progress (we dialled) */
  P_WAIT_AUTH,      /* dialled, with a key: challenge sent, waiting for the response (auth.h) */
  P_WAIT_HELLO,     /* accepted: waiting for HELLO (with a key: challenge and proof first) */
  P_WAIT_ACK,       /* dialled: HELLO sent, waiting for HELLO_ACK */
  P_NET_SETUP,      /* transport connect/accept in progress */
  P_READY,
  P_CLOSING,        /* remote said BYE / closed: finishing data in flight */
  P_DEAD            /* failed or closed; err says why */
};

static inline int tpx__peer_in_setup(int st) { return st >= P_CONNECTING && st <= P_NET_SETUP; }
/* A setup state in words, for messages. */
static inline const char *tpx__peer_setup_stage(int st) {
  switch (st) {
  case P_CONNECTING: return "connecting the control connection";
  case P_WAIT_AUTH: return "waiting for the peer's answer to our key challenge";
  case P_WAIT_HELLO: return "waiting for the peer's HELLO";
  case P_WAIT_ACK: return "waiting for the peer's answer to our HELLO";
  case P_NET_SETUP: return "transport connect/accept";
  default: return "setup";
  }
}

enum peer_auth { PEER_AUTH_NONE = 0, PEER_AUTH_CHALLENGED, PEER_AUTH_OK };

struct cts_entry { /* a peer's recv announcement no send matched yet */
  uint64_t recv_id, tag, cap;
  int inl_ok;
};

struct id_slot {
  struct op *op;
  uint32_t gen;
};

struct tpx_peer {
  tpx_endpoint_t *ep;
  int refs;
  int state;
  int err;
  char errmsg[320];
  int incoming;
  struct tpx_src src; /* incoming: where it came from (admit.h) */
  int listed;     /* in ep->peers */
  int ever_ready; /* reached P_READY once (else a failed incoming one is swept) */
  int in_acceptq;
  int user_closed;
  int bye_sent, bye_recv, eof;
  int fd;
  uint32_t ev; /* epoll events registered */
  char name[TPX_NAME_MAX];
  char where[96]; /* "name (addr:port)" for messages */
  uint64_t uuid;
  int gpu;
  int pack;      /* the peer takes packed plans (HELLO_F_PACK) */
  int pack_iov;  /* and moves them without copies (HELLO_F_IOV) */
  int pack_gpu;  /* and takes them into its GPU memory (HELLO_F_PACK_GPU) */
  /* shared-key authentication (auth.h) */
  int auth; /* enum peer_auth: the acceptor answered the challenge; both proofs checked */
  uint8_t auth_nc[WIRE_AUTH_NONCE], auth_ns[WIRE_AUTH_NONCE]; /* the connector's and acceptor's nonces */
  uint8_t auth_skey[TPX_NET_KEY_BYTES];                       /* session key (PEER_AUTH_OK) */
  /* What the channels pass to listen_keyed / connect_keyed: auth_skey, set by
   * auth.c once both proofs are checked and the transport takes keys; NULL
   * otherwise (no key, or a transport whose sockets are its own). */
  const uint8_t *net_key;
  struct ctl_seal *seal; /* TPX_ENCRYPT: the control connection's records once authenticated (ctl_seal.h) */
  struct wbuf out;
  size_t out_off;
  uint8_t *in;
  size_t in_len, in_cap;
  int nch;
  struct channel *ch;
  uint64_t setup_deadline;
  uint64_t setup_next, setup_wait; /* transport setup: next step, and the wait before it (handshake.c) */
  /* Transport setup on a loaded plugin, both sides said HELLO_F_RELISTEN
   * (relisten.h): failed connects / accepts get fresh listen handles, and
   * ready waits for the peer's RELISTEN_UP. */
  int relisten;
  uint32_t rl_sent, rl_got; /* our ASK / HANDLE frames sent, the peer's read */
  int rl_up_sent;           /* our UP went since our comms last changed */
  int rl_peer_up;           /* the peer's UP came, answering every frame we sent */
  /* we dialled: the control connect's address and its attempts (redial.h) */
  struct sockaddr_storage dial_sa;
  socklen_t dial_len;
  int dial_retries;
  struct tpx_retry dial;
  /* P_CLOSING because the control connection ended: when requests are still
   * in the transport at this time and none completed since, fail the peer
   * (a plugin may never complete nor fail them: TCPX's rc 2). */
  uint64_t eof_deadline;
  struct live live; /* silence and pings once ready (live.h) */
  /* ops */
  struct op *active;
  struct id_slot *ids;
  uint32_t ids_cap, ids_free_hint;
  struct cts_entry *cts;  /* ring of unmatched CTS */
  uint32_t cts_cap, cts_head, cts_n;
  struct op *sends_head, *sends_tail; /* sends waiting for a CTS */
  struct op *start_head, *start_tail; /* posted, start left to the progress pass (start.c) */
  struct op *fifo_head, *fifo_tail;   /* incoming writes / notifs in arrival order (notif.c) */
  uint32_t next_first_ch;
  /* adaptive striping and failover (stripe.h, failover.h), when both sides
   * said HELLO_F_SCHED */
  int sched;
  struct route_pat tx_pat;   /* where our chunks go: announced to the peer (MSG_SCHED) */
  struct route_pat rx_pat;   /* where the peer's go: its last MSG_SCHED */
  uint64_t stripe_next_ns;   /* the next look at the channels' speeds */
  struct stripe_base stripe_tx[ROUTE_MAX_PAT], stripe_rx[ROUTE_MAX_PAT]; /* each window's totals at the last look */
  uint32_t stripe_rate[ROUTE_MAX_PAT];  /* each channel's measured speed, KB/s (0: unknown) */
  uint64_t stripe_acc_bytes[ROUTE_MAX_PAT], stripe_acc_busy[ROUTE_MAX_PAT]; /* its recent bytes and busy ns, decayed */
  uint64_t stripe_probe_ns[ROUTE_MAX_PAT]; /* a channel left out as too slow: when it was last tried */
  uint32_t stripe_peer_rate[ROUTE_MAX_PAT]; /* the speed the peer saw our chunks land at, KB/s (CHAN_RATE) */
  uint64_t stripe_peer_at[ROUTE_MAX_PAT];   /* and when it said so */
  uint32_t stripe_chunks;    /* chunks of our recent transfers (mean, decayed) */
  int nup;                   /* channels not lost */
  uint64_t fo_next_ns;       /* failover.h: the next look for stalled channels */
  uint64_t inflight; /* requests in the transport */
  /* bounds on what the peer makes us hold (docs/SECURITY.md) */
  uint32_t nserve;       /* its requests we hold (internal ops) */
  uint64_t held_bytes;   /* what they cost (admit.h, tpx__admit_held) */
  uint32_t notif_n;      /* its notifications not yet popped (queued or waiting for data) */
  uint64_t notif_bytes;  /* what they cost: payload and bookkeeping (notif.h) */
  struct tpx_ratelog logs[PL_KINDS]; /* repeated log lines (peer_log.h) */
  struct tpx_peer *next, *prev;
};

/* A new control connection (fd non-blocking), listed in ep->peers. */
struct tpx_peer *tpx__peer_new(tpx_endpoint_t *ep, int fd, int incoming, const char *where);
void tpx__peer_unlist(struct tpx_peer *p);
/* Drop one reference; the last one frees the peer, which must be dead. */
void tpx__peer_release(struct tpx_peer *p);
/* The one teardown of a channel's memory (its windows, its dial buffer): the
 * peer's last reference, and channels trimmed at setup (channel.c). */
void tpx__peer_channel_free(struct channel *ch);
/* Another request of the peer may be held (TPX_MAX_CTL_QUEUE): 0, or
 * TPX_EAGAIN with tpx_err_quiet detail; the caller drops the peer. */
int tpx__peer_admit(struct tpx_peer *p, const char *what);
/* Peers of the endpoint that are not dead (in setup or connected). */
int tpx__peer_count_live(const tpx_endpoint_t *ep, int only_unauth);
/* Incoming connections that never became peers are nobody's handle. */
void tpx__peer_sweep(tpx_endpoint_t *ep);

#endif
