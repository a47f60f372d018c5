/* Starting posted transfers (start.h): the control message that starts a
 * transfer (initiator.c, target.c and match.c handle the other side), its chunks
 * queued on the windows (op.c), and the peer's queue of posted transfers
 * whose start was left to the progress pass. */
#include <sys/uio.h>

#include "common/error.h"
#include "common/util.h"
#include "engine/control.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/inline_data.h"
#include "engine/match.h"
#include "engine/op.h"
#include "engine/peer.h"
#include "engine/start.h"

static const void *notif_arg(const struct tpx__op *o) {
  if (!o->has_notif) return NULL;
  return o->notif ? (const void *)o->notif : (const void *)"";
}

static int pack_log2_of(const struct tpx__op *o) {
  int k = 0;
  while (o->pack_max >> (k + 1)) k++;
  return o->pack_max ? k : 0;
}

void tpx__start_now(struct tpx_peer *p, struct tpx__op *o) {
  tpx_endpoint_t *ep = p->ep;
  int rc = 0;
  switch (o->kind) {
  case K_WRITE: {
    struct iovec iov[INLINE_MAX_IOV];
    int niov = tpx__inline_ok(ep, o->ents, o->nents, o->total, iov);
    uint32_t first = niov >= 0 ? 0 : tpx__op_take_first_ch(p, o->nchunks);
    rc = tpx__ctl_send(p, tpx__wire_put_rw_plan(&p->out, MSG_WRITE, o->id, (uint16_t)first, o->chunk, o->rents,
                                                o->nents, notif_arg(o), o->notif_len, niov >= 0 ? iov : NULL, niov,
                                                pack_log2_of(o), p->sum));
    if (rc) break;
    if (niov >= 0) { /* the data went with the request: wait for the ack */
      uint64_t n = o->nchunks;
      o->nchunks = 0;
      rc = tpx__op_start_data(o, 0, 0);
      o->nchunks = n;
    } else {
      rc = tpx__op_start_data(o, first, 0);
    }
    break;
  }
  case K_READ: {
    o->phase = PH_WAIT_HDR;
    o->deadline = tpx__now_ns() + tpx__ms_to_ns(ep->cfg.timeout_ms);
    struct iovec riov[INLINE_MAX_IOV];
    int welcome = tpx__inline_iov(o->ents, o->nents, riov) >= 0; /* our side can take it inline */
    rc = tpx__ctl_send(p, tpx__wire_put_rw_plan(&p->out, MSG_READ, o->id, 0, o->chunk, o->rents, o->nents,
                                                notif_arg(o), o->notif_len, NULL, welcome, pack_log2_of(o), 0));
    break;
  }
  case K_RECV: {
    o->phase = PH_WAIT_HDR;
    struct iovec riov[1];
    struct tpx__wire_cts c = {o->id, o->tag, o->cap, tpx__inline_iov(o->ents, 1, riov) >= 0};
    rc = tpx__ctl_send(p, tpx__wire_put_cts(&p->out, &c));
    break;
  }
  case K_SEND: {
    struct tpx__cts_entry c;
    if (tpx__match_take_cts(p, o->tag, &c)) {
      o->phase = PH_DATA;
      tpx__match_start_send(p, o, &c);
    } else {
      tpx__match_queue_send(p, o);
    }
    break;
  }
  }
  if (rc) tpx__peer_fail(p, rc, "peer %s: %s %llu not started: %s", p->where, tpx__op_kind_name(o->kind),
                    (unsigned long long)o->id, tpx_last_error());
}

int tpx__start_in_post(const struct tpx_peer *p, const struct tpx__op *o) {
  return !p->start_head && o->total <= START_NOW_MAX_BYTES;
}

void tpx__start_defer(struct tpx_peer *p, struct tpx__op *o) {
  o->phase = PH_QUEUED;
  tpx__op_queue_push(&p->start_head, &p->start_tail, o);
}

int tpx__start_deferred(struct tpx_peer *p) {
  int n = 0;
  while (p->start_head && p->state == P_READY) {
    struct tpx__op *o = p->start_head;
    p->start_head = o->qnext;
    if (!p->start_head) p->start_tail = NULL;
    o->qnext = NULL;
    o->phase = PH_IDLE; /* as a post leaves it for tpx__start_now */
    tpx__start_now(p, o);
    n++;
  }
  return n;
}
