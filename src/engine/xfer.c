/* Operations: the public transfer handles, the control messages that drive
 * them, incoming one-sided requests (validated against our registrations),
 * notifications in order after the data they follow. */
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/engine.h"

#define MAX_OP_BYTES (1ull << 48)
#define MAX_OP_CHUNKS (1ull << 31)

/* ---- ids: slot index in the low half, generation in the high half, so a
 * late or forged id never matches a recycled slot ---- */
uint64_t id_register(struct tpx_peer *p, struct op *o) {
  uint32_t i = p->ids_free_hint;
  while (i < p->ids_cap && p->ids[i].op) i++;
  if (i >= p->ids_cap) {
    uint32_t ncap = p->ids_cap ? p->ids_cap * 2 : 64;
    struct id_slot *n = realloc(p->ids, ncap * sizeof(*n));
    if (!n) return 0;
    memset(n + p->ids_cap, 0, (ncap - p->ids_cap) * sizeof(*n));
    p->ids = n;
    i = p->ids_cap;
    p->ids_cap = ncap;
  }
  p->ids[i].op = o;
  if (++p->ids[i].gen == 0) p->ids[i].gen = 1;
  p->ids_free_hint = i + 1;
  o->id_reg = 1;
  return ((uint64_t)p->ids[i].gen << 32) | i;
}

struct op *id_lookup(struct tpx_peer *p, uint64_t id) {
  uint32_t i = (uint32_t)id, gen = (uint32_t)(id >> 32);
  if (i < p->ids_cap && p->ids[i].op && p->ids[i].gen == gen) return p->ids[i].op;
  return NULL;
}

void id_unregister(struct tpx_peer *p, uint64_t id) {
  uint32_t i = (uint32_t)id;
  if (i < p->ids_cap && p->ids[i].gen == (uint32_t)(id >> 32)) {
    p->ids[i].op = NULL;
    if (i < p->ids_free_hint) p->ids_free_hint = i;
  }
}

/* vsnprintf: messages are clipped to the buffer on purpose. */
static void set_errmsg(struct op *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void set_errmsg(struct op *o, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(o->errmsg, sizeof(o->errmsg), fmt, ap);
  va_end(ap);
}

static const char *kname(int k) {
  static const char *n[] = {"op", "write", "read", "send", "recv", "incoming write", "served read", "notification"};
  return k >= 0 && k <= K_NOTIF ? n[k] : "op";
}

/* ---- inline data: small host transfers ride in the control message ---- */
#define INLINE_MAX_IOV 64

static int ents_iov(const struct xent *e, uint32_t n, struct iovec *iov) {
  int k = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (!e[i].len) continue;
    if (k == INLINE_MAX_IOV || e[i].mem->type != TPX_MEM_HOST) return -1;
    iov[k].iov_base = e[i].mem->base + e[i].off;
    iov[k].iov_len = (size_t)e[i].len;
    k++;
  }
  return k;
}

static int can_inline(tpx_endpoint_t *ep, const struct xent *e, uint32_t n, uint64_t total, struct iovec *iov) {
  if (total > ep->cfg.inline_bytes || total > WIRE_MAX_INLINE) return -1;
  return ents_iov(e, n, iov);
}

static void scatter(const struct xent *e, uint32_t n, const uint8_t *data) {
  for (uint32_t i = 0; i < n; i++) {
    if (!e[i].len) continue;
    memcpy(e[i].mem->base + e[i].off, data, (size_t)e[i].len);
    data += e[i].len;
  }
}

/* ---- lists ---- */
static void active_add(struct tpx_peer *p, struct op *o) {
  o->prev = NULL;
  o->next = p->active;
  if (p->active) p->active->prev = o;
  p->active = o;
}
static void active_del(struct tpx_peer *p, struct op *o) {
  if (o->prev) o->prev->next = o->next;
  else if (p->active == o) p->active = o->next;
  if (o->next) o->next->prev = o->prev;
  o->next = o->prev = NULL;
}
static void fifo_push(struct tpx_peer *p, struct op *o) {
  o->qnext = NULL;
  o->in_fifo = 1;
  if (p->fifo_tail) p->fifo_tail->qnext = o;
  else p->fifo_head = o;
  p->fifo_tail = o;
}

static void op_release_refs(struct op *o) {
  if (!o->refs_taken) return;
  for (uint32_t i = 0; i < o->nents; i++) {
    if (!o->ents[i].mem) continue;
    if (o->user) o->ents[i].mem->refs--;
    else o->ents[i].mem->irefs--;
  }
  o->refs_taken = 0;
}

void op_free_internal(struct op *o) {
  int had_refs = o->refs_taken;
  op_release_refs(o);
  if (had_refs) ep_signal(o->peer->ep); /* a deregistration may be waiting for it */
  free(o->ents);
  free(o->links);
  free(o->notif);
  free(o);
}

/* Deliver notifications whose predecessors have all landed. */
static void fifo_advance(struct tpx_peer *p) {
  while (p->fifo_head && p->fifo_head->phase == PH_FINAL) {
    struct op *o = p->fifo_head;
    p->fifo_head = o->qnext;
    if (!p->fifo_head) p->fifo_tail = NULL;
    if (o->has_notif) {
      if (o->err == 0) ep_deliver_notif(p->ep, p, o->notif, o->notif_len);
      else TPX_WARN("peer %s: notification of a failed %s dropped", p->where, kname(o->kind));
    }
    op_free_internal(o);
  }
}

static void xfer_destroy(struct op *o);

void op_finish(struct op *o, int status) {
  struct tpx_peer *p = o->peer;
  TPX_TRACE("peer %s: %s %llu finished (%s)", p->where, kname(o->kind), (unsigned long long)o->id,
            status ? tpx_strerror(status) : "ok");
  if (o->id_reg) {
    id_unregister(p, o->id);
    o->id_reg = 0;
  }
  if (o->kind == K_SEND && o->phase == PH_WAIT_CTS) { /* leave the unmatched-send queue */
    struct op **pp = &p->sends_head, *prev = NULL;
    while (*pp && *pp != o) {
      prev = *pp;
      pp = &(*pp)->qnext;
    }
    if (*pp) {
      *pp = o->qnext;
      if (p->sends_tail == o) p->sends_tail = prev;
    }
    o->qnext = NULL;
  }
  active_del(p, o);
  if (status < 0 && !o->errmsg[0]) set_errmsg(o, "%s", p->errmsg[0] ? p->errmsg : tpx_strerror(status));
  if (o->user) {
    o->phase = PH_IDLE;
    atomic_store_explicit(&o->status, status, memory_order_release);
    if (o->orphan) xfer_destroy(o);
    else ep_signal(p->ep);
    return;
  }
  o->err = status;
  o->phase = PH_FINAL;
  if (o->in_fifo) fifo_advance(p);
  else op_free_internal(o);
}

/* Peer failed (all) or remote went away (only ops that wait for a control
 * message that can no longer come). */
void peer_fail_ops(struct tpx_peer *p, int err, int only_ctrl_waits) {
  for (struct op *o = p->active, *n; o; o = n) {
    n = o->next;
    if (only_ctrl_waits) {
      int waits = (o->kind == K_SEND && o->phase == PH_WAIT_CTS) ||
                  (o->kind == K_RECV && o->phase == PH_WAIT_HDR) ||
                  (o->kind == K_READ && o->phase == PH_WAIT_HDR) ||
                  (o->kind == K_WRITE && o->phase == PH_WAIT_ACK && !o->acked);
      if (!waits) continue;
    }
    op_finish(o, err);
  }
  p->cts_n = 0;
  if (!only_ctrl_waits) {
    p->sends_head = p->sends_tail = NULL;
    while (p->fifo_head) {
      struct op *o = p->fifo_head;
      p->fifo_head = o->qnext;
      op_free_internal(o);
    }
    p->fifo_tail = NULL;
  }
}

/* ---- data phase ---- */
static uint32_t take_first_ch(struct tpx_peer *p, uint64_t nchunks) {
  uint32_t f = p->next_first_ch % (uint32_t)p->nch;
  p->next_first_ch = (uint32_t)((f + (nchunks ? nchunks : 1)) % (uint64_t)p->nch);
  return f;
}

static void op_data_done(struct op *o);

int op_start_data(struct op *o, uint32_t first_ch, int is_recv) {
  struct tpx_peer *p = o->peer;
  o->nch = (uint32_t)p->nch;
  o->first_ch = first_ch % o->nch;
  o->phase = PH_DATA;
  o->chunks_left = o->nchunks;
  if (o->nchunks == 0) {
    op_data_done(o);
    return 0;
  }
  for (uint32_t c = 0; c < o->nch; c++) {
    uint64_t idx = plan_first_idx(c, o->first_ch, o->nch);
    if (idx >= o->nchunks) continue;
    struct link *l = &o->links[c];
    l->op = o;
    plan_seek(o->ents, o->nents, o->chunk, idx, &l->cur);
    cq_enqueue(p, is_recv ? &p->ch[c].rq : &p->ch[c].sq, l);
  }
  return 0;
}

static void send_status(struct tpx_peer *p, int what, uint64_t id, int status) {
  if (p->state != P_READY || p->fd < 0) return;
  struct wire_status st = {(uint8_t)what, id, status};
  (void)peer_send_frame_done(p, wire_put_status(&p->out, &st));
}

static void op_data_done(struct op *o) {
  struct tpx_peer *p = o->peer;
  switch (o->kind) {
  case K_WRITE:
    if (o->acked) op_finish(o, o->ack_status);
    else if (p->state != P_READY) op_finish(o, TPX_ECLOSED);
    else {
      o->phase = PH_WAIT_ACK;
      o->deadline = tpx_now_ns() + ms_to_ns(p->ep->cfg.timeout_ms);
    }
    break;
  case K_IN_WRITE:
    TPX_TRACE("peer %s: incoming write %llu landed; acknowledging", p->where, (unsigned long long)o->id);
    if (!o->discard) send_status(p, ST_WRITE, o->id, 0);
    op_finish(o, o->discard ? TPX_EACCES : 0);
    break;
  default: op_finish(o, 0); break;
  }
}

void op_chunk_done(struct op *o) {
  if (--o->chunks_left == 0 && o->phase == PH_DATA) op_data_done(o);
}

/* ---- validation of a peer's one-sided request against our registrations ---- */
static int check_entry(tpx_endpoint_t *ep, const struct wire_entry *e, unsigned need, struct xent *out) {
  struct tpx_mem *m = mem_lookup(ep, e->region);
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

static struct op *op_new_internal(struct tpx_peer *p, int kind, uint32_t nents) {
  struct op *o = calloc(1, sizeof(*o));
  if (!o) return NULL;
  o->kind = kind;
  o->peer = p;
  atomic_init(&o->status, TPX_EINPROGRESS);
  if (nents) {
    o->ents = calloc(nents, sizeof(*o->ents));
    if (!o->ents) goto fail;
  }
  o->nents = nents;
  o->links = calloc((size_t)p->nch, sizeof(*o->links));
  if (!o->links) goto fail;
  return o;
fail:
  free(o->ents);
  free(o);
  return NULL;
}

static int copy_notif(struct op *o, const void *msg, uint32_t len) {
  o->has_notif = 1;
  o->notif_len = len;
  if (len == 0) return 0;
  o->notif = malloc(len);
  if (!o->notif) return TPX_ENOMEM;
  memcpy(o->notif, msg, len);
  return 0;
}

static int on_write(struct tpx_peer *p, const struct wire_frame *f) {
  tpx_endpoint_t *ep = p->ep;
  struct wire_rw m;
  int rc = wire_get_rw(f, &m);
  if (rc) {
    peer_fail(p, rc, "peer %s: bad write request: %s", p->where, tpx_last_error());
    return rc;
  }
  struct op *o = op_new_internal(p, K_IN_WRITE, m.n);
  if (!o || (m.has_notif && copy_notif(o, m.notif, m.notif_len))) {
    if (o) op_free_internal(o);
    peer_fail(p, TPX_ENOMEM, "peer %s: out of memory for write %llu", p->where, (unsigned long long)m.id);
    return TPX_ENOMEM;
  }
  o->id = m.id;
  o->chunk = m.chunk;
  uint64_t total = 0;
  int bad = 0;
  struct wire_entry e;
  for (uint32_t i = 0; i < m.n; i++) {
    wire_entry_at(m.entries, i, &e);
    if (e.len > MAX_OP_BYTES || total + e.len > MAX_OP_BYTES) {
      op_free_internal(o);
      peer_fail(p, TPX_EPROTO, "peer %s: write %llu of more than 2^48 bytes", p->where, (unsigned long long)m.id);
      return TPX_EPROTO;
    }
    total += e.len;
    if (!bad && check_entry(ep, &e, TPX_ACCESS_WRITE, &o->ents[i]) != 0) {
      bad = 1;
      TPX_ERROR("endpoint %s: peer %s: write %llu entry %u [0x%llx, +%llu) in region %llu is outside our "
                "writable registrations: refused, nothing written",
                ep->name, p->where, (unsigned long long)m.id, i, (unsigned long long)e.addr,
                (unsigned long long)e.len, (unsigned long long)e.region);
    }
  }
  if (bad) { /* drain the data that is already on its way, into scratch */
    o->discard = 1;
    for (uint32_t i = 0; i < m.n; i++) {
      wire_entry_at(m.entries, i, &e);
      o->ents[i].mem = NULL;
      o->ents[i].off = 0;
      o->ents[i].len = e.len;
    }
  } else {
    for (uint32_t i = 0; i < m.n; i++) o->ents[i].mem->irefs++;
    o->refs_taken = 1;
    if (m.inl) scatter(o->ents, o->nents, m.data); /* checked: lands inside our registrations */
  }
  o->total = total;
  o->nchunks = m.inl ? 0 : plan_nchunks(o->ents, o->nents, o->chunk);
  if (o->nchunks >= MAX_OP_CHUNKS) {
    op_free_internal(o);
    peer_fail(p, TPX_EPROTO, "peer %s: write %llu has too many chunks", p->where, (unsigned long long)m.id);
    return TPX_EPROTO;
  }
  o->has_notif = m.has_notif;
  active_add(p, o);
  fifo_push(p, o);
  if (bad) send_status(p, ST_WRITE, o->id, TPX_EACCES);
  if (p->state == P_DEAD) return TPX_ECLOSED;
  return op_start_data(o, m.first_ch, 1);
}

static int on_read(struct tpx_peer *p, const struct wire_frame *f) {
  tpx_endpoint_t *ep = p->ep;
  struct wire_rw m;
  int rc = wire_get_rw(f, &m);
  if (rc) {
    peer_fail(p, rc, "peer %s: bad read request: %s", p->where, tpx_last_error());
    return rc;
  }
  struct op *o = op_new_internal(p, K_SERVE_READ, m.n);
  if (!o || (m.has_notif && copy_notif(o, m.notif, m.notif_len))) {
    if (o) op_free_internal(o);
    peer_fail(p, TPX_ENOMEM, "peer %s: out of memory for read %llu", p->where, (unsigned long long)m.id);
    return TPX_ENOMEM;
  }
  o->id = m.id;
  o->chunk = m.chunk;
  struct wire_entry e;
  for (uint32_t i = 0; i < m.n; i++) {
    wire_entry_at(m.entries, i, &e);
    if (check_entry(ep, &e, TPX_ACCESS_READ, &o->ents[i]) != 0) {
      TPX_ERROR("endpoint %s: peer %s: read %llu entry %u [0x%llx, +%llu) in region %llu is outside our "
                "readable registrations: refused",
                ep->name, p->where, (unsigned long long)m.id, i, (unsigned long long)e.addr,
                (unsigned long long)e.len, (unsigned long long)e.region);
      op_free_internal(o);
      send_status(p, ST_READ, m.id, TPX_EACCES);
      return 0;
    }
  }
  for (uint32_t i = 0; i < m.n; i++) o->ents[i].mem->irefs++;
  o->refs_taken = 1;
  o->nchunks = plan_nchunks(o->ents, o->nents, o->chunk);
  if (o->nchunks >= MAX_OP_CHUNKS) {
    op_free_internal(o);
    peer_fail(p, TPX_EPROTO, "peer %s: read %llu has too many chunks", p->where, (unsigned long long)m.id);
    return TPX_EPROTO;
  }
  o->has_notif = m.has_notif;
  uint64_t total = 0;
  for (uint32_t i = 0; i < o->nents; i++) total += o->ents[i].len;
  struct iovec iov[INLINE_MAX_IOV];
  int niov = m.inl ? can_inline(ep, o->ents, o->nents, total, iov) : -1;
  uint32_t first = 0;
  if (niov >= 0) o->nchunks = 0; /* all of it goes in the answer */
  else first = take_first_ch(p, o->nchunks);
  struct wire_read_data rd = {m.id, (uint16_t)first, niov >= 0, total, NULL};
  rc = peer_send_frame_done(p, wire_put_read_data(&p->out, &rd, iov, niov >= 0 ? niov : 0));
  if (rc) {
    op_free_internal(o);
    return rc;
  }
  active_add(p, o);
  if (o->has_notif) fifo_push(p, o);
  return op_start_data(o, first, 0);
}

static void start_send(struct tpx_peer *p, struct op *o, const struct cts_entry *c) {
  o->match_id = c->recv_id;
  if (o->total > c->cap) {
    set_errmsg(o, "peer %s: send of %llu bytes (tag %llu) is larger than the matching recv (%llu bytes)",
             p->where, (unsigned long long)o->total, (unsigned long long)o->tag, (unsigned long long)c->cap);
    TPX_WARN("%s", o->errmsg);
    send_status(p, ST_SEND, c->recv_id, TPX_ETRUNC);
    o->phase = PH_IDLE;
    op_finish(o, TPX_ETRUNC);
    return;
  }
  struct iovec iov[INLINE_MAX_IOV];
  int niov = c->inl_ok ? can_inline(p->ep, o->ents, o->nents, o->total, iov) : -1;
  if (niov >= 0) { /* copied into the control message: the buffer is free again */
    struct wire_send s = {c->recv_id, o->total, 0, o->chunk, 1, NULL};
    if (peer_send_frame_done(p, wire_put_send(&p->out, &s, iov, niov)) != 0) return;
    op_finish(o, 0);
    return;
  }
  uint32_t first = take_first_ch(p, o->nchunks);
  struct wire_send s = {c->recv_id, o->total, (uint16_t)first, o->chunk, 0, NULL};
  if (peer_send_frame_done(p, wire_put_send(&p->out, &s, NULL, 0)) != 0) return;
  op_start_data(o, first, 0);
}

static int on_cts(struct tpx_peer *p, const struct wire_frame *f) {
  struct wire_cts m;
  int rc = wire_get_cts(f, &m);
  if (rc) {
    peer_fail(p, rc, "peer %s: bad recv announcement", p->where);
    return rc;
  }
  struct cts_entry c = {m.recv_id, m.tag, m.cap, m.inl_ok};
  for (struct op *o = p->sends_head; o; o = o->qnext) {
    if (o->tag != m.tag) continue;
    /* take it out of the unmatched list, then start it */
    struct op **pp = &p->sends_head, *prev = NULL;
    while (*pp != o) {
      prev = *pp;
      pp = &(*pp)->qnext;
    }
    *pp = o->qnext;
    if (p->sends_tail == o) p->sends_tail = prev;
    o->qnext = NULL;
    o->phase = PH_DATA;
    start_send(p, o, &c);
    return 0;
  }
  if (p->cts_n == p->cts_cap) {
    uint32_t ncap = p->cts_cap ? p->cts_cap * 2 : 32;
    struct cts_entry *n = malloc(ncap * sizeof(*n));
    if (!n) {
      peer_fail(p, TPX_ENOMEM, "peer %s: out of memory", p->where);
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
static int take_cts(struct tpx_peer *p, uint64_t tag, struct cts_entry *out) {
  for (uint32_t i = 0; i < p->cts_n; i++) {
    struct cts_entry *c = &p->cts[(p->cts_head + i) % p->cts_cap];
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

static int proto_err(struct tpx_peer *p, const char *what, uint64_t id) {
  peer_fail(p, TPX_EPROTO, "peer %s: %s for unknown or finished transfer id %llu", p->where, what,
            (unsigned long long)id);
  return TPX_EPROTO;
}

int peer_on_msg(struct tpx_peer *p, const struct wire_frame *f) {
  tpx_endpoint_t *ep = p->ep;
  int rc;
  switch (f->type) {
  case MSG_CTS: return on_cts(p, f);
  case MSG_WRITE: return on_write(p, f);
  case MSG_READ: return on_read(p, f);
  case MSG_SEND: {
    struct wire_send m;
    if ((rc = wire_get_send(f, &m))) {
      peer_fail(p, rc, "peer %s: bad send header", p->where);
      return rc;
    }
    struct op *o = id_lookup(p, m.recv_id);
    if (!o || o->kind != K_RECV || o->phase != PH_WAIT_HDR) return proto_err(p, "send", m.recv_id);
    if (m.len > o->cap) {
      peer_fail(p, TPX_EPROTO, "peer %s: send of %llu bytes into a recv of %llu", p->where,
                (unsigned long long)m.len, (unsigned long long)o->cap);
      return TPX_EPROTO;
    }
    o->received = m.len;
    o->ents[0].len = m.len;
    o->chunk = m.chunk;
    o->total = m.len;
    if (m.inl) {
      scatter(o->ents, 1, m.data);
      op_finish(o, 0);
      return 0;
    }
    o->nchunks = plan_nchunks(o->ents, 1, o->chunk);
    return op_start_data(o, m.first_ch, 1);
  }
  case MSG_READ_DATA: {
    struct wire_read_data m;
    if ((rc = wire_get_read_data(f, &m))) {
      peer_fail(p, rc, "peer %s: bad read data header", p->where);
      return rc;
    }
    struct op *o = id_lookup(p, m.id);
    if (!o || o->kind != K_READ || o->phase != PH_WAIT_HDR) return proto_err(p, "read data", m.id);
    if (m.inl) {
      if (m.inl_len != o->total) {
        peer_fail(p, TPX_EPROTO, "peer %s: read %llu answered with %llu bytes, expected %llu", p->where,
                  (unsigned long long)m.id, (unsigned long long)m.inl_len, (unsigned long long)o->total);
        return TPX_EPROTO;
      }
      scatter(o->ents, o->nents, m.data);
      op_finish(o, 0);
      return 0;
    }
    return op_start_data(o, m.first_ch, 1);
  }
  case MSG_STATUS: {
    struct wire_status m;
    if ((rc = wire_get_status(f, &m))) {
      peer_fail(p, rc, "peer %s: bad status message", p->where);
      return rc;
    }
    struct op *o = id_lookup(p, m.id);
    if (m.what == ST_WRITE) {
      if (!o || o->kind != K_WRITE || (o->phase != PH_DATA && o->phase != PH_WAIT_ACK) || o->acked)
        return proto_err(p, "write acknowledgement", m.id);
      TPX_TRACE("peer %s: write %llu acknowledged (status %d)", p->where, (unsigned long long)m.id, m.status);
      o->acked = 1;
      o->ack_status = m.status;
      if (m.status)
        set_errmsg(o, "peer %s refused write %llu: %s (outside its registrations "
                 "or their access rights)", p->where, (unsigned long long)m.id, tpx_strerror(m.status));
      if (o->phase == PH_WAIT_ACK) op_finish(o, m.status);
      return 0;
    }
    if (m.what == ST_READ) {
      if (!o || o->kind != K_READ || o->phase != PH_WAIT_HDR || m.status == 0)
        return proto_err(p, "read refusal", m.id);
      set_errmsg(o, "peer %s refused read %llu: %s (outside its registrations "
               "or their access rights)", p->where, (unsigned long long)m.id, tpx_strerror(m.status));
      op_finish(o, m.status);
      return 0;
    }
    if (!o || o->kind != K_RECV || o->phase != PH_WAIT_HDR || m.status == 0)
      return proto_err(p, "send refusal", m.id);
    set_errmsg(o, "peer %s: matching send did not fit this recv of %llu bytes: %s",
             p->where, (unsigned long long)o->cap, tpx_strerror(m.status));
    op_finish(o, m.status);
    return 0;
  }
  case MSG_NOTIF: {
    struct wire_notif m;
    if ((rc = wire_get_notif(f, &m))) {
      peer_fail(p, rc, "peer %s: bad notification", p->where);
      return rc;
    }
    if (!p->fifo_head) {
      ep_deliver_notif(ep, p, m.msg, m.len);
      return 0;
    }
    struct op *o = op_new_internal(p, K_NOTIF, 0);
    if (!o || copy_notif(o, m.msg, m.len)) {
      if (o) op_free_internal(o);
      peer_fail(p, TPX_ENOMEM, "peer %s: out of memory", p->where);
      return TPX_ENOMEM;
    }
    o->phase = PH_FINAL;
    fifo_push(p, o);
    return 0;
  }
  default:
    peer_fail(p, TPX_EPROTO, "peer %s: unexpected message type %u", p->where, f->type);
    return TPX_EPROTO;
  }
}

/* ---- public API ---- */
static struct op *xfer_new(struct tpx_peer *p, int kind, uint32_t nents) {
  struct tpx_xfer *x = calloc(1, sizeof(*x));
  if (!x) return NULL;
  struct op *o = &x->op;
  o->kind = kind;
  o->peer = p;
  o->user = 1;
  atomic_init(&o->status, TPX_EUSAGE);
  o->ents = calloc(nents ? nents : 1, sizeof(*o->ents));
  o->links = calloc((size_t)p->nch, sizeof(*o->links));
  if (!o->ents || !o->links) {
    free(o->ents);
    free(o->links);
    free(x);
    return NULL;
  }
  o->nents = nents;
  o->chunk = (uint32_t)p->ep->cfg.chunk_bytes;
  return o;
}

/* Lock held. */
static void xfer_link(struct op *o) {
  tpx_endpoint_t *ep = o->peer->ep;
  o->peer->refs++;
  for (uint32_t i = 0; i < o->nents; i++) o->ents[i].mem->refs++;
  o->refs_taken = 1;
  o->xprev = NULL;
  o->xnext = ep->xfers;
  if (ep->xfers) ep->xfers->xprev = o;
  ep->xfers = o;
}

/* Lock held. The op is not in flight. */
static void xfer_destroy(struct op *o) {
  tpx_endpoint_t *ep = o->peer->ep;
  if (o->xprev) o->xprev->xnext = o->xnext;
  else ep->xfers = o->xnext;
  if (o->xnext) o->xnext->xprev = o->xprev;
  op_release_refs(o);
  struct tpx_peer *p = o->peer;
  free(o->ents);
  free(o->rents);
  free(o->links);
  free(o->notif);
  free((struct tpx_xfer *)o);
  peer_release(p);
}

void xfer_release_all(tpx_endpoint_t *ep) {
  while (ep->xfers) xfer_destroy(ep->xfers);
}

static int check_peer_ready(struct tpx_peer *p, const char *what) {
  if (p->state == P_READY) return 0;
  if (p->state == P_DEAD || p->state == P_CLOSING)
    return tpx_err(p->err ? p->err : TPX_ECLOSED, "%s: peer %s is closed: %s", what, p->where, p->errmsg);
  return tpx_err(TPX_EUSAGE, "%s: peer %s is not connected yet", what, p->where);
}

static int local_range(const tpx_mem_t *m, size_t off, size_t len, tpx_endpoint_t *ep, const char *what) {
  if (!m) return tpx_err(TPX_EINVAL, "%s: NULL local registration", what);
  if (m->ep != ep) return tpx_err(TPX_EINVAL, "%s: registration belongs to another endpoint", what);
  if (off > m->len || len > m->len - off)
    return tpx_err(TPX_EINVAL, "%s: local range [%zu, +%zu) outside the %zu-byte registration", what, off, len, m->len);
  return 0;
}

static int prep_rw(tpx_peer_t *p, int kind, const tpx_iov_t *iov, size_t n, const void *notif,
                   size_t notif_len, tpx_xfer_t **out) {
  const char *what = kind == K_WRITE ? "tpx_xfer_prep_write" : "tpx_xfer_prep_read";
  if (!p || !out || (n && !iov)) return tpx_err(TPX_EINVAL, "%s: NULL argument", what);
  *out = NULL;
  if (n > TPX_XFER_MAX_IOV) return tpx_err(TPX_EINVAL, "%s: %zu entries exceeds %d", what, n, TPX_XFER_MAX_IOV);
  if (notif_len > TPX_NOTIF_MAX || (notif_len && !notif))
    return tpx_err(TPX_EINVAL, "%s: notification of %zu bytes (max %d)", what, notif_len, TPX_NOTIF_MAX);
  tpx_endpoint_t *ep = p->ep;
  unsigned need = kind == K_WRITE ? TPX_ACCESS_WRITE : TPX_ACCESS_READ;
  pthread_mutex_lock(&ep->lock);
  int rc = check_peer_ready(p, what);
  for (size_t i = 0; rc == 0 && i < n; i++) {
    const tpx_iov_t *v = &iov[i];
    rc = local_range(v->local, v->local_off, v->len, ep, what);
    if (rc) break;
    if (!v->remote) {
      rc = tpx_err(TPX_EINVAL, "%s: entry %zu has no remote descriptor", what, i);
      break;
    }
    const struct md_info *md = &v->remote->md;
    if (md->owner != p->uuid) {
      rc = tpx_err(TPX_EINVAL, "%s: entry %zu: remote descriptor belongs to another endpoint than peer %s",
                   what, i, p->where);
      break;
    }
    if (v->remote_off > md->len || v->len > md->len - v->remote_off || !(md->access & need)) {
      rc = tpx_err(TPX_EACCES, "%s: entry %zu: remote range [%llu, +%zu) outside the %llu-byte %s region",
                   what, i, (unsigned long long)v->remote_off, v->len, (unsigned long long)md->len,
                   md->access & need ? "remote" : (kind == K_WRITE ? "non-writable" : "non-readable"));
      break;
    }
  }
  struct op *o = NULL;
  if (rc == 0) {
    o = xfer_new(p, kind, (uint32_t)n);
    if (o) o->rents = calloc(n ? n : 1, sizeof(*o->rents));
    if (!o || !o->rents || (notif && copy_notif(o, notif, (uint32_t)notif_len))) {
      if (o) {
        free(o->ents);
        free(o->rents);
        free(o->links);
        free(o->notif);
        free((struct tpx_xfer *)o);
      }
      rc = tpx_err(TPX_ENOMEM, "%s: out of memory", what);
    }
  }
  if (rc == 0) {
    for (size_t i = 0; i < n; i++) {
      o->ents[i].mem = iov[i].local;
      o->ents[i].off = iov[i].local_off;
      o->ents[i].len = iov[i].len;
      o->rents[i].region = iov[i].remote->md.region;
      o->rents[i].addr = iov[i].remote->md.addr + iov[i].remote_off;
      o->rents[i].len = iov[i].len;
      o->total += iov[i].len;
    }
    o->nchunks = plan_nchunks(o->ents, o->nents, o->chunk);
    xfer_link(o);
    *out = (tpx_xfer_t *)o;
  }
  pthread_mutex_unlock(&ep->lock);
  return rc;
}

int tpx_xfer_prep_write(tpx_peer_t *p, const tpx_iov_t *iov, size_t n, const void *notif,
                        size_t notif_len, tpx_xfer_t **out) {
  return prep_rw(p, K_WRITE, iov, n, notif, notif_len, out);
}
int tpx_xfer_prep_read(tpx_peer_t *p, const tpx_iov_t *iov, size_t n, const void *notif,
                       size_t notif_len, tpx_xfer_t **out) {
  return prep_rw(p, K_READ, iov, n, notif, notif_len, out);
}

static int prep_two(tpx_peer_t *p, int kind, tpx_mem_t *mem, size_t off, size_t len, uint64_t tag,
                    tpx_xfer_t **out) {
  const char *what = kind == K_SEND ? "tpx_xfer_prep_send" : "tpx_xfer_prep_recv";
  if (!p || !out) return tpx_err(TPX_EINVAL, "%s: NULL argument", what);
  *out = NULL;
  tpx_endpoint_t *ep = p->ep;
  pthread_mutex_lock(&ep->lock);
  int rc = check_peer_ready(p, what);
  if (rc == 0) rc = local_range(mem, off, len, ep, what);
  struct op *o = NULL;
  if (rc == 0 && !(o = xfer_new(p, kind, 1))) rc = tpx_err(TPX_ENOMEM, "%s: out of memory", what);
  if (rc == 0) {
    o->ents[0].mem = mem;
    o->ents[0].off = off;
    o->ents[0].len = len;
    o->tag = tag;
    o->cap = len;
    o->total = len;
    o->nchunks = plan_nchunks(o->ents, 1, o->chunk);
    xfer_link(o);
    *out = (tpx_xfer_t *)o;
  }
  pthread_mutex_unlock(&ep->lock);
  return rc;
}

int tpx_xfer_prep_send(tpx_peer_t *p, tpx_mem_t *mem, size_t off, size_t len, uint64_t tag, tpx_xfer_t **out) {
  return prep_two(p, K_SEND, mem, off, len, tag, out);
}
int tpx_xfer_prep_recv(tpx_peer_t *p, tpx_mem_t *mem, size_t off, size_t cap, uint64_t tag, tpx_xfer_t **out) {
  return prep_two(p, K_RECV, mem, off, cap, tag, out);
}

int tpx_xfer_set_notif(tpx_xfer_t *x, const void *notif, size_t len) {
  if (!x) return tpx_err(TPX_EINVAL, "tpx_xfer_set_notif: NULL");
  struct op *o = &x->op;
  if (o->kind != K_WRITE && o->kind != K_READ)
    return tpx_err(TPX_EUSAGE, "tpx_xfer_set_notif: only writes and reads carry notifications");
  if (len > TPX_NOTIF_MAX || (len && !notif))
    return tpx_err(TPX_EINVAL, "tpx_xfer_set_notif: %zu bytes (max %d)", len, TPX_NOTIF_MAX);
  tpx_endpoint_t *ep = o->peer->ep;
  pthread_mutex_lock(&ep->lock);
  int rc = 0;
  if (o->phase != PH_IDLE) rc = tpx_err(TPX_EUSAGE, "tpx_xfer_set_notif: transfer in flight");
  else {
    uint8_t *n = len ? malloc(len) : NULL;
    if (len && !n) rc = tpx_err(TPX_ENOMEM, "tpx_xfer_set_notif: out of memory");
    else {
      if (len) memcpy(n, notif, len);
      free(o->notif);
      o->notif = n;
      o->notif_len = (uint32_t)len;
      o->has_notif = notif != NULL;
    }
  }
  pthread_mutex_unlock(&ep->lock);
  return rc;
}

static const void *notif_arg(const struct op *o) {
  if (!o->has_notif) return NULL;
  return o->notif ? (const void *)o->notif : (const void *)"";
}

int tpx_xfer_post(tpx_xfer_t *x) {
  if (!x) return tpx_err(TPX_EINVAL, "tpx_xfer_post: NULL");
  struct op *o = &x->op;
  struct tpx_peer *p = o->peer;
  tpx_endpoint_t *ep = p->ep;
  pthread_mutex_lock(&ep->lock);
  int rc = 0, kick = 0;
  if (o->phase != PH_IDLE) {
    rc = tpx_err(TPX_EUSAGE, "tpx_xfer_post: %s is still in flight", kname(o->kind));
    goto out;
  }
  rc = check_peer_ready(p, "tpx_xfer_post");
  if (rc) goto out;
  o->err = 0;
  o->errmsg[0] = '\0';
  o->acked = 0;
  o->ack_status = 0;
  o->inflight = 0;
  o->deadline = 0;
  o->posted = 1;
  if (o->kind == K_RECV) {
    o->ents[0].len = o->cap;
    o->received = 0;
  }
  if (o->kind != K_SEND) {
    o->id = id_register(p, o);
    if (!o->id_reg) {
      rc = tpx_err(TPX_ENOMEM, "tpx_xfer_post: out of memory for transfer ids");
      goto out;
    }
  }
  atomic_store_explicit(&o->status, TPX_EINPROGRESS, memory_order_relaxed);
  TPX_TRACE("peer %s: %s %llu posted (%llu bytes, %llu chunks)", p->where, kname(o->kind), (unsigned long long)o->id,
            (unsigned long long)o->total, (unsigned long long)o->nchunks);
  active_add(p, o);
  switch (o->kind) {
  case K_WRITE: {
    struct iovec iov[INLINE_MAX_IOV];
    int niov = can_inline(ep, o->ents, o->nents, o->total, iov);
    uint32_t first = niov >= 0 ? 0 : take_first_ch(p, o->nchunks);
    rc = wire_put_rw(&p->out, MSG_WRITE, o->id, (uint16_t)first, o->chunk, o->rents, o->nents,
                     notif_arg(o), o->notif_len, niov >= 0 ? iov : NULL, niov);
    if (peer_send_frame_done(p, rc) != 0) break;
    if (niov >= 0) { /* the data went with the request: wait for the ack */
      uint64_t n = o->nchunks;
      o->nchunks = 0;
      op_start_data(o, 0, 0);
      o->nchunks = n;
    } else {
      op_start_data(o, first, 0);
    }
    break;
  }
  case K_READ:
    o->phase = PH_WAIT_HDR;
    o->deadline = tpx_now_ns() + ms_to_ns(ep->cfg.timeout_ms);
    struct iovec riov[INLINE_MAX_IOV];
    int welcome = ents_iov(o->ents, o->nents, riov) >= 0; /* our side can take it inline */
    rc = wire_put_rw(&p->out, MSG_READ, o->id, 0, o->chunk, o->rents, o->nents, notif_arg(o),
                     o->notif_len, NULL, welcome);
    (void)peer_send_frame_done(p, rc);
    break;
  case K_RECV: {
    o->phase = PH_WAIT_HDR;
    struct iovec riov[1];
    struct wire_cts c = {o->id, o->tag, o->cap, ents_iov(o->ents, 1, riov) >= 0};
    (void)peer_send_frame_done(p, wire_put_cts(&p->out, &c));
    break;
  }
  case K_SEND: {
    struct cts_entry c;
    if (take_cts(p, o->tag, &c)) {
      o->phase = PH_DATA;
      start_send(p, o, &c);
    } else {
      o->phase = PH_WAIT_CTS;
      o->qnext = NULL;
      if (p->sends_tail) p->sends_tail->qnext = o;
      else p->sends_head = o;
      p->sends_tail = o;
    }
    break;
  }
  }
  if (p->state == P_READY) (void)peer_data_progress(p); /* post and drain now, never block */
  rc = 0;
  /* Control answers wake the progress thread through epoll; only requests
   * inside the transport need it woken now. */
  kick = ep->inflight > 0 || ep->queued > 0;
out:
  pthread_mutex_unlock(&ep->lock);
  if (rc == 0 && kick) ep_wake(ep);
  return rc;
}

static int xfer_status(struct op *o) {
  int s = atomic_load_explicit(&o->status, memory_order_acquire);
  if (s < 0 && s != TPX_EINPROGRESS) {
    if (s == TPX_EUSAGE && !o->posted) return tpx_err_quiet(s, "transfer was never posted");
    return tpx_err_quiet(s, "%s", o->errmsg[0] ? o->errmsg : tpx_strerror(s));
  }
  return s;
}

int tpx_xfer_test(tpx_xfer_t *x) {
  if (!x) return tpx_err(TPX_EINVAL, "tpx_xfer_test: NULL");
  struct op *o = &x->op;
  tpx_endpoint_t *ep = o->peer->ep;
  if (!ep->thread_on && atomic_load_explicit(&o->status, memory_order_acquire) == TPX_EINPROGRESS) {
    pthread_mutex_lock(&ep->lock);
    (void)ep_pass(ep);
    pthread_mutex_unlock(&ep->lock);
  }
  return xfer_status(o);
}

int tpx_xfer_wait(tpx_xfer_t *x, int timeout_ms) {
  if (!x) return tpx_err(TPX_EINVAL, "tpx_xfer_wait: NULL");
  struct op *o = &x->op;
  tpx_endpoint_t *ep = o->peer->ep;
  uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : tpx_now_ns() + ms_to_ns(timeout_ms);
  if (ep->thread_on) {
    /* Spin up to WAIT_SPIN_NS driving progress (ep_drive): a small
     * transfer's round trip is shorter than a sleep/wake-up; then sleep on
     * the cv. */
    uint64_t spin_until = tpx_now_ns() + WAIT_SPIN_NS;
    atomic_fetch_add(&ep->drivers, 1);
    for (;;) {
      if (atomic_load_explicit(&o->status, memory_order_acquire) != TPX_EINPROGRESS) {
        ep_drive_end(ep);
        return xfer_status(o);
      }
      if (tpx_now_ns() > spin_until) break;
      /* Yield after every pass that did nothing: the thread that will
       * answer (the peer's, in one process) may share this CPU. 4 KiB write
       * ping-pong pinned to one core: 6.4 us one-way when the first 16
       * passes did not yield, 4.5 with this (2 cores: 3.3-3.5 either way). */
      if (!ep_drive(ep)) sched_yield();
    }
    ep_drive_end(ep);
    pthread_mutex_lock(&ep->lock);
    ep->waiters++;
    while (atomic_load_explicit(&o->status, memory_order_acquire) == TPX_EINPROGRESS) {
      uint64_t now = tpx_now_ns();
      if (now >= deadline) break;
      uint64_t step = deadline - now < 100000000ull ? deadline - now : 100000000ull;
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      uint64_t t = (uint64_t)ts.tv_nsec + step;
      ts.tv_sec += (time_t)(t / 1000000000ull);
      ts.tv_nsec = (long)(t % 1000000000ull);
      pthread_cond_timedwait(&ep->cv, &ep->lock, &ts);
    }
    ep->waiters--;
    pthread_mutex_unlock(&ep->lock);
  } else {
    unsigned spins = 0;
    while (atomic_load_explicit(&o->status, memory_order_acquire) == TPX_EINPROGRESS) {
      if (tpx_now_ns() >= deadline) break;
      pthread_mutex_lock(&ep->lock);
      int did = ep_pass(ep);
      int busy = ep->inflight > 0;
      pthread_mutex_unlock(&ep->lock);
      if (did) spins = 0;
      else ep_idle(ep, &spins, busy);
    }
  }
  int s = atomic_load_explicit(&o->status, memory_order_acquire);
  if (s == TPX_EINPROGRESS)
    return tpx_err_quiet(TPX_ETIMEDOUT, "tpx_xfer_wait: %s still in flight after %d ms", kname(o->kind), timeout_ms);
  return xfer_status(o);
}

size_t tpx_xfer_received(const tpx_xfer_t *x) { return x ? (size_t)x->op.received : 0; }
tpx_op_t tpx_xfer_op(const tpx_xfer_t *x) { return x ? (tpx_op_t)x->op.kind : 0; }

void tpx_xfer_free(tpx_xfer_t *x) {
  if (!x) return;
  struct op *o = &x->op;
  tpx_endpoint_t *ep = o->peer->ep;
  pthread_mutex_lock(&ep->lock);
  if (o->phase != PH_IDLE) o->orphan = 1; /* finishes (or is cancelled) in the background */
  else xfer_destroy(o);
  pthread_mutex_unlock(&ep->lock);
}

/* ---- one-shot helpers ---- */
int tpx_write(tpx_peer_t *p, tpx_mem_t *local, size_t local_off, const tpx_rmem_t *remote,
              uint64_t remote_off, size_t len, const void *notif, size_t notif_len, tpx_xfer_t **out) {
  tpx_iov_t v = {local, local_off, remote, remote_off, len};
  int rc = tpx_xfer_prep_write(p, &v, 1, notif, notif_len, out);
  if (rc == 0 && (rc = tpx_xfer_post(*out)) != 0) {
    tpx_xfer_free(*out);
    *out = NULL;
  }
  return rc;
}
int tpx_read(tpx_peer_t *p, tpx_mem_t *local, size_t local_off, const tpx_rmem_t *remote,
             uint64_t remote_off, size_t len, tpx_xfer_t **out) {
  tpx_iov_t v = {local, local_off, remote, remote_off, len};
  int rc = tpx_xfer_prep_read(p, &v, 1, NULL, 0, out);
  if (rc == 0 && (rc = tpx_xfer_post(*out)) != 0) {
    tpx_xfer_free(*out);
    *out = NULL;
  }
  return rc;
}
int tpx_send(tpx_peer_t *p, tpx_mem_t *mem, size_t off, size_t len, uint64_t tag, tpx_xfer_t **out) {
  int rc = tpx_xfer_prep_send(p, mem, off, len, tag, out);
  if (rc == 0 && (rc = tpx_xfer_post(*out)) != 0) {
    tpx_xfer_free(*out);
    *out = NULL;
  }
  return rc;
}
int tpx_recv(tpx_peer_t *p, tpx_mem_t *mem, size_t off, size_t cap, uint64_t tag, tpx_xfer_t **out) {
  int rc = tpx_xfer_prep_recv(p, mem, off, cap, tag, out);
  if (rc == 0 && (rc = tpx_xfer_post(*out)) != 0) {
    tpx_xfer_free(*out);
    *out = NULL;
  }
  return rc;
}
