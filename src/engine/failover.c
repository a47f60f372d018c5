/* A lost channel costs bandwidth, not the transfer (failover.h). */
#include "engine/failover.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/channel.h"
#include "engine/control.h"
#include "engine/core.h"
#include "engine/gpu/gpu_path.h"
#include "engine/integrity.h"
#include "engine/op.h"
#include "engine/peer.h"
#include "engine/peer_log.h"
#include "engine/rejoin.h"
#include "engine/route.h"
#include "engine/stripe.h"
#include "engine/window.h"

/* ---- losing a channel ---- */

/* Our transfers with chunks on c: counted as done until the receiver says
 * which it still needs (CHAN_ASK). */
static int ask_about(struct tpx_peer *p, int c) {
  for (struct tpx__op *o = p->active; o; o = o->next) {
    if (!tpx__op_sends_data(o) || (o->phase != PH_DATA && o->phase != PH_WAIT_ACK) || (uint32_t)c >= o->nch) continue;
    uint64_t n = o->links[c].total;
    if (!n) continue;
    o->chunks_left -= n - o->links[c].done;
    o->links[c].done = n;
    o->await_mask |= 1ull << c;
    struct tpx__wire_chan m = {.step = CHAN_ASK, .ch = (uint16_t)c, .what = tpx__op_what(o), .id = tpx__op_key(o)};
    int rc = tpx__ctl_send(p, tpx__wire_put_chan(&p->out, &m));
    if (rc) return rc;
  }
  return 0;
}

/* Our receiving transfers with chunks on c still missing: they must come
 * again within the request deadline (a sender that had already finished
 * cannot send them; the peer then fails, as without failover). */
static void expect_again(struct tpx_peer *p, int c) {
  uint64_t by = tpx__now_ns() + tpx__ms_to_ns(p->ep->cfg.timeout_ms);
  for (struct tpx__op *o = p->active; o; o = o->next)
    if (!tpx__op_sends_data(o) && o->kind != K_NOTIF && o->phase == PH_DATA && (uint32_t)c < o->nch &&
        o->links[c].done < o->links[c].total && !o->resend_deadline)
      o->resend_deadline = by;
}

/* Channel c is lost: why (detail), code. told: the peer said so. Returns 0,
 * or < 0 when the peer cannot go on (no channel left, fixed striping). */
static int lose(struct tpx_peer *p, int c, int code, const char *why, int told) {
  struct tpx__channel *ch = &p->ch[c];
  if (ch->down) return 0;
  if (!p->sched || p->nup <= 1 || p->state != P_READY) return tpx_err_quiet(code, "%s", why);
  ch->down = 1;
  ch->losses++;
  p->nup--;
  TPX_PEER_LOG(p, PL_CHANNEL_LOST, TPX_LOG_WARN, "peer %s channel %d lost%s: %s; its chunks go on the %d other channel(s)",
               p->where, c, told ? " (the peer's side)" : "", why, p->nup);
  tpx__window_purge(p, &ch->sq);
  tpx__window_purge(p, &ch->rq);
  for (struct tpx__op *o = p->active; o; o = o->next)
    o->lost_mask |= 1ull << c; /* their links there are gone */
  int rc = tpx__channel_drop_send(p, ch);
  tpx__channel_drop_recv(p, ch);
  /* GPU state tied to the closed comms (staging arena registration, the
   * UNPACK device handle) goes with them; a rejoined comm gets its own. */
  tpx__gpu_window_free(&ch->sq);
  tpx__gpu_window_free(&ch->rq);
  tpx__stripe_reset(p, c);
  ch->rejoin_next_ns = tpx__now_ns() + tpx__ms_to_ns(REJOIN_FIRST_MS);
  ch->rejoin_wait_ms = REJOIN_FIRST_MS;
  struct tpx__wire_chan m = {
      .step = CHAN_DOWN, .ch = (uint16_t)c, .code = code < 0 && code >= TPX_EUNKNOWN ? code : TPX_ESYSTEM};
  if (rc == 0 && !told) rc = tpx__ctl_send(p, tpx__wire_put_chan(&p->out, &m));
  if (rc == 0) rc = tpx__stripe_replan(p); /* new transfers leave it out */
  if (rc == 0) rc = ask_about(p, c);
  expect_again(p, c);
  return rc;
}

/* ---- resend layers ---- */

/* A resend layer on o: its chunks on the lost channel c placed over pat.
 * Both sides call it at the same point of the control stream. */
static int add_layer(struct tpx_peer *p, struct tpx__op *o, int c, uint32_t seed, const struct tpx__route_pat *pat,
                     int is_recv) {
  if (o->nlayers >= ROUTE_MAX_LAYERS)
    return tpx_err_quiet(TPX_ESYSTEM, "peer %s: %s %llu lost more than %d channels", p->where, tpx__op_kind_name(o->kind),
                         (unsigned long long)o->id, ROUTE_MAX_LAYERS);
  struct tpx__route_layer *ls = realloc(o->layers, (o->nlayers + 1) * sizeof(*ls));
  if (!ls) return tpx_err_quiet(TPX_ENOMEM, "peer %s: out of memory", p->where);
  o->layers = ls;
  struct tpx__route_layer *L = &ls[o->nlayers];
  memset(L, 0, sizeof(*L));
  L->links = calloc(o->nch, sizeof(*L->links));
  if (!L->links) return tpx_err_quiet(TPX_ENOMEM, "peer %s: out of memory", p->where);
  L->dead = (uint8_t)c;
  L->seed = seed;
  L->pat = *pat;
  o->nlayers++;
  o->resend_deadline = 0;
  o->chunks_left += o->links[c].done; /* every chunk it had on c comes again */
  o->links[c].done = 0;
  tpx__route_totals(o);
  if (o->phase == PH_WAIT_ACK) o->phase = PH_DATA;
  for (uint32_t d = 0; d < o->nch; d++) {
    struct tpx__wlink *l = &L->links[d];
    l->op = o;
    l->ch = (uint8_t)d;
    l->layer = (uint8_t)o->nlayers;
    if (!tpx__route_first(l, &l->cur) || p->ch[d].down) continue; /* a chunk on a lost one: asked about later */
    tpx__window_enqueue(p, is_recv ? &p->ch[d].rq : &p->ch[d].sq, l);
    o->lost_mask &= ~(1ull << d); /* a link of it walks d again */
  }
  return 0;
}

/* ---- the frames ---- */
/* A question or a resend about o's chunks on channel c is the peer's to make
 * only for a channel lost while o ran: elsewhere o's own links still walk
 * those chunks, and a second walk would count them twice. */
static int lost_for(const struct tpx__op *o, unsigned c) { return c < o->nch && (o->lost_mask >> c & 1); }

static int on_ask(struct tpx_peer *p, const struct tpx__wire_chan *m) {
  struct tpx__op *o = tpx__op_find(p, m->what, m->id, 0);
  if (o && o->phase == PH_DATA && !lost_for(o, m->ch))
    return tpx_err_quiet(TPX_EPROTO, "peer %s: asked about channel %u of transfer id %llu, which was not lost",
                         p->where, m->ch, (unsigned long long)m->id);
  struct tpx__wire_chan v = {.step = CHAN_VERDICT, .ch = m->ch, .what = m->what, .id = m->id};
  if (o && o->phase == PH_DATA && m->ch < o->nch) {
    v.layers = o->nlayers;
    v.need = o->links[m->ch].done < o->links[m->ch].total;
  }
  return tpx__ctl_send(p, tpx__wire_put_chan(&p->out, &v)); /* an op we no longer have: it has every byte (or failed, and said so) */
}

static int on_verdict(struct tpx_peer *p, const struct tpx__wire_chan *m) {
  struct tpx__op *o = tpx__op_find(p, m->what, m->id, 1);
  uint64_t bit = 1ull << m->ch;
  if (!o || !(o->await_mask & bit)) return 0; /* finished or failed meanwhile */
  o->await_mask &= ~bit;
  if (m->need) {
    uint32_t seed = (uint32_t)tpx__now_ns() ^ (uint32_t)(o->nlayers * 2654435761u);
    int rc = add_layer(p, o, m->ch, seed, &p->tx_pat, 0);
    if (rc) return rc;
    struct tpx__wire_chan r = {.step = CHAN_RESEND, .ch = m->ch, .what = m->what, .id = m->id, .seed = seed};
    r.pat.len = p->tx_pat.len;
    memcpy(r.pat.ch, p->tx_pat.ch, p->tx_pat.len);
    if ((rc = tpx__ctl_send(p, tpx__wire_put_chan(&p->out, &r))) != 0) return rc;
    TPX_DEBUG("peer %s: %s %llu: chunks of lost channel %u sent again", p->where, tpx__op_kind_name(o->kind),
              (unsigned long long)o->id, m->ch);
  }
  return tpx__op_maybe_done(o);
}

static int on_resend(struct tpx_peer *p, const struct tpx__wire_chan *m) {
  struct tpx__op *o = tpx__op_find(p, m->what, m->id, 0);
  if (!o || o->phase != PH_DATA || !lost_for(o, m->ch))
    return tpx_err_quiet(TPX_EPROTO, "peer %s: chunks sent again for unknown or finished transfer id %llu, or on "
                         "channel %u it did not lose", p->where, (unsigned long long)m->id, m->ch);
  struct tpx__route_pat pat;
  pat.len = m->pat.len;
  memcpy(pat.ch, m->pat.ch, pat.len);
  if (!tpx__route_pat_valid(&pat, p->nch))
    return tpx_err_quiet(TPX_EPROTO, "peer %s: resend pattern names a channel beyond its %d", p->where, p->nch);
  return add_layer(p, o, m->ch, m->seed, &pat, 1);
}

/* Every chunk of a send or served read we kept landed. */
static int on_landed(struct tpx_peer *p, const struct tpx__wire_chan *m) {
  struct tpx__op *o = tpx__op_find(p, m->what, m->id, 1);
  if (!o || o->kind == K_WRITE || o->acked)
    return tpx_err_quiet(TPX_EPROTO, "peer %s: landed for unknown or finished transfer id %llu", p->where,
                         (unsigned long long)m->id);
  o->acked = 1;
  o->await_mask = 0; /* nothing of it is missing: no answer about a lost channel is needed */
  if (o->phase == PH_WAIT_ACK) tpx__op_finish(o, 0);
  else return tpx__op_maybe_done(o); /* its last sends' completions may still be coming */
  return 0;
}

int tpx__failover_on_frame(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  struct tpx__wire_chan m;
  if (!p->sched) return tpx_err_quiet(TPX_EPROTO, "peer %s: a channel message, but failover was not agreed", p->where);
  int rc = tpx__wire_get_chan(f, &m);
  if (rc) return tpx_err_quiet(rc, "peer %s: bad channel message: %s", p->where, tpx_last_error());
  if (m.ch >= p->nch) return tpx_err_quiet(TPX_EPROTO, "peer %s: channel %u of %d", p->where, m.ch, p->nch);
  switch (m.step) {
  case CHAN_DOWN: {
    if (p->ch[m.ch].down) return tpx__rejoin_on_frame(p, &m); /* the peer gave a rejoin attempt up */
    char why[64];
    snprintf(why, sizeof(why), "%s", tpx_strerror(m.code));
    return lose(p, m.ch, TPX_EREMOTE, why, 1);
  }
  case CHAN_ASK: return on_ask(p, &m);
  case CHAN_VERDICT: return on_verdict(p, &m);
  case CHAN_RESEND: return on_resend(p, &m);
  case CHAN_LANDED: return on_landed(p, &m);
  case CHAN_RATE:
    tpx__stripe_on_rate(p, m.ch, m.gen);
    return 0;
  default: return tpx__rejoin_on_frame(p, &m);
  }
}

/* ---- progress and stalls ---- */

/* What a lost link looks like to a window: the transport reporting the
 * connection closed or failed, or a request past its deadline. A peer that
 * breaks the byte accounting (TPX_EPROTO), or our own resources failing, is
 * not a link: those fail the peer as before. */
static int link_error(int rc) {
  return rc == TPX_ESYSTEM || rc == TPX_EREMOTE || rc == TPX_ECLOSED || rc == TPX_ETIMEDOUT;
}

int tpx__failover_progress(struct tpx_peer *p) {
  int did = 0;
  for (int c = 0; c < p->nch; c++) {
    if (p->ch[c].down) continue;
    int r = tpx__channel_progress(p, c);
    if (r >= 0) {
      did += r;
      continue;
    }
    if (!link_error(r)) return r;
    char why[300];
    snprintf(why, sizeof(why), "%s", tpx_last_error());
    if ((r = lose(p, c, r, why, 0)) < 0) return r;
    did++;
  }
  int r = tpx__sum_flush(p); /* the pass's chunks' sums in as few frames as it allows */
  return r < 0 ? r : did;
}

/* A window with requests in the transport that moved nothing for the stall
 * time while another channel moved since. */
static int stalled(const struct tpx__window *q, uint64_t now, uint64_t stall, uint64_t others) {
  return q->comm && q->tail > q->head && now - q->moved_ns > stall && others > q->moved_ns && now - others < stall;
}

int tpx__failover_tick(struct tpx_peer *p, uint64_t now) {
  if (p->state != P_READY || !p->sched || now < p->fo_next_ns) return 0;
  p->fo_next_ns = now + 10000000ull;
  int rc = tpx__stripe_tick(p, now);
  if (rc) return rc;
  uint64_t stall = tpx__ms_to_ns(p->ep->cfg.channel_stall_ms);
  for (int c = 0; c < p->nch && p->nup > 1; c++) {
    struct tpx__channel *ch = &p->ch[c];
    if (ch->down) continue;
    uint64_t others = 0;
    int by = -1;
    for (int d = 0; d < p->nch; d++) {
      const struct tpx__channel *o = &p->ch[d];
      if (d == c || o->down) continue;
      uint64_t t = o->sq.moved_ns > o->rq.moved_ns ? o->sq.moved_ns : o->rq.moved_ns;
      if (t > others) others = t, by = d;
    }
    const struct tpx__window *q = stalled(&ch->sq, now, stall, others) ? &ch->sq : &ch->rq;
    if (!stalled(q, now, stall, others)) continue;
    char why[160];
    snprintf(why, sizeof(why), "%s chunk %llu made no progress for %d ms while channel %d moved", q->is_recv ? "recv" : "send",
             (unsigned long long)q->ring[q->head % q->cap].chunk, p->ep->cfg.channel_stall_ms, by);
    if ((rc = lose(p, c, TPX_ETIMEDOUT, why, 0)) < 0) return rc;
  }
  return tpx__rejoin_tick(p, now);
}
