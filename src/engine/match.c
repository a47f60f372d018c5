/* Two-sided transfers: a recv announces itself (MSG_CTS: id, tag, capacity);
 * a send waits for the oldest announcement with its tag, then tells the
 * receiver where its data goes (MSG_SEND) and moves it (or carries it inline).
 * Unmatched sends and unmatched announcements wait in per-peer queues. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "engine/control.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/inline_data.h"
#include "engine/integrity.h"
#include "engine/match.h"
#include "engine/op.h"
#include "engine/peer.h"

void tpx__match_start_send(struct tpx_peer *p, struct tpx__op *o, const struct tpx__cts_entry *c) {
  o->match_id = c->recv_id;
  if (o->total > c->cap) {
    tpx__op_set_errmsg(o, "peer %s: send of %llu bytes (tag %llu) is larger than the matching recv (%llu bytes)",
             p->where, (unsigned long long)o->total, (unsigned long long)o->tag, (unsigned long long)c->cap);
    TPX_PEER_LOG(p, PL_SEND_TRUNC, TPX_LOG_WARN, "%s", o->errmsg);
    int rc = tpx__op_send_status(p, ST_SEND, c->recv_id, TPX_ETRUNC);
    o->phase = PH_IDLE;
    tpx__op_finish(o, TPX_ETRUNC);
    if (rc) tpx__peer_fail_last(p, rc);
    return;
  }
  struct iovec iov[INLINE_MAX_IOV];
  int niov = c->inl_ok ? tpx__inline_ok(p->ep, o->ents, o->nents, o->total, iov) : TPX_ENOTSUP;
  if (niov >= 0) { /* copied into the control message: the buffer is free again */
    struct tpx__wire_send s = {c->recv_id, o->total, 0, o->chunk, p->sum ? 2 : 1, NULL, 0};
    int rc = tpx__ctl_send(p, tpx__wire_put_send(&p->out, &s, iov, niov));
    if (rc) {
      tpx__peer_fail_last(p, rc);
      return;
    }
    tpx__op_finish(o, 0);
    return;
  }
  uint32_t first = tpx__op_take_first_ch(p, o->nchunks);
  struct tpx__wire_send s = {c->recv_id, o->total, (uint16_t)first, o->chunk, 0, NULL, 0};
  int rc = tpx__ctl_send(p, tpx__wire_put_send(&p->out, &s, NULL, 0));
  if (!rc) rc = tpx__op_start_data(o, first, 0);
  if (rc) tpx__peer_fail_last(p, rc);
}

int tpx__match_on_cts(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  struct tpx__wire_cts m;
  int rc = tpx__wire_get_cts(f, &m);
  if (rc) {
    tpx__peer_fail(p, rc, "peer %s: bad recv announcement", p->where);
    return rc;
  }
  struct tpx__cts_entry c = {m.recv_id, m.tag, m.cap, m.inl_ok};
  for (struct tpx__op *o = p->sends_head; o; o = o->qnext) {
    if (o->tag != m.tag) continue;
    /* take it out of the unmatched list, then start it */
    tpx__op_queue_remove(&p->sends_head, &p->sends_tail, o);
    o->phase = PH_DATA;
    tpx__match_start_send(p, o, &c);
    return 0;
  }
  rc = tpx__peer_admit(p, "receive announcement");
  if (rc) {
    tpx__peer_fail_last(p, rc);
    return rc;
  }
  if (p->cts_n == p->cts_cap) {
    uint32_t ncap = p->cts_cap ? p->cts_cap * 2 : 32;
    struct tpx__cts_entry *n = malloc(ncap * sizeof(*n));
    if (!n) {
      tpx__peer_fail(p, TPX_ENOMEM, "peer %s: out of memory", p->where);
      return TPX_ENOMEM;
    }
    for (uint32_t i = 0; i < p->cts_n; i++) n[i] = p->cts[(p->cts_head + i) % p->cts_cap];
    free(p->cts);
    p->cts = n;
    p->cts_cap = ncap;
    p->cts_head = 0;
  }
  p->cts[(p->cts_head + p->cts_n) % p->cts_cap] = c;
  p->cts_n++;
  return 0;
}

/* Oldest unmatched CTS with this tag, removed from the ring. */
int tpx__match_take_cts(struct tpx_peer *p, uint64_t tag, struct tpx__cts_entry *out) {
  for (uint32_t i = 0; i < p->cts_n; i++) {
    struct tpx__cts_entry *c = &p->cts[(p->cts_head + i) % p->cts_cap];
    if (c->tag != tag) continue;
    *out = *c;
    for (uint32_t j = i; j > 0; j--) /* close the gap, keeping order */
      p->cts[(p->cts_head + j) % p->cts_cap] = p->cts[(p->cts_head + j - 1) % p->cts_cap];
    p->cts_head = (p->cts_head + 1) % p->cts_cap;
    p->cts_n--;
    return 1;
  }
  return 0;
}

void tpx__match_queue_send(struct tpx_peer *p, struct tpx__op *o) {
  o->phase = PH_WAIT_CTS;
  tpx__op_queue_push(&p->sends_head, &p->sends_tail, o);
}

int tpx__match_on_send(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  int rc;
  struct tpx__wire_send m;
  if ((rc = tpx__wire_get_send(f, &m))) {
    tpx__peer_fail(p, rc, "peer %s: bad send header", p->where);
    return rc;
  }
  struct tpx__op *o = tpx__id_lookup(p, m.recv_id);
  if (!o || o->kind != K_RECV || o->phase != PH_WAIT_HDR) return tpx__peer_fail_proto(p, "send", m.recv_id);
  if (m.len > o->cap) {
    tpx__peer_fail(p, TPX_EPROTO, "peer %s: send of %llu bytes into a recv of %llu", p->where,
              (unsigned long long)m.len, (unsigned long long)o->cap);
    return TPX_EPROTO;
  }
  o->received = m.len;
  o->ents[0].len = m.len;
  o->chunk = m.chunk;
  o->total = m.len;
  if (m.inl) {
    int v = m.inl == 2 ? tpx__sum_inline(o, m.data, m.len, m.sum) : 0;
    tpx__op_finish(o, v ? v : tpx__inline_scatter(o->ents, 1, m.data));
    return 0;
  }
  o->nchunks = tpx__plan_nchunks(o->ents, 1, o->chunk);
  if ((rc = tpx__op_start_data(o, m.first_ch, 1)) != 0) tpx__peer_fail_last(p, rc);
  return rc;
}
