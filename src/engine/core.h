/* The engine's ground floor: the structs every engine file shares (the
 * endpoint, its peers, their channels and windows, the operations, the
 * registrations) and the few inline helpers that touch nothing but them, as
 * libuv's internal.h is. It declares no function of any engine file: each
 * file's functions are in its own header, which includes this one, so every
 * engine file builds on it and no include runs back up (docs/ARCHITECTURE.md).
 *
 * Locking: one mutex per endpoint (ep->lock) guards everything below it; the
 * progress thread and API calls take it. The transport is only ever called
 * with the lock held, from one thread at a time per endpoint; a transport
 * shared by several endpoints (a loaded plugin always is) sees their threads
 * at once, as NCCL's plugins see one proxy thread per communicator. */
#ifndef TPX_ENGINE_CORE_H
#define TPX_ENGINE_CORE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/ratelog.h"
#include "common/retry.h"
#include "common/util.h"
#include "engine/plan.h"
#include "engine/wire.h"
#include "tpx/config.h"
#include "tpx/endpoint.h"
#include "tpx/mem.h"
#include "tpx/net.h"

struct tpx_peer;
struct tpx_mem;
struct tpx__window;
struct tpx__wslot;
struct tpx__wlink;
struct tpx__op;
struct abandoned;
struct tpx__gpu_ep;
struct tpx__gpu_window;
struct tpx__pack_ring;

/* ---- sources and log limits (peer_log.h, admit.h) ---- */
/* Where a control connection came from: an IPv4 address or an IPv6 /64
 * (admit.h fills it, tpx__src_of; peer_log.h keys the refused lines by it). */
struct tpx_src {
  uint8_t fam;  /* 4, 6 (0: unknown, never shares) */
  uint8_t b[8]; /* the IPv4 address, or the IPv6 /64 prefix (IPv4-mapped: IPv4) */
};

/* Control connections refused before they became peers (a wrong key,
 * garbage, a bad HELLO, a setup that failed): their failure lines are
 * rate-limited per source and in total, so that opening connections does
 * not turn into log volume. A line goes in full only while both its
 * source's limit (TPX_RATELOG_BURST) and the total one
 * (REFUSED_LOG_BURST) allow it; the rest are counted, and a summary with
 * the count (and the source that sent the most) is logged at most every
 * TPX_RATELOG_PERIOD_NS. Sources are kept in a small table, the least
 * recently seen making room: a churn of sources only reaches the total
 * limit. Part of the endpoint (lock held). */
#define REFUSED_LOG_SOURCES 64
#define REFUSED_LOG_BURST 20
struct tpx__refused_log {
  struct tpx_ratelog all;
  struct {
    struct tpx_src src;
    uint64_t seen;    /* last line (0: free) */
    uint64_t counted; /* not logged in full since the last summary */
    struct tpx_ratelog rl;
  } s[REFUSED_LOG_SOURCES];
};

enum tpx__peer_log_kind { PL_WRITE_REFUSED, PL_READ_REFUSED, PL_NOTIF_DROPPED, PL_SEND_TRUNC, PL_CHANNEL_LOST, PL_KINDS };

/* Sources that recently completed a handshake (with a key: proved it;
 * without: became a peer), the most recent ADMIT_GOOD_SOURCES: a young
 * connection of theirs that has not spoken yet is evicted after one of an
 * unknown source's. Part of the endpoint. */
#define ADMIT_GOOD_SOURCES 64
struct tpx__admit_good {
  struct tpx_src s[ADMIT_GOOD_SOURCES];
  uint64_t t[ADMIT_GOOD_SOURCES]; /* when (0: free) */
};

/* ---- where chunks travel (route.h) ---- */
#define ROUTE_MAX_PAT 64   /* WIRE_MAX_CHANNELS: a pattern's slots */
#define ROUTE_MAX_LAYERS 8 /* channels lost during one transfer, at most */

struct tpx__route_pat {
  uint8_t len;                /* 1..ROUTE_MAX_PAT */
  uint8_t ch[ROUTE_MAX_PAT];  /* channel of each slot */
};

struct tpx__route_layer {
  uint8_t dead;         /* the channel whose chunks this layer places anew */
  uint32_t seed;        /* of mix() */
  struct tpx__route_pat pat; /* channels alive when the layer was made */
  struct tpx__wlink *links;  /* [nch]: the layer's place in each channel's window */
};

/* ---- the sliding window (window.h) ---- */
enum tpx__wslot_state { WS_POSTED = 0, WS_NET_DONE, WS_CONSUMED };

struct tpx__wslot {
  void *req;
  struct tpx__op *op;
  void *data;     /* where the chunk lands / comes from (the consume stage's dst) */
  uint64_t len;
  uint64_t chunk; /* chunk index within the op (for messages) */
  uint64_t deadline;
  uint64_t pack_end; /* packed chunk: its pack ring span's release position; 0 none */
  struct tpx__cursor pcur; /* packed or vectored chunk: where its pieces are (receives scatter at release) */
  uint8_t state;
  uint16_t nv;        /* a vectored request's pieces (0: one buffer) */
  uint8_t sum_have;   /* integrity.h: enum wsum in window.c */
  int16_t sum_dev;    /* the GPU computing its sum */
  uint32_t sum;
  uint64_t sum_ticket;
  const void *sum_at; /* the bytes the GPU sums */
};

/* An op's place in one window's pending queue. */
struct tpx__wlink {
  struct tpx__wlink *next;
  struct tpx__op *op;
  struct tpx__cursor cur;
  uint8_t queued;
  uint8_t ch;     /* its window's channel */
  uint8_t layer;  /* of the op's route (route.h): 0, or the resend layer it carries */
  uint64_t done;  /* layer 0's links: the op's chunks finished on this channel, any layer */
  uint64_t total; /* layer 0's links: the op's chunks on this channel under all its layers */
};

struct tpx__window {
  void *comm;
  int slot;       /* comm slot (registration cache index) */
  int is_recv;
  int ch;         /* channel index */
  struct tpx__wslot *ring;
  uint32_t cap;
  uint64_t head;  /* oldest request still owned by the transport */
  uint64_t test;  /* oldest request not yet reported done */
  uint64_t tail;  /* next free */
  struct tpx__wlink *pend, *pend_tail;
  struct tpx__gpu_window *gpu; /* GPU path state (staging arena, unpack slots); NULL for host-only use */
  struct tpx__pack_ring *pack; /* packed chunks' buffer (pack.h); NULL until the first one */
  uint64_t posted, done;
  /* speed and stalls (stripe.h, failover.h) */
  uint64_t bytes_done;   /* chunk bytes finished */
  uint64_t busy_ns;      /* time with requests in the transport */
  uint64_t busy_since;   /* start of the current busy span (0: idle) */
  uint64_t moved_ns;     /* when a request last finished, or the window last went busy */
};

/* ---- channels (channel.h) ---- */
/* What the transport sees on every retry of one connect: the handle buffer
 * and the device-handle storage, on the heap so that a connect the channel
 * abandons keeps them where they were (abandon.h). */
struct tpx__dial_buf {
  uint8_t handle[TPX_NET_HANDLE_BYTES];
  tpx_net_dev_handle_t dev;
  int started; /* connect said "not yet": the transport holds state for this buffer */
};

/* A loaded plugin's failed connect or accept of the channel, retried with a
 * fresh listen handle (relisten.h). Generation 0 is the HELLO's handle. */
struct tpx__chan_retry {
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

struct tpx__channel {
  int idx, dev;
  struct tpx__window sq, rq;
  void *listen_comm;
  uint8_t my_handle[TPX_NET_HANDLE_BYTES];
  struct tpx__dial_buf *dial;     /* the peer's handle, connected to; NULL once given away */
  tpx_net_dev_handle_t recv_dev;  /* caller-owned device handle storage of accept */
  struct tpx__chan_retry rt;
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

/* ---- registrations (mem.h) ---- */
struct tpx_mem {
  tpx_endpoint_t *ep;
  uint64_t id;
  uint8_t *base;
  size_t len;
  tpx_mem_type_t type;
  int device;
  unsigned access;
  int internal; /* engine buffer (pack ring): never reachable by peers */
  int refs;     /* user transfer handles (prepared or running) using it */
  int irefs;    /* peers' requests being served from / into it */
  uint32_t reg_pre, reg_post; /* CUDA: transport registrations widened to 4 KiB pages (gpu/gpu_mem.c) */
  uint32_t npieces;
  void ***mh; /* [comm slot] -> mhandle per piece, lazily filled */
  int mh_cap;
  struct tpx_mem *next, *prev;
};

struct tpx_rmem {
  struct tpx__md_info md;
};

/* ---- operations (op.h) ---- */
enum tpx__op_kind {
  K_WRITE = 1, /* local, user */
  K_READ,
  K_SEND,
  K_RECV,
  K_IN_WRITE,   /* incoming write (we are the target) */
  K_SERVE_READ, /* serving a peer's read */
  K_NOTIF       /* standalone notification waiting its turn */
};
enum tpx__op_phase {
  PH_IDLE = 0,  /* prepared, not posted (or finished) */
  PH_QUEUED,    /* posted, its start left to the progress pass (start.c) */
  PH_WAIT_CTS,  /* send: waiting for a matching recv */
  PH_WAIT_HDR,  /* recv: waiting for MSG_SEND; read: waiting for MSG_READ_DATA */
  PH_DATA,      /* chunks queued / in flight */
  PH_WAIT_ACK,  /* write: data sent, ack not yet in */
  PH_FINAL      /* internal ops: finished, waiting to leave the FIFO */
};

struct tpx__op {
  int kind, phase;
  struct tpx_peer *peer;
  uint64_t id; /* our id (write/read/recv/send, per post) or the peer's (incoming) */
  _Atomic int status;
  int err;     /* first error seen while finishing */
  /* local layout */
  struct tpx__xent *ents;
  uint32_t nents;
  struct tpx__wire_entry *rents; /* remote side of a write/read (prepared once) */
  uint64_t total;
  uint32_t chunk;           /* chunk bytes used by this transfer */
  uint64_t pack_max;        /* plan.h's packed plan: pieces up to this many bytes; 0 plain */
  uint64_t nchunks, chunks_left;
  uint32_t first_ch, nch;
  uint32_t inflight;        /* requests of this op inside the transport */
  struct tpx__wlink *links; /* [nch]: layer 0's links */
  struct tpx__route_pat pat;       /* layer 0 of where chunks travel (route.h) */
  struct tpx__route_layer *layers; /* resend layers 1..nlayers (failover.h) */
  uint32_t nlayers;
  uint64_t await_mask;      /* data sender: lost channels whose receiver's answer is due */
  uint64_t lost_mask;       /* channels lost while it ran (its layer-0 links there purged or never
                               queued): only for those may the peer ask about or resend its chunks */
  uint64_t resend_deadline; /* data receiver: chunks of a lost channel missing; by then they come again
                               (failover.h) or the peer fails */
  uint64_t held;            /* a peer's request: bytes charged to it and the endpoint (admit.h) */
  /* data receiver with integrity (integrity.h): the sender's sums, and the first mismatch */
  uint32_t *sums;
  uint8_t *sum_st;          /* per chunk: 0 not yet, 1 sums[i] holds it, 2 sent without one */
  int sum_bad, sum_bad_ch;
  uint64_t sum_bad_chunk;
  uint32_t sum_bad_got, sum_bad_want;
  /* two-sided */
  uint64_t tag, cap, received, match_id;
  /* write bookkeeping */
  int acked;
  int ack_status;
  int discard;              /* incoming write refused: drain through the pack ring, dropped */
  /* Set by the side that accepted an incoming request: what it answers once
   * every chunk is in (target.c: a write's acknowledgement). Finishes o. */
  int (*landed)(struct tpx__op *o);
  uint64_t deadline;        /* for control waits (ack, read data) */
  /* notification */
  uint8_t *notif;
  uint32_t notif_len;
  int has_notif;
  /* lifetime */
  int user;                 /* owned by a tpx_xfer handle */
  int orphan;               /* user freed it while running */
  int posted;               /* posted at least once */
  int id_reg;               /* id is in peer->ids */
  int in_fifo;              /* in peer's incoming FIFO (freed when it leaves it) */
  int refs_taken;           /* mem refs held for ents (incoming ops) */
  char errmsg[200];         /* detail of a failure, replayed by tpx_xfer_test */
  struct tpx__op *next, *prev;   /* peer->active */
  struct tpx__op *qnext;         /* peer queues: deferred starts, unmatched sends, incoming FIFO */
  struct tpx__op *xnext, *xprev; /* ep->xfers (user handles) */
};

struct tpx_xfer {
  struct tpx__op op;
};

/* Limits on what a peer's request may ask of us. */
#define OP_MAX_BYTES (1ull << 48)
#define OP_MAX_CHUNKS (1ull << 31)

/* "write", "incoming write", ...: the one name table. */
static inline const char *tpx__op_kind_name(int k) {
  static const char *const n[] = {"op", "write", "read", "send", "recv", "incoming write", "served read", "notification"};
  return k >= 0 && k <= K_NOTIF ? n[k] : "op";
}

/* A peer queue linked through qnext (deferred starts, unmatched sends,
 * incoming FIFO): append o at the tail; take o out wherever it is (no-op
 * when it is not there). Part of the type, as they touch nothing else: the
 * files below op.c that keep such queues (notif.c) call nothing in it. */
static inline void tpx__op_queue_push(struct tpx__op **head, struct tpx__op **tail, struct tpx__op *o) {
  o->qnext = NULL;
  if (*tail) (*tail)->qnext = o;
  else *head = o;
  *tail = o;
}

static inline void tpx__op_queue_remove(struct tpx__op **head, struct tpx__op **tail, struct tpx__op *o) {
  struct tpx__op **pp = head, *prev = NULL;
  while (*pp && *pp != o) {
    prev = *pp;
    pp = &(*pp)->qnext;
  }
  if (*pp) {
    *pp = o->qnext;
    if (*tail == o) *tail = prev;
  }
  o->qnext = NULL;
}

/* ---- peers (peer.h) ---- */
/* A window's bytes and busy time when its speed was last sampled (stripe.c). */
struct tpx__stripe_base {
  uint64_t bytes, busy;
};

/* A ready peer's silence and pings (live.h). */
struct tpx__live {
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

enum tpx__peer_state {
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

enum tpx__peer_auth { PEER_AUTH_NONE = 0, PEER_AUTH_CHALLENGED, PEER_AUTH_OK };

struct tpx__cts_entry { /* a peer's recv announcement no send matched yet */
  uint64_t recv_id, tag, cap;
  int inl_ok;
};

struct tpx__id_slot {
  struct tpx__op *op;
  uint32_t gen;
};

struct ctl_seal;

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
  int auth; /* enum tpx__peer_auth: the acceptor answered the challenge; both proofs checked */
  uint8_t auth_nc[WIRE_AUTH_NONCE], auth_ns[WIRE_AUTH_NONCE]; /* the connector's and acceptor's nonces */
  uint8_t auth_skey[TPX_NET_KEY_BYTES];                       /* session key (PEER_AUTH_OK) */
  /* What the channels pass to listen_keyed / connect_keyed: auth_skey, set by
   * auth.c once both proofs are checked and the transport takes keys; NULL
   * otherwise (no key, or a transport whose sockets are its own). */
  const uint8_t *net_key;
  struct ctl_seal *seal; /* TPX_ENCRYPT: the control connection's records once authenticated (ctl_seal.h) */
  struct tpx__wbuf out;
  size_t out_off;
  uint8_t *in;
  size_t in_len, in_cap;
  int nch;
  struct tpx__channel *ch;
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
  struct tpx__live live; /* silence and pings once ready (live.h) */
  /* ops */
  struct tpx__op *active;
  struct tpx__id_slot *ids;
  uint32_t ids_cap, ids_free_hint;
  struct tpx__cts_entry *cts; /* ring of unmatched CTS */
  uint32_t cts_cap, cts_head, cts_n;
  struct tpx__op *sends_head, *sends_tail; /* sends waiting for a CTS */
  struct tpx__op *start_head, *start_tail; /* posted, start left to the progress pass (start.c) */
  struct tpx__op *fifo_head, *fifo_tail;   /* incoming writes / notifs in arrival order (notif.c) */
  uint32_t next_first_ch;
  /* data integrity (integrity.h), when both sides said HELLO_F_SUM */
  int sum;
  uint64_t sum_unchecked;    /* chunks that went unchecked (GPU-only bytes); said once */
  struct tpx__wire_sum sum_out; /* our chunks' sums waiting for the end of the progress pass */
  /* adaptive striping and failover (stripe.h, failover.h), when both sides
   * said HELLO_F_SCHED */
  int sched;
  struct tpx__route_pat tx_pat; /* where our chunks go: announced to the peer (MSG_SCHED) */
  struct tpx__route_pat rx_pat; /* where the peer's go: its last MSG_SCHED */
  uint64_t stripe_next_ns;   /* the next look at the channels' speeds */
  /* each window's totals at the last look */
  struct tpx__stripe_base stripe_tx[ROUTE_MAX_PAT], stripe_rx[ROUTE_MAX_PAT];
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

/* ---- the endpoint (its locking: above) ---- */
/* Receive consume stage. Host memory needs nothing (consume == NULL). The GPU
 * path plugs unpack kernels or staging copies in here: start() runs when the
 * transport reports a receive done, poll() until it returns 1; only then is
 * irecvConsumed called and the ring slot released, in FIFO order (window.c).
 * Errors are returned with tpx_err_quiet's detail; the caller fails the peer. */
struct tpx__consume_ops {
  int (*start)(struct tpx_peer *p, struct tpx__window *q, struct tpx__wslot *s);
  int (*poll)(struct tpx_peer *p, struct tpx__window *q, struct tpx__wslot *s); /* 1 done, 0 not yet, < 0 error */
};

struct tpx__closing_fd {
  int fd;
  uint64_t deadline;
};

struct tpx__notif_node { /* allocated for its payload only (notif.c) */
  struct tpx__notif_node *next;
  struct tpx_peer *owner; /* counted in owner->notif_n until popped */
  tpx_peer_t *peer;       /* tpx_notif_t's fields */
  char peer_name[TPX_NAME_MAX];
  uint32_t len;
  unsigned char msg[];
};

struct tpx_endpoint {
  tpx_config_t cfg;
  tpx_net_t *net;
  int own_net;
  int ndev;
  int chdev[32];  /* the devices of this GPU's NICs (placement.h); nchdev 0: all devices */
  int nchdev;
  int numa;       /* the GPU's NUMA node, -1 unknown: progress thread and staging go there */
  int window; /* requests per comm: min(cfg.window, the transport's limit) */
  int nchan;  /* channels offered to a peer: cfg.num_channels, raised by default to the devices used */
  int ncpu;   /* CPUs it may use, read once at create: the automatic chunk's rule (tpx__config_chunk_for) */
  char name[TPX_NAME_MAX];
  uint64_t uuid;
  int gpu;
  int listen_fd;
  int port;
  char listen_host[CONN_ADDR_MAX];
  int epfd, evfd;
  pthread_mutex_t lock;
  pthread_cond_t cv;
  pthread_t thread;
  int thread_on;
  atomic_int stop;
  atomic_int sleeping;
  int waiters;
  struct tpx_peer *peers;
  struct tpx_peer **acceptq;
  int acceptq_n, acceptq_cap;
  struct tpx__notif_node *notif_head, *notif_tail;
  int notif_n;
  uint64_t notif_bytes; /* what the peers' notifications not popped cost (notif.h), all peers */
  uint64_t held_bytes;  /* what the peers' requests we hold cost (admit.h), all peers */
  struct tpx_mem *mems;
  struct tpx_mem **mem_tab; /* open addressing by id */
  uint32_t mem_tab_cap, mem_tab_n;
  void **slots; /* comm slots (index of the per-comm registration cache) */
  int nslots;
  const struct tpx__consume_ops *consume; /* NULL: host memory, nothing to do */
  struct tpx__gpu_ep *gpath;              /* GPU data path (gpu/gpu_path.h); NULL: host memory only */
  struct tpx_crcpool *sumpool; /* integrity's checksum threads (sum_stage.h), on first use */
  int sumpool_none;        /* they could not start: sums in place */
  struct tpx__op *xfers;   /* user transfer handles alive */
  struct abandoned *abandoned; /* connects of closed channels still going (abandon.h) */
  struct tpx__closing_fd *closing;
  int nclosing, closing_cap;
  uint64_t inflight;       /* requests in the transport, all peers */
  uint64_t queued;         /* op links waiting in pending FIFOs, all peers */
  atomic_uint work_seq;    /* bumped by posters; the sleeping thread re-checks it */
  atomic_int drivers;      /* callers driving progress themselves while they spin in a wait */
  int setups;              /* peers in setup */
  uint64_t accept_resume;  /* listener paused (EMFILE/ENFILE) until then; 0: not paused */
  uint64_t accept_log_next; /* refused connections are logged once per interval */
  uint64_t accept_refused; /* since the last log */
  struct tpx__refused_log refused_log; /* failures of connections that never became peers (peer_log.h) */
  struct tpx__admit_good good_src;     /* sources that recently completed a handshake (admit.h) */
  uint64_t next_deadline_scan;
};


/* Work was posted: the progress thread, if asleep, looks again. */
static inline void tpx__ep_wake(tpx_endpoint_t *ep) {
  atomic_fetch_add(&ep->work_seq, 1);
  if (atomic_load(&ep->sleeping)) {
    uint64_t one = 1;
    ssize_t r = write(ep->evfd, &one, sizeof(one));
    (void)r; /* a full eventfd already wakes it */
  }
}

/* Something a blocked caller may wait for changed (lock held). */
static inline void tpx__ep_signal(tpx_endpoint_t *ep) {
  if (ep->waiters) pthread_cond_broadcast(&ep->cv);
}
#endif
