/* The endpoint: one transport, one control listener, the peers, the
 * registrations, and the lock that guards them all.
 *
 * Locking: one mutex per endpoint (ep->lock) guards everything below it; the
 * progress thread and API calls take it. The transport is only ever called
 * with the lock held, from one thread at a time per endpoint; a transport
 * shared by several endpoints (a loaded plugin always is) sees their threads
 * at once, as NCCL's plugins see one proxy thread per communicator. */
#ifndef TPX_ENGINE_ENDPOINT_H
#define TPX_ENGINE_ENDPOINT_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <unistd.h>

#include "common/util.h"
#include "engine/admit.h"
#include "engine/peer_log.h"
#include "engine/wire.h"
#include "tpx/config.h"
#include "tpx/endpoint.h"
#include "tpx/net.h"

struct tpx_peer;
struct tpx_mem;
struct window;
struct wslot;
struct op;
struct abandoned;

/* Receive consume stage. Host memory needs nothing (consume == NULL). The GPU
 * path plugs unpack kernels or staging copies in here: start() runs when the
 * transport reports a receive done, poll() until it returns 1; only then is
 * irecvConsumed called and the ring slot released, in FIFO order (window.c).
 * Errors are returned with tpx_err_quiet's detail; the caller fails the peer. */
struct consume_ops {
  int (*start)(struct tpx_peer *p, struct window *q, struct wslot *s);
  int (*poll)(struct tpx_peer *p, struct window *q, struct wslot *s); /* 1 done, 0 not yet, < 0 error */
};

struct closing_fd {
  int fd;
  uint64_t deadline;
};

struct notif_node { /* allocated for its payload only (notif.c) */
  struct notif_node *next;
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
  int ncpu;   /* CPUs it may use, read once at create: the automatic chunk's rule (tpx__op_chunk) */
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
  uint64_t notif_bytes; /* what the peers' notifications not popped cost (notif.h), all peers */
  uint64_t held_bytes;  /* what the peers' requests we hold cost (admit.h), all peers */
  struct tpx_mem *mems;
  struct tpx_mem **mem_tab; /* open addressing by id */
  uint32_t mem_tab_cap, mem_tab_n;
  void **slots; /* comm slots (index of the per-comm registration cache) */
  int nslots;
  const struct consume_ops *consume; /* NULL: host memory, nothing to do */
  struct gpu_ep *gpath;    /* GPU data path (gpu/gpu_path.h); NULL: host memory only */
  struct op *xfers;        /* user transfer handles alive */
  struct abandoned *abandoned; /* connects of closed channels still going (abandon.h) */
  struct closing_fd *closing;
  int nclosing, closing_cap;
  uint64_t inflight;       /* requests in the transport, all peers */
  uint64_t queued;         /* op links waiting in pending FIFOs, all peers */
  atomic_uint work_seq;    /* bumped by posters; the sleeping thread re-checks it */
  atomic_int drivers;      /* callers driving progress themselves while they spin in a wait */
  int setups;              /* peers in setup */
  uint64_t accept_resume;  /* listener paused (EMFILE/ENFILE) until then; 0: not paused */
  uint64_t accept_log_next; /* refused connections are logged once per interval */
  uint64_t accept_refused; /* since the last log */
  struct refused_log refused_log; /* failures of connections that never became peers (peer_log.h) */
  struct admit_good good_src;     /* sources that recently completed a handshake (admit.h) */
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
