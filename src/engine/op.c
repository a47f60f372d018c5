/* Operation lifetime (op.h): creation and freeing, the data phase (chunks
 * queued on the peer's windows), completion and failure. Completion arrives
 * from below (window.c reports each chunk through tpx__op_chunk_done); nothing
 * here fails a peer: errors are returned to whoever decides that. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/config.h"
#include "common/error.h"
#include "common/log.h"
#include "common/timeline.h"
#include "common/util.h"
#include "engine/control.h"
#include "engine/core.h"
#include "engine/integrity.h"
#include "engine/mem.h"
#include "engine/notif.h"
#include "engine/op.h"
#include "engine/peer.h"
#include "engine/window.h"

/* vsnprintf: messages are clipped to the buffer on purpose. */
void tpx__op_set_errmsg(struct tpx__op *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(o->errmsg, sizeof(o->errmsg), fmt, ap);
  va_end(ap);
}

/* ---- creation and freeing ---- */
static struct tpx__op *op_alloc(struct tpx_peer *p, int kind, uint32_t nents, size_t size, uint32_t min_ents) {
  struct tpx__op *o = calloc(1, size);
  if (!o) return NULL;
  o->kind = kind;
  o->peer = p;
  if (nents || min_ents) o->ents = calloc(nents ? nents : min_ents, sizeof(*o->ents));
  o->links = calloc((size_t)p->nch, sizeof(*o->links));
  if (((nents || min_ents) && !o->ents) || !o->links) {
    free(o->ents);
    free(o->links);
    free(o);
    return NULL;
  }
  o->nents = nents;
  return o;
}

struct tpx__op *tpx__op_new_internal(struct tpx_peer *p, int kind, uint32_t nents) {
  struct tpx__op *o = op_alloc(p, kind, nents, sizeof(struct tpx__op), 0);
  if (!o) return NULL;
  atomic_init(&o->status, TPX_EINPROGRESS);
  p->nserve++;
  return o;
}

struct tpx__op *tpx__op_new_user(struct tpx_peer *p, int kind, uint32_t nents) {
  struct tpx__op *o = op_alloc(p, kind, nents, sizeof(struct tpx_xfer), 1);
  if (!o) return NULL;
  o->user = 1;
  atomic_init(&o->status, TPX_EUSAGE);
  /* the transfer's own once its size is known */
  o->chunk = (uint32_t)tpx__config_chunk_for(&p->ep->cfg, 0, p->nch, p->ep->ncpu);
  return o;
}

int tpx__op_copy_notif(struct tpx__op *o, const void *msg, uint32_t len) {
  o->has_notif = 1;
  o->notif_len = len;
  if (len == 0) return 0;
  o->notif = malloc(len);
  if (!o->notif) return TPX_ENOMEM;
  memcpy(o->notif, msg, len);
  return 0;
}

static void op_release_refs(struct tpx__op *o) {
  if (!o->refs_taken) return;
  for (uint32_t i = 0; i < o->nents; i++) {
    if (!o->ents[i].mem) continue;
    if (o->user) o->ents[i].mem->refs--;
    else o->ents[i].mem->irefs--;
  }
  o->refs_taken = 0;
}

void tpx__op_free(struct tpx__op *o) {
  tpx__sum_op_free(o);
  free(o->ents);
  free(o->rents);
  free(o->links);
  tpx__op_drop_layers(o);
  free(o->notif);
  free(o);
}

void tpx__op_drop_layers(struct tpx__op *o) {
  for (uint32_t k = 0; k < o->nlayers; k++) free(o->layers[k].links);
  free(o->layers);
  o->layers = NULL;
  o->nlayers = 0;
  o->await_mask = 0;
  o->lost_mask = 0;
  o->resend_deadline = 0;
}

void tpx__op_free_internal(struct tpx__op *o) {
  int had_refs = o->refs_taken;
  o->peer->nserve--;
  o->peer->held_bytes -= o->held; /* charged by target.c (admit.h) */
  o->peer->ep->held_bytes -= o->held;
  op_release_refs(o);
  if (had_refs) tpx__ep_signal(o->peer->ep); /* a deregistration may be waiting for it */
  tpx__op_free(o);
}

void tpx__op_user_link(struct tpx__op *o) {
  tpx_endpoint_t *ep = o->peer->ep;
  o->peer->refs++;
  for (uint32_t i = 0; i < o->nents; i++) o->ents[i].mem->refs++;
  o->refs_taken = 1;
  o->xprev = NULL;
  o->xnext = ep->xfers;
  if (ep->xfers) ep->xfers->xprev = o;
  ep->xfers = o;
}

void tpx__op_user_destroy(struct tpx__op *o) {
  tpx_endpoint_t *ep = o->peer->ep;
  if (o->xprev) o->xprev->xnext = o->xnext;
  else ep->xfers = o->xnext;
  if (o->xnext) o->xnext->xprev = o->xprev;
  op_release_refs(o);
  struct tpx_peer *p = o->peer;
  tpx__op_free(o);
  tpx__peer_release(p);
}

/* ---- the peer's active list ---- */
void tpx__op_active_add(struct tpx_peer *p, struct tpx__op *o) {
  o->prev = NULL;
  o->next = p->active;
  if (p->active) p->active->prev = o;
  p->active = o;
}

static void active_del(struct tpx_peer *p, struct tpx__op *o) {
  if (o->prev) o->prev->next = o->next;
  else if (p->active == o) p->active = o->next;
  if (o->next) o->next->prev = o->prev;
  o->next = o->prev = NULL;
}

/* ---- completion ---- */
void tpx__op_finish(struct tpx__op *o, int status) {
  struct tpx_peer *p = o->peer;
  TPX_TL(TL_OP_DONE, o->kind, o->id, (uint64_t)(int64_t)status, 0);
  TPX_TRACE("peer %s: %s %llu finished (%s)", p->where, tpx__op_kind_name(o->kind), (unsigned long long)o->id,
            status ? tpx_strerror(status) : "ok");
  if (o->id_reg) {
    tpx__id_unregister(p, o->id);
    o->id_reg = 0;
  }
  if (o->kind == K_SEND && o->phase == PH_WAIT_CTS) tpx__op_queue_remove(&p->sends_head, &p->sends_tail, o);
  if (o->phase == PH_QUEUED) tpx__op_queue_remove(&p->start_head, &p->start_tail, o);
  active_del(p, o);
  tpx__sum_op_free(o);
  if (status < 0 && !o->errmsg[0]) tpx__op_set_errmsg(o, "%s", p->errmsg[0] ? p->errmsg : tpx_strerror(status));
  if (o->user) {
    o->phase = PH_IDLE;
    atomic_store_explicit(&o->status, status, memory_order_release);
    if (o->orphan) tpx__op_user_destroy(o);
    else tpx__ep_signal(p->ep);
    return;
  }
  o->err = status;
  o->phase = PH_FINAL;
  if (!o->in_fifo) {
    tpx__op_free_internal(o);
    return;
  }
  for (struct tpx__op *d; (d = tpx__notif_fifo_pop_done(p)) != NULL;)
    tpx__op_free_internal(d);
}

void tpx__op_fail_all(struct tpx_peer *p, int err, int only_ctrl_waits) {
  for (struct tpx__op *o = p->active, *n; o; o = n) {
    n = o->next;
    if (only_ctrl_waits) {
      int waits = o->phase == PH_QUEUED || (o->kind == K_SEND && o->phase == PH_WAIT_CTS) ||
                  (o->kind == K_RECV && o->phase == PH_WAIT_HDR) ||
                  (o->kind == K_READ && o->phase == PH_WAIT_HDR) ||
                  (o->kind == K_WRITE && o->phase == PH_WAIT_ACK && !o->acked) ||
                  ((o->kind == K_SEND || o->kind == K_SERVE_READ) && o->phase == PH_WAIT_ACK);
      if (!waits) continue;
    }
    tpx__op_finish(o, err);
  }
  p->cts_n = 0;
  if (!only_ctrl_waits) {
    p->sends_head = p->sends_tail = NULL;
    for (struct tpx__op *o; (o = tpx__notif_fifo_pop(p)) != NULL;)
      tpx__op_free_internal(o);
  }
}

int tpx__op_send_status(struct tpx_peer *p, int what, uint64_t id, int status) {
  if (p->state != P_READY || p->fd < 0) return 0;
  struct tpx__wire_status st = {(uint8_t)what, id, status};
  return tpx__ctl_send(p, tpx__wire_put_status(&p->out, &st));
}

/* ---- the data phase ---- */
uint32_t tpx__op_take_first_ch(struct tpx_peer *p, uint64_t nchunks) {
  uint32_t len = p->tx_pat.len ? p->tx_pat.len : (uint32_t)p->nch;
  uint32_t f = p->next_first_ch % len;
  uint64_t n = nchunks ? nchunks : 1; /* the typical transfer's chunks (stripe.c) */
  p->stripe_chunks = (uint32_t)((p->stripe_chunks * 7ull + (n > 4096 ? 4096 : n) + 7) / 8);
  p->next_first_ch = (uint32_t)((f + (nchunks ? nchunks : 1)) % (uint64_t)len);
  return f;
}

/* Every chunk is through: a write waits for the target's acknowledgement;
 * an incoming request is answered by the side that accepted it (o->landed). */
static int op_data_done(struct tpx__op *o) {
  struct tpx_peer *p = o->peer;
  if (o->landed) return o->landed(o);
  switch (o->kind) {
  case K_WRITE:
    if (o->acked) tpx__op_finish(o, o->ack_status);
    else if (p->state != P_READY) tpx__op_finish(o, TPX_ECLOSED);
    else {
      o->phase = PH_WAIT_ACK;
      o->deadline = tpx__now_ns() + tpx__ms_to_ns(p->ep->cfg.timeout_ms);
    }
    break;
  case K_SEND:
  case K_SERVE_READ:
    /* With failover, kept until the receiver says every chunk landed: a
     * lost channel's chunks can still be sent again (failover.h). */
    if (p->sched && o->nchunks && !o->acked && p->state == P_READY) {
      o->phase = PH_WAIT_ACK;
      o->deadline = tpx__now_ns() + tpx__ms_to_ns(p->ep->cfg.timeout_ms);
    } else {
      tpx__op_finish(o, 0);
    }
    break;
  case K_READ:
  case K_RECV:
    if (p->sched && o->nchunks && p->state == P_READY) { /* the sender keeps it until this */
      struct tpx__wire_chan m = {.step = CHAN_LANDED, .what = o->kind == K_READ ? ST_READ : ST_SEND, .id = o->id};
      int rc = tpx__ctl_send(p, tpx__wire_put_chan(&p->out, &m));
      if (rc) return rc;
    }
    tpx__op_finish(o, tpx__sum_verdict(o));
    break;
  default: tpx__op_finish(o, 0); break;
  }
  return 0;
}

int tpx__op_start_data(struct tpx__op *o, uint32_t first_ch, int is_recv) {
  struct tpx_peer *p = o->peer;
  o->nch = (uint32_t)p->nch;
  tpx__op_drop_layers(o); /* a reposted transfer starts over */
  /* The pattern the data's sender announced last (route.h; the fixed one
   * until it announces any): ours for what we send, the peer's for what we
   * receive. */
  const struct tpx__route_pat *pat = is_recv ? &p->rx_pat : &p->tx_pat;
  if (pat->len) o->pat = *pat;
  else tpx__route_pat_fixed(&o->pat, p->nch);
  o->first_ch = first_ch % o->pat.len;
  o->phase = PH_DATA;
  o->chunks_left = o->nchunks;
  if (o->nchunks == 0) return op_data_done(o);
  if (is_recv) {
    int rc = tpx__sum_op_start(o);
    if (rc) return rc;
  }
  for (uint32_t c = 0; c < o->nch; c++) {
    struct tpx__wlink *l = &o->links[c];
    memset(l, 0, sizeof(*l));
    l->op = o;
    l->ch = (uint8_t)c;
  }
  tpx__route_totals(o);
  for (uint32_t c = 0; c < o->nch; c++) {
    struct tpx__wlink *l = &o->links[c];
    struct tpx__channel *ch = &p->ch[c];
    if (ch->down) o->lost_mask |= 1ull << c; /* failover.h: asked about, sent again */
    if (!tpx__route_first(l, &l->cur) || ch->down) continue;
    tpx__window_enqueue(p, is_recv ? &ch->rq : &ch->sq, l);
  }
  return 0;
}

int tpx__op_chunk_done(struct tpx__op *o, int ch) {
  o->links[ch].done++;
  if (--o->chunks_left == 0 && o->phase == PH_DATA && !o->await_mask) return op_data_done(o);
  return 0;
}

int tpx__op_maybe_done(struct tpx__op *o) {
  if (o->chunks_left == 0 && o->phase == PH_DATA && !o->await_mask) return op_data_done(o);
  return 0;
}
