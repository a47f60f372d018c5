/* Operations: one struct for every kind of transfer, the user's (write, read,
 * send, recv) and the peer's we serve (incoming write, served read,
 * standalone notification). Lifetime, the data phase and completion live in
 * op.c; ids in ids.c. */
#ifndef TPX_ENGINE_OP_H
#define TPX_ENGINE_OP_H

#include <stdatomic.h>
#include <stdint.h>

#include "engine/plan.h"
#include "engine/route.h"
#include "engine/wire.h"

struct tpx_peer;
struct tpx_endpoint;
struct wlink;

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
  PH_QUEUED,    /* posted, its start left to the progress pass (start.c) */
  PH_WAIT_CTS,  /* send: waiting for a matching recv */
  PH_WAIT_HDR,  /* recv: waiting for MSG_SEND; read: waiting for MSG_READ_DATA */
  PH_DATA,      /* chunks queued / in flight */
  PH_WAIT_ACK,  /* write: data sent, ack not yet in */
  PH_FINAL      /* internal ops: finished, waiting to leave the FIFO */
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
  uint64_t pack_max;        /* plan.h's packed plan: pieces up to this many bytes; 0 plain */
  uint64_t nchunks, chunks_left;
  uint32_t first_ch, nch;
  uint32_t inflight;        /* requests of this op inside the transport */
  struct wlink *links;      /* [nch]: layer 0's links */
  struct route_pat pat;     /* layer 0 of where chunks travel (route.h) */
  struct route_layer *layers; /* resend layers 1..nlayers (failover.h) */
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
  int (*landed)(struct op *o);
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
  struct op *qnext;         /* peer queues: deferred starts, unmatched sends, incoming FIFO */
  struct op *xnext, *xprev; /* ep->xfers (user handles) */
};

struct tpx_xfer {
  struct op op;
};

/* Limits on what a peer's request may ask of us. */
#define OP_MAX_BYTES (1ull << 48)
#define OP_MAX_CHUNKS (1ull << 31)

/* "write", "incoming write", ...: the one name table. */
static inline const char *tpx__op_kind_name(int k) {
  static const char *const n[] = {"op", "write", "read", "send", "recv", "incoming write", "served read", "notification"};
  return k >= 0 && k <= K_NOTIF ? n[k] : "op";
}
void tpx__op_set_errmsg(struct op *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* The chunk of a user transfer of `bytes` over `channels` channels:
 * tpx_config_chunk with the CPU count the endpoint read at create (no
 * syscall per transfer). */
size_t tpx__op_chunk(const struct tpx_endpoint *ep, uint64_t bytes, int channels);
/* Internal ops (we serve a peer's request) and user handles. */
struct op *tpx__op_new_internal(struct tpx_peer *p, int kind, uint32_t nents);
struct op *tpx__op_new_user(struct tpx_peer *p, int kind, uint32_t nents);
int tpx__op_copy_notif(struct op *o, const void *msg, uint32_t len);
/* Free an op that holds no references and is in no list. */
void tpx__op_free(struct op *o);
void tpx__op_free_internal(struct op *o);
/* Link a user op into ep->xfers, taking references on its peer and memory. */
void tpx__op_user_link(struct op *o);
/* Free a user op that is not in flight (drops its references). */
void tpx__op_user_destroy(struct op *o);

/* The peer's list of ops in progress (deadlines, failure). */
void tpx__op_active_add(struct tpx_peer *p, struct op *o);

/* A peer queue linked through qnext (deferred starts, unmatched sends,
 * incoming FIFO): append o at the tail; take o out wherever it is (no-op
 * when it is not there). Inline, as part of the type: the files below op.c
 * that keep such queues (notif.c) call nothing in it. */
static inline void tpx__op_queue_push(struct op **head, struct op **tail, struct op *o) {
  o->qnext = NULL;
  if (*tail) (*tail)->qnext = o;
  else *head = o;
  *tail = o;
}

static inline void tpx__op_queue_remove(struct op **head, struct op **tail, struct op *o) {
  struct op **pp = head, *prev = NULL;
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

/* Round-robin start channel for the next transfer of nchunks chunks. */
uint32_t tpx__op_take_first_ch(struct tpx_peer *p, uint64_t nchunks);
/* Queue every chunk on the peer's windows (or finish at once when there
 * are none). Returns < 0 when the peer can no longer go on. */
int tpx__op_start_data(struct op *o, uint32_t first_ch, int is_recv);
/* window_done_fn: one chunk of o left channel ch's window. */
int tpx__op_chunk_done(struct op *o, int ch);
/* Every chunk is through and no lost channel's answer is due: the data
 * phase ends (as when its last chunk finishes). */
int tpx__op_maybe_done(struct op *o);
/* Free the resend layers (route.h); none of their links may be queued. */
void tpx__op_drop_layers(struct op *o);
/* Done (status 0) or failed: user ops report, internal ops are freed once
 * they leave the peer's arrival-order FIFO (notif.c). */
void tpx__op_finish(struct op *o, int status);
/* The peer failed (every op) or went away (only_ctrl_waits: the ops waiting
 * for a control message that can no longer come). */
void tpx__op_fail_all(struct tpx_peer *p, int err, int only_ctrl_waits);
/* Status of an acknowledged / refused id, back to the peer. */
int tpx__op_send_status(struct tpx_peer *p, int what, uint64_t id, int status);

/* ids.c: slot index in the low half, generation in the high half, so a late
 * or forged id never matches a recycled slot. 0 when out of memory. */
uint64_t tpx__id_register(struct tpx_peer *p, struct op *o);
struct op *tpx__id_lookup(struct tpx_peer *p, uint64_t id);
void tpx__id_unregister(struct tpx_peer *p, uint64_t id);
/* A transfer as both sides name it in MSG_CHAN and MSG_SUM: what
 * (wire_status_what) and key, the initiator's id for one-sided requests, the
 * receive's for two-sided ones. sends_data: o is the data's sender. find: the
 * op in p's active list with that name and role, or NULL. */
int tpx__op_sends_data(const struct op *o);
uint8_t tpx__op_what(const struct op *o);
uint64_t tpx__op_key(const struct op *o);
struct op *tpx__op_find(struct tpx_peer *p, uint8_t what, uint64_t id, int sender);

#endif
