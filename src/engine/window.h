/* The sliding window: one direction of one channel (a transport comm), its
 * ring of requests and its queue of transfers waiting for room.
 *
 * The discipline is the strictest plugin contract, TCPX's (docs/UNPACK.md):
 *  - at most `cap` requests per comm; capacity is checked before posting;
 *  - only the oldest not-yet-done request of a comm is tested (FIFO);
 *  - a receive leaves the ring only after its consume stage finished and
 *    irecvConsumed (if the transport has it) was called, in FIFO order
 *    (tri-state: posted -> done in the transport -> consumed);
 *  - every request has a deadline (cfg.timeout_ms);
 *  - rc TPX_ESYSTEM from test is "not yet" (the plugin's transient rc 2;
 *    it never comes with done=1: docs/UNPACK.md, "Peer close").
 *
 * The window reports upward only through its return values and the `done`
 * callback it is given: it never fails a peer or finishes a transfer itself. */
#ifndef TPX_ENGINE_WINDOW_H
#define TPX_ENGINE_WINDOW_H

#include <stdint.h>

#include "engine/plan.h"

struct tpx_peer;
struct op;
struct gpu_window;
struct pack_ring;

enum wslot_state { WS_POSTED = 0, WS_NET_DONE, WS_CONSUMED };

struct wslot {
  void *req;
  struct op *op;
  void *data;     /* where the chunk lands / comes from (the consume stage's dst) */
  uint64_t len;
  uint64_t chunk; /* chunk index within the op (for messages) */
  uint64_t deadline;
  uint64_t pack_end; /* packed chunk: its pack ring span's release position; 0 none */
  struct cursor pcur; /* packed or vectored chunk: where its pieces are (receives scatter at release) */
  uint8_t state;
  uint16_t nv;        /* a vectored request's pieces (0: one buffer) */
  uint8_t sum_have;   /* integrity.h: enum wsum in window.c */
  int16_t sum_dev;    /* the GPU computing its sum */
  uint32_t sum;
  uint64_t sum_ticket;
  const void *sum_at; /* the bytes the GPU sums */
};

/* An op's place in one window's pending queue. */
struct wlink {
  struct wlink *next;
  struct op *op;
  struct cursor cur;
  uint8_t queued;
  uint8_t ch;     /* its window's channel */
  uint8_t layer;  /* of the op's route (route.h): 0, or the resend layer it carries */
  uint64_t done;  /* layer 0's links: the op's chunks finished on this channel, any layer */
  uint64_t total; /* layer 0's links: the op's chunks on this channel under all its layers */
};

struct window {
  void *comm;
  int slot;       /* comm slot (registration cache index) */
  int is_recv;
  int ch;         /* channel index */
  struct wslot *ring;
  uint32_t cap;
  uint64_t head;  /* oldest request still owned by the transport */
  uint64_t test;  /* oldest request not yet reported done */
  uint64_t tail;  /* next free */
  struct wlink *pend, *pend_tail;
  struct gpu_window *gpu; /* GPU path state (staging arena, unpack slots); NULL for host-only use */
  struct pack_ring *pack; /* packed chunks' buffer (pack.h); NULL until the first one */
  uint64_t posted, done;
  /* speed and stalls (stripe.h, failover.h) */
  uint64_t bytes_done;   /* chunk bytes finished */
  uint64_t busy_ns;      /* time with requests in the transport */
  uint64_t busy_since;   /* start of the current busy span (0: idle) */
  uint64_t moved_ns;     /* when a request last finished, or the window last went busy */
};

/* A chunk left the window (sent, or landed and consumed). Returns < 0 when
 * the peer can no longer go on (the window stops and passes it up). */
typedef int (*window_done_fn)(struct op *o, int ch);

int tpx__window_init(struct window *q, int ch, int is_recv, uint32_t cap);
void tpx__window_free(struct window *q);
/* Queue an op's chunks for this window (posted as room allows). */
void tpx__window_enqueue(struct tpx_peer *p, struct window *q, struct wlink *l);
/* Test, release and post what can move now. Returns the number of state
 * changes, or < 0 with tpx_last_error() naming peer, channel and chunk. */
int tpx__window_progress(struct tpx_peer *p, struct window *q, window_done_fn done);
/* Forget every request and pending chunk (the comm is being closed, which
 * frees the transport's requests). */
void tpx__window_purge(struct tpx_peer *p, struct window *q);

#endif
