/* The initiator's side: messages about our own transfers (a read's data, a
 * status for one of our ids, a standalone notification). The peer's
 * one-sided requests are target.c's, two-sided matching is match.c's;
 * dispatch.c routes frames to all three. A handler that finds the peer lying
 * or broken fails it (fail.c) with the reason, which is logged there, once. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "engine/admit.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/inline_data.h"
#include "engine/integrity.h"
#include "engine/initiator.h"
#include "engine/notif.h"
#include "engine/op.h"
#include "engine/peer.h"

/* The target accepted our read: data follows on the channels, or here. */
int tpx__initiator_on_read_data(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  int rc;
  struct tpx__wire_read_data m;
  if ((rc = tpx__wire_get_read_data(f, &m))) {
    tpx__peer_fail(p, rc, "peer %s: bad read data header", p->where);
    return rc;
  }
  struct tpx__op *o = tpx__id_lookup(p, m.id);
  if (!o || o->kind != K_READ || o->phase != PH_WAIT_HDR) return tpx__peer_fail_proto(p, "read data", m.id);
  if (m.inl) {
    if (m.inl_len != o->total) {
      tpx__peer_fail(p, TPX_EPROTO, "peer %s: read %llu answered with %llu bytes, expected %llu", p->where,
                (unsigned long long)m.id, (unsigned long long)m.inl_len, (unsigned long long)o->total);
      return TPX_EPROTO;
    }
    int v = m.inl == 2 ? tpx__sum_inline(o, m.data, m.inl_len, m.sum) : 0;
    tpx__op_finish(o, v ? v : tpx__inline_scatter(o->ents, o->nents, m.data));
    return 0;
  }
  if ((rc = tpx__op_start_data(o, m.first_ch, 1)) != 0) tpx__peer_fail_last(p, rc);
  return rc;
}

/* Completion or refusal of one of our ids: a write's acknowledgement, a
 * refused read, a send too large for its recv. */
int tpx__initiator_on_status(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  int rc;
  struct tpx__wire_status m;
  if ((rc = tpx__wire_get_status(f, &m))) {
    tpx__peer_fail(p, rc, "peer %s: bad status message", p->where);
    return rc;
  }
  struct tpx__op *o = tpx__id_lookup(p, m.id);
  if (m.what == ST_WRITE) {
    if (!o || o->kind != K_WRITE || (o->phase != PH_DATA && o->phase != PH_WAIT_ACK) || o->acked)
      return tpx__peer_fail_proto(p, "write acknowledgement", m.id);
    TPX_TRACE("peer %s: write %llu acknowledged (status %d)", p->where, (unsigned long long)m.id, m.status);
    o->acked = 1;
    o->ack_status = m.status;
    if (m.status == TPX_EINTEGRITY)
      tpx__op_set_errmsg(o, "peer %s: write %llu arrived with other bytes than were sent (a chunk failed its "
               "CRC-32C there; its log names chunk and channel)", p->where, (unsigned long long)m.id);
    else if (m.status)
      tpx__op_set_errmsg(o, "peer %s refused write %llu: %s (outside its registrations "
               "or their access rights)", p->where, (unsigned long long)m.id, tpx_strerror(m.status));
    if (o->phase == PH_WAIT_ACK) tpx__op_finish(o, m.status);
    return 0;
  }
  if (m.what == ST_READ) {
    if (!o || o->kind != K_READ || o->phase != PH_WAIT_HDR || m.status == 0)
      return tpx__peer_fail_proto(p, "read refusal", m.id);
    tpx__op_set_errmsg(o, "peer %s refused read %llu: %s (outside its registrations "
             "or their access rights)", p->where, (unsigned long long)m.id, tpx_strerror(m.status));
    tpx__op_finish(o, m.status);
    return 0;
  }
  if (!o || o->kind != K_RECV || o->phase != PH_WAIT_HDR || m.status == 0)
    return tpx__peer_fail_proto(p, "send refusal", m.id);
  tpx__op_set_errmsg(o, "peer %s: matching send did not fit this recv of %llu bytes: %s",
           p->where, (unsigned long long)o->cap, tpx_strerror(m.status));
  tpx__op_finish(o, m.status);
  return 0;
}

/* A standalone notification waits behind incoming writes still landing. */
int tpx__initiator_on_notif(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  int rc;
  struct tpx__wire_notif m;
  if ((rc = tpx__wire_get_notif(f, &m))) {
    tpx__peer_fail(p, rc, "peer %s: bad notification", p->where);
    return rc;
  }
  if ((rc = tpx__admit_notif(p, m.len)) != 0 || (p->fifo_head && (rc = tpx__peer_admit(p, "notification")) != 0)) {
    tpx__peer_fail_last(p, rc);
    return rc;
  }
  if (!p->fifo_head) {
    tpx__notif_arrive(p, m.msg, m.len);
    return 0;
  }
  struct tpx__op *o = tpx__op_new_internal(p, K_NOTIF, 0);
  if (!o || tpx__op_copy_notif(o, m.msg, m.len)) {
    if (o) tpx__op_free_internal(o);
    tpx__peer_fail(p, TPX_ENOMEM, "peer %s: out of memory", p->where);
    return TPX_ENOMEM;
  }
  o->phase = PH_FINAL;
  tpx__notif_fifo_push(p, o);
  return 0;
}
