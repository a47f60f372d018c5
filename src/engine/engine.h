/* Engine internals: endpoints, peers, channels, operations.
 *
 * Locking: one mutex per endpoint (ep->lock) guards everything below it; the
 * progress thread and API calls take it. The transport is only ever called
 * with the lock held, from one thread at a time.
 *
 * Request discipline (the strictest plugin contract, TCPX's):
 *  - each comm has a ring of at most `window` requests; capacity is checked
 *    before posting;
 *  - only the oldest not-yet-done request of a comm is tested (FIFO);
 *  - a receive leaves the ring only after its consume stage finished and
 *    irecvConsumed (if the transport has it) was called, in FIFO order;
 *  - every request has a deadline (cfg.timeout_ms);
 *  - rc TPX_ESYSTEM from test with done=1 is success, with done=0 "not yet".
 */
#ifndef TPX_ENGINE_ENGINE_H
#define TPX_ENGINE_ENGINE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>

#include "engine/plan.h"
#include "engine/gpu_path.h"
#include "engine/wire.h"
#include "tpx/config.h"
#include "tpx/endpoint.h"
#include "tpx/mem.h"
#include "tpx/net.h"
#include "tpx/xfer.h"

/* Transport registrations are split into pieces the v7 int size accepts.
 * Piece k starts at k * PIECE_STRIDE and spans PIECE_SPAN bytes (clipped), so
 * pieces overlap by the largest chunk and any chunk lies inside the piece of
 * its first byte: lookup is one division, chunking needs no knowledge of it. */
#define PIECE_STRIDE (1ull << 30)
#define PIECE_SPAN (PIECE_STRIDE + WIRE_MAX_CHUNK)

/* Requests per comm the TCPX plugin tolerates, and NCCL's expectation. */
#define WINDOW_LIMIT_TCPX 16
#define WINDOW_LIMIT_DEFAULT 32

struct tpx_mem {
  tpx_endpoint_t *ep;
  uint64_t id;
  uint8_t *base;
  size_t len;
  tpx_mem_type_t type;
  int device;
  unsigned access;
  int internal; /* engine scratch: never reachable by peers */
  int refs;     /* user transfer handles (prepared or running) using it */
  int irefs;    /* peers' requests being served from / into it */
  uint32_t reg_pre, reg_post; /* CUDA: transport registrations widened to 4 KiB pages (gpu_mem.c) */
  uint32_t npieces;
  void ***mh; /* [comm slot] -> mhandle per piece, lazily filled */
  int mh_cap;
  struct tpx_mem *next, *prev;
};

struct tpx_rmem {
  struct md_info md;
};

enum op_kind {
  K_WRITE = 1, /* local, user */
  K_READ,
  K_SEND,
  K_RECV,
  K_IN_WRITE,   /* incoming write (we are the target) */
  K_SERVE_READ, /* serving a peer's read */
  K_NOTIF       /* standalone notification waiting its turn */
};
enum op_phase {
  PH_IDLE = 0,  /* prepared, not posted (or finished) */
  PH_WAIT_CTS,  /* send: waiting for a matching recv */
  PH_WAIT_HDR,  /* recv: waiting for MSG_SEND; read: waiting for MSG_READ_DATA */
  PH_DATA,      /* chunks queued / in flight */
  PH_WAIT_ACK,  /* write: data sent, ack not yet in */
  PH_FINAL      /* internal ops: finished, waiting to leave the FIFO */
};

struct op;
struct link { /* an op's place in one channel direction's pending FIFO */
  struct link *next;
  struct op *op;
  struct cursor cur;
  uint8_t queued;
};

struct op {
  int kind, phase;
  struct tpx_peer *peer;
  uint64_t id; /* our id (write/read/recv/send, per post) or the peer's (incoming) */
  _Atomic int status;
  int err;     /* first error seen while finishing */
  /* local layout */
  struct xent *ents;
  uint32_t nents;
  struct wire_entry *rents; /* remote side of a write/read (prepared once) */
  uint64_t total;
  uint32_t chunk;           /* chunk bytes used by this transfer */
  uint64_t nchunks, chunks_left;
  uint32_t first_ch, nch;
  uint32_t inflight;        /* requests of this op inside the transport */
  struct link *links;       /* [nch] */
  /* two-sided */
  uint64_t tag, cap, received, match_id;
  /* write bookkeeping */
  int acked;
  int ack_status;
  int discard;              /* incoming write refused: drain into scratch */
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
  struct op *next, *prev;   /* peer->active */
  struct op *qnext;         /* peer queues: unmatched sends, incoming FIFO */
  struct op *xnext, *xprev; /* ep->xfers (user handles) */
};

struct tpx_xfer {
  struct op op;
};

enum slot_state { RS_POSTED = 0, RS_NET_DONE, RS_CONSUMED };
struct rslot {
  void *req;
  struct op *op;
  void *data;     /* where the chunk lands / comes from (the consume stage's dst) */
  uint64_t len;
  uint64_t chunk; /* chunk index within the op (for messages) */
  uint64_t deadline;
  uint8_t state;
};

/* One direction of a channel: a comm, its request ring and pending FIFO. */
struct cq {
  void *comm;
  int slot;       /* comm slot (registration cache index) */
  int is_recv;
  int ch;         /* channel index */
  struct rslot *ring;
  uint32_t cap;   /* window */
  uint64_t head;  /* oldest request still owned by the transport */
  uint64_t test;  /* oldest request not yet reported done */
  uint64_t tail;  /* next free */
  struct link *pend, *pend_tail;
  struct gpu_cq *gpu; /* GPU path state (staging arena, unpack slots); NULL for host-only use */
  uint64_t posted, done;
};

struct channel {
  int idx, dev;
  struct cq sq, rq;
  void *listen_comm;
  uint8_t my_handle[TPX_NET_HANDLE_BYTES];
  uint8_t peer_handle[TPX_NET_HANDLE_BYTES]; /* stable buffer for connect retries */
  tpx_net_dev_handle_t send_dev, recv_dev;   /* caller-owned device handle storage */
};

enum peer_state {
  P_CONNECTING = 1, /* TCP connect in progress (we dialled) */
  P_WAIT_HELLO,     /* accepted: waiting for HELLO */
  P_WAIT_ACK,       /* dialled: HELLO sent, waiting for HELLO_ACK */
  P_NET_SETUP,      /* transport connect/accept in progress */
  P_READY,
  P_CLOSING,        /* remote said BYE / closed: finishing data in flight */
  P_DEAD            /* failed or closed; err says why */
};

struct cts_entry {
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
  char errmsg[200];
  int incoming;
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
  struct wbuf out;
  size_t out_off;
  uint8_t *in;
  size_t in_len, in_cap;
  int nch;
  struct channel *ch;
  uint64_t setup_deadline;
  /* ops */
  struct op *active;
  struct id_slot *ids;
  uint32_t ids_cap, ids_free_hint;
  struct cts_entry *cts;  /* ring of unmatched CTS */
  uint32_t cts_cap, cts_head, cts_n;
  struct op *sends_head, *sends_tail; /* sends waiting for a CTS */
  struct op *fifo_head, *fifo_tail;   /* incoming writes / notifs in arrival order */
  uint32_t next_first_ch;
  uint64_t inflight; /* requests in the transport */
  struct tpx_peer *next, *prev;
};

struct notif_node {
  struct notif_node *next;
  tpx_notif_t n;
};

/* Receive consume stage. Host memory needs nothing (consume == NULL). The GPU
 * path plugs unpack kernels or staging copies in here: start() runs when the
 * transport reports a receive done, poll() until it returns 1; only then is
 * irecvConsumed called and the ring slot released, in FIFO order. */
struct consume_ops {
  int (*start)(struct tpx_peer *p, struct cq *q, struct rslot *s);
  int (*poll)(struct tpx_peer *p, struct cq *q, struct rslot *s); /* 1 done, 0 not yet, < 0 error */
};

struct closing_fd {
  int fd;
  uint64_t deadline;
};

struct tpx_endpoint {
  tpx_config_t cfg;
  tpx_net_t *net;
  int own_net;
  int ndev;
  int window;
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
  struct notif_node *notif_head, *notif_tail;
  int notif_n;
  struct tpx_mem *mems;
  struct tpx_mem **mem_tab; /* open addressing by id */
  uint32_t mem_tab_cap, mem_tab_n;
  void **slots; /* comm slots */
  int nslots;
  struct tpx_mem *scratch; /* discard target for refused writes */
  void *scratch_buf;
  const struct consume_ops *consume; /* NULL: host memory, nothing to do */
  struct gpu_ep *gpath;    /* GPU data path (gpu_path.h); NULL: host memory only */
  struct op *xfers;        /* user transfer handles alive */
  struct closing_fd *closing;
  int nclosing, closing_cap;
  uint64_t inflight;       /* requests in the transport, all peers */
  uint64_t queued;         /* op links waiting in pending FIFOs, all peers */
  atomic_uint work_seq;    /* bumped by posters; the sleeping thread re-checks it */
  atomic_int drivers;      /* callers driving progress themselves while they spin in a wait */
  int setups;              /* peers in setup */
  uint64_t next_deadline_scan;
};

/* endpoint.c */
void ep_wake(tpx_endpoint_t *ep);
void ep_signal(tpx_endpoint_t *ep);
int ep_pass(tpx_endpoint_t *ep);
void ep_idle(tpx_endpoint_t *ep, unsigned *spins, int busy);
int ep_wait_until(tpx_endpoint_t *ep, int (*pred)(tpx_endpoint_t *, void *), void *arg, uint64_t deadline);
void ep_deliver_notif(tpx_endpoint_t *ep, struct tpx_peer *p, const uint8_t *msg, uint32_t len);
int ep_slot_alloc(tpx_endpoint_t *ep, void *comm);
void ep_slot_release(tpx_endpoint_t *ep, int slot);

/* mem.c */
int mem_mhandle(struct tpx_mem *m, int slot, void *comm, uint64_t off, void **mh);
void mem_release_slot(tpx_endpoint_t *ep, int slot);
struct tpx_mem *mem_lookup(tpx_endpoint_t *ep, uint64_t id);
void mem_free_all(tpx_endpoint_t *ep);
int mem_register_internal(tpx_endpoint_t *ep, void *addr, size_t len, struct tpx_mem **out);
void mem_unregister(struct tpx_mem *m);

/* peer.c */
struct tpx_peer *peer_new(tpx_endpoint_t *ep, int fd, int incoming, const char *where);
int peer_on_event(struct tpx_peer *p, uint32_t events);
int peer_setup_step(struct tpx_peer *p);
int peer_flush(struct tpx_peer *p);
void peer_fail(struct tpx_peer *p, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
void peer_release(struct tpx_peer *p);
void peer_shutdown(struct tpx_peer *p, int err);
void peer_deadlines(struct tpx_peer *p, uint64_t now);
void peer_check_closing(struct tpx_peer *p);
void peer_sweep(tpx_endpoint_t *ep);
int peer_parse(struct tpx_peer *p);
int peer_send_frame_done(struct tpx_peer *p, int rc);
void ep_closing_add(tpx_endpoint_t *ep, int fd);
void ep_epoll_set(tpx_endpoint_t *ep, struct tpx_peer *p, uint32_t events);

/* chan.c */
int cq_init(struct cq *q, int ch, int is_recv, uint32_t window);
void cq_free(struct cq *q);
int cq_progress(struct tpx_peer *p, struct cq *q);
void cq_enqueue(struct tpx_peer *p, struct cq *q, struct link *l);
int peer_data_progress(struct tpx_peer *p);
void cq_purge(struct tpx_peer *p, struct cq *q);

/* xfer.c */
int op_start_data(struct op *o, uint32_t first_ch, int is_recv);
void op_chunk_done(struct op *o);
void op_finish(struct op *o, int status);
void op_fail_now(struct op *o, int err);
int peer_on_msg(struct tpx_peer *p, const struct wire_frame *f);
void peer_fail_ops(struct tpx_peer *p, int err, int only_ctrl_waits);
void op_free_internal(struct op *o);
uint64_t id_register(struct tpx_peer *p, struct op *o);
struct op *id_lookup(struct tpx_peer *p, uint64_t id);
void id_unregister(struct tpx_peer *p, uint64_t id);
void xfer_release_all(tpx_endpoint_t *ep);

static inline uint64_t ms_to_ns(int ms) { return (uint64_t)ms * 1000000ull; }

/* Blocking waits with a progress thread spin this long before sleeping on
 * the condition variable; while they spin they drive progress themselves
 * (ep_drive) and the progress thread stands aside. */
#define WAIT_SPIN_NS 50000ull
int ep_drive(tpx_endpoint_t *ep);
void ep_drive_end(tpx_endpoint_t *ep);

#endif
