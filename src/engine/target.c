/* Incoming one-sided requests, where we are the target: a peer's WRITE is
 * checked against our writable registrations, its data lands through the
 * receive windows, and op.c acknowledges it (MSG_STATUS) once every chunk
 * landed; a refused write is drained (window.c drops its bytes) and refused
 * at once. A peer's READ is checked against our readable registrations and
 * served through the send windows (or inline in the answer). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/timeline.h"
#include "engine/control.h"
#include "engine/admit.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/gpu/gpu_path.h"
#include "engine/gpu/pack_runs.h"
#include "engine/inline_data.h"
#include "engine/integrity.h"
#include "engine/mem.h"
#include "engine/target.h"
#include "engine/notif.h"
#include "engine/op.h"
#include "engine/peer.h"

static int check_entry(tpx_endpoint_t *ep, const struct tpx__wire_entry *e, unsigned need, struct tpx__xent *out) {
  struct tpx_mem *m = tpx__mem_lookup(ep, e->region);
  if (!m || m->internal || !(m->access & need)) return TPX_EACCES;
  uint64_t base = (uint64_t)(uintptr_t)m->base;
  if (e->addr < base) return TPX_EACCES;
  uint64_t off = e->addr - base;
  if (off > m->len || e->len > m->len - off) return TPX_EACCES;
  out->mem = m;
  out->off = off;
  out->len = e->len;
  return 0;
}

/* A packed plan (plan.h) takes host memory, and GPU memory of one device
 * where this side's GPU path stages both ways (gpu/gpu_path.h); elsewhere
 * the GPU path moves one entry per chunk, and a peer on the same transport
 * never asks it. */
static int packed_ok(struct tpx_peer *p, const struct tpx__op *o, const char *what) {
  if (!o->pack_max || tpx__pack_mem_ok(o->ents, o->nents, tpx__gpu_pack_ok(p->ep))) return 0;
  tpx__peer_fail(p, TPX_EPROTO, "peer %s: %s %llu asks for packed chunks into GPU memory, which this side %s",
                 p->where, what, (unsigned long long)o->id,
                 tpx__gpu_pack_ok(p->ep) ? "holds on several GPUs" : "moves one entry per chunk");
  return TPX_EPROTO;
}

/* What holding a request costs: its op, entry list, links and notification. */
static uint64_t held_cost(const struct tpx_peer *p, const struct tpx__wire_rw *m) {
  return sizeof(struct tpx__op) + (uint64_t)m->n * sizeof(struct tpx__xent) +
         (uint64_t)p->nch * sizeof(struct tpx__wlink) + (m->has_notif ? m->notif_len : 0);
}

/* Bounds on what one more request makes us hold (docs/SECURITY.md). */
static int admit(struct tpx_peer *p, const struct tpx__wire_rw *m, const char *what) {
  int rc = tpx__peer_admit(p, what);
  if (rc == 0) rc = tpx__admit_held(p, held_cost(p, m), what);
  if (rc == 0 && m->has_notif) rc = tpx__admit_notif(p, m->notif_len);
  if (rc) tpx__peer_fail_last(p, rc);
  return rc;
}

/* A peer's WRITE or READ parsed, admitted (bounds) and given its op, or
 * NULL with *rc set (the peer already failed). */
static struct tpx__op *new_request(struct tpx_peer *p, const struct tpx__wire_frame *f, int kind, const char *what,
                                   struct tpx__wire_rw *m, int *rc) {
  if ((*rc = tpx__wire_get_rw(f, m)) != 0) {
    tpx__peer_fail(p, *rc, "peer %s: bad %s request: %s", p->where, what, tpx_last_error());
    return NULL;
  }
  if ((*rc = admit(p, m, what)) != 0) return NULL;
  struct tpx__op *o = tpx__op_new_internal(p, kind, m->n);
  if (!o || (m->has_notif && tpx__op_copy_notif(o, m->notif, m->notif_len))) {
    if (o) tpx__op_free_internal(o);
    tpx__peer_fail(p, TPX_ENOMEM, "peer %s: out of memory for %s %llu", p->where, what, (unsigned long long)m->id);
    *rc = TPX_ENOMEM;
    return NULL;
  }
  o->id = m->id;
  o->chunk = m->chunk;
  o->held = held_cost(p, m); /* given back when the op is freed (op.c) */
  p->held_bytes += o->held;
  p->ep->held_bytes += o->held;
  return o;
}

/* The request's chunks, by the plan it asked for (none when its data came
 * inline): 0, or TPX_EPROTO with o freed and the peer failed. */
static int plan_request(struct tpx_peer *p, struct tpx__op *o, const struct tpx__wire_rw *m, const char *what,
                        int inl) {
  o->pack_max = m->pack_log2 ? 1ull << m->pack_log2 : 0;
  if (packed_ok(p, o, what) != 0) {
    tpx__op_free_internal(o);
    return TPX_EPROTO;
  }
  o->nchunks = inl ? 0 : tpx__plan_nchunks_packed(o->ents, o->nents, o->chunk, o->pack_max);
  if (o->nchunks >= OP_MAX_CHUNKS) {
    tpx__op_free_internal(o);
    tpx__peer_fail(p, TPX_EPROTO, "peer %s: %s %llu has too many chunks", p->where, what, (unsigned long long)m->id);
    return TPX_EPROTO;
  }
  o->has_notif = m->has_notif;
  return 0;
}

/* Every chunk of an incoming write is in: acknowledge it, unless it was
 * refused when it arrived (tpx__target_on_write sent the refusal then, and
 * its data was drained). A write is answered exactly once. */
static int write_landed(struct tpx__op *o) {
  struct tpx_peer *p = o->peer;
  int rc = 0;
  TPX_TRACE("peer %s: incoming write %llu landed; acknowledging", p->where, (unsigned long long)o->id);
  int v = o->discard ? TPX_EACCES : tpx__sum_verdict(o); /* no wrong byte acknowledged */
  if (!o->discard) rc = tpx__op_send_status(p, ST_WRITE, o->id, v);
  tpx__op_finish(o, v);
  return rc;
}

int tpx__target_on_write(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  tpx_endpoint_t *ep = p->ep;
  struct tpx__wire_rw m;
  int rc;
  struct tpx__op *o = new_request(p, f, K_IN_WRITE, "write", &m, &rc);
  if (!o) return rc;
  o->landed = write_landed;
  uint64_t total = 0;
  int bad = 0;
  struct tpx__wire_entry e;
  for (uint32_t i = 0; i < m.n; i++) {
    tpx__wire_entry_at(m.entries, i, &e);
    if (e.len > OP_MAX_BYTES || total + e.len > OP_MAX_BYTES) {
      tpx__op_free_internal(o);
      tpx__peer_fail(p, TPX_EPROTO, "peer %s: write %llu of more than 2^48 bytes", p->where, (unsigned long long)m.id);
      return TPX_EPROTO;
    }
    total += e.len;
    if (!bad && check_entry(ep, &e, TPX_ACCESS_WRITE, &o->ents[i]) != 0) {
      bad = 1;
      TPX_PEER_LOG(p, PL_WRITE_REFUSED, TPX_LOG_ERROR, "endpoint %s: peer %s: write %llu entry %u [0x%llx, +%llu) in region %llu is outside our "
                "writable registrations: refused, nothing written",
                ep->name, p->where, (unsigned long long)m.id, i, (unsigned long long)e.addr,
                (unsigned long long)e.len, (unsigned long long)e.region);
    }
  }
  if (bad) { /* drain the data that is already on its way, landing nowhere */
    o->discard = 1;
    for (uint32_t i = 0; i < m.n; i++) {
      tpx__wire_entry_at(m.entries, i, &e);
      o->ents[i].mem = NULL;
      o->ents[i].off = 0;
      o->ents[i].len = e.len;
    }
  } else {
    /* checked: lands inside our registrations */
    /* inline bytes that fail their check land nowhere: the write is answered TPX_EINTEGRITY */
    int corrupt = m.inl && m.sum_on && tpx__sum_inline(o, m.data, m.inl_len, m.sum) != 0;
    if (m.inl && !corrupt && (rc = tpx__inline_scatter(o->ents, o->nents, m.data)) != 0) {
      tpx__op_free_internal(o);
      tpx__peer_fail(p, rc, "peer %s: write %llu: its inline bytes could not be copied in: %s", p->where,
                     (unsigned long long)m.id, tpx_last_error());
      return rc;
    }
    for (uint32_t i = 0; i < m.n; i++) o->ents[i].mem->irefs++;
    o->refs_taken = 1;
  }
  o->total = total;
  if ((rc = plan_request(p, o, &m, "write", m.inl)) != 0) return rc;
  TPX_TL(TL_TARGET, K_IN_WRITE, o->id, total, o->nchunks);
  tpx__op_active_add(p, o);
  tpx__notif_fifo_push(p, o);
  if (bad && (rc = tpx__op_send_status(p, ST_WRITE, o->id, TPX_EACCES)) != 0) {
    tpx__peer_fail_last(p, rc);
    return rc;
  }
  if ((rc = tpx__op_start_data(o, m.first_ch, 1)) != 0) tpx__peer_fail_last(p, rc);
  return rc;
}

int tpx__target_on_read(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  tpx_endpoint_t *ep = p->ep;
  struct tpx__wire_rw m;
  int rc;
  struct tpx__op *o = new_request(p, f, K_SERVE_READ, "read", &m, &rc);
  if (!o) return rc;
  struct tpx__wire_entry e;
  for (uint32_t i = 0; i < m.n; i++) {
    tpx__wire_entry_at(m.entries, i, &e);
    if (check_entry(ep, &e, TPX_ACCESS_READ, &o->ents[i]) != 0) {
      TPX_PEER_LOG(p, PL_READ_REFUSED, TPX_LOG_ERROR, "endpoint %s: peer %s: read %llu entry %u [0x%llx, +%llu) in region %llu is outside our "
                "readable registrations: refused",
                ep->name, p->where, (unsigned long long)m.id, i, (unsigned long long)e.addr,
                (unsigned long long)e.len, (unsigned long long)e.region);
      tpx__op_free_internal(o);
      rc = tpx__op_send_status(p, ST_READ, m.id, TPX_EACCES);
      if (rc) tpx__peer_fail_last(p, rc);
      return rc;
    }
  }
  for (uint32_t i = 0; i < m.n; i++) o->ents[i].mem->irefs++;
  o->refs_taken = 1;
  if ((rc = plan_request(p, o, &m, "read", 0)) != 0) return rc;
  uint64_t total = 0;
  for (uint32_t i = 0; i < o->nents; i++) total += o->ents[i].len;
  TPX_TL(TL_TARGET, K_SERVE_READ, o->id, total, o->nchunks);
  struct iovec iov[INLINE_MAX_IOV];
  int niov = m.inl ? tpx__inline_ok(ep, o->ents, o->nents, total, iov) : TPX_ENOTSUP;
  uint32_t first = 0;
  if (niov >= 0) o->nchunks = 0; /* all of it goes in the answer */
  else first = tpx__op_take_first_ch(p, o->nchunks);
  struct tpx__wire_read_data rd = {m.id, (uint16_t)first, niov < 0 ? 0 : p->sum ? 2 : 1, total, NULL, 0};
  rc = tpx__ctl_send(p, tpx__wire_put_read_data(&p->out, &rd, iov, niov >= 0 ? niov : 0));
  if (rc) {
    tpx__op_free_internal(o);
    tpx__peer_fail_last(p, rc);
    return rc;
  }
  tpx__op_active_add(p, o);
  if (o->has_notif) tpx__notif_fifo_push(p, o);
  if ((rc = tpx__op_start_data(o, first, 0)) != 0) tpx__peer_fail_last(p, rc);
  return rc;
}
