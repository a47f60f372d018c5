/* Liveness of a ready peer (live.h). */
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "engine/control.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/live.h"
#include "engine/peer.h"

uint32_t tpx__live_flag(const tpx_endpoint_t *ep) { return ep->thread_on ? HELLO_F_LIVE : 0; }

void tpx__live_agree(struct tpx_peer *p, uint32_t flags) { p->live.judged = (flags & HELLO_F_LIVE) != 0; }

static void arm(struct tpx_peer *p, uint64_t now, int timeout_ms) {
  struct tpx__live *l = &p->live;
  l->armed = 1;
  l->rx = 0;
  l->rx_at = l->step_at = l->ping_at = now;
  /* Under every peer, flag or not: the kernel notices a dead host or a lost
   * route even where no ping is sent. Failing is not fatal: pings remain. */
  if (p->fd >= 0 && tpx__ctl_set_keepalive(p->fd, timeout_ms) != 0)
    TPX_DEBUG("peer %s: %s", p->where, tpx_last_error());
}

static int send_ask(struct tpx_peer *p, uint64_t now) {
  struct tpx__live *l = &p->live;
  struct tpx__wire_ping m = {PING_ASK, l->seq + 1 ? l->seq + 1 : 1};
  int rc = tpx__ctl_send(p, tpx__wire_put_ping(&p->out, &m));
  if (rc) return rc;
  l->seq = m.seq;
  l->ping_at = now;
  return 0;
}

void tpx__live_step(struct tpx_peer *p, uint64_t now) {
  int timeout_ms = p->ep->cfg.peer_timeout_ms;
  struct tpx__live *l = &p->live;
  if (p->state != P_READY || timeout_ms <= 0) return; /* closing: the end-of-connection grace decides */
  if (!l->armed) {
    arm(p, now, timeout_ms);
    return;
  }
  uint64_t limit = tpx__ms_to_ns(timeout_ms), every = limit / 4;
  if (l->rx) {
    l->rx = 0;
    l->heard = 1;
    l->rx_at = now;
  }
  /* Our own absence beyond a ping interval is not the peer's silence: its
   * answers (or asks) that came meanwhile were read before this step, and
   * what we did not ask for it could not answer. */
  uint64_t gap = now - l->step_at;
  l->step_at = now;
  if (gap > every) {
    l->rx_at += gap - every;
    if (l->rx_at > now) l->rx_at = now;
  }
  if (!l->judged) return;
  uint64_t quiet = now - l->rx_at;
  /* Until its first byte the peer may still be in its transport setup
   * (frames wait there until it is ready): its own setup deadline too. */
  if (!l->heard) limit += tpx__ms_to_ns(p->ep->cfg.connect_timeout_ms);
  if (quiet > limit) {
    tpx__peer_fail_silent(p, quiet / 1000000ull, l->seq - l->answered);
    return;
  }
  if (quiet >= every && now - l->ping_at >= every) {
    int rc = send_ask(p, now);
    if (rc) tpx__peer_fail_last(p, rc);
  }
}

int tpx__live_on_ping(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  struct tpx__wire_ping m;
  int rc = tpx__wire_get_ping(f, &m);
  if (rc) {
    tpx__peer_fail(p, rc, "peer %s: bad ping: %s", p->where, tpx_last_error());
    return rc;
  }
  struct tpx__live *l = &p->live;
  if (m.kind == PING_ANSWER) {
    if (m.seq > l->seq || m.seq <= l->answered) {
      tpx__peer_fail(p, TPX_EPROTO, "peer %s: ping answer %u, we asked up to %u (answered %u)", p->where, m.seq,
                     l->seq, l->answered);
      return TPX_EPROTO;
    }
    l->answered = m.seq;
    return 0;
  }
  /* Asks go only to a side that offered to answer (an older one would fail
   * on the unknown type): one that did not offer refuses them the same way. */
  if (!tpx__live_flag(p->ep)) {
    tpx__peer_fail(p, TPX_EPROTO, "peer %s: ping to an endpoint that did not offer HELLO_F_LIVE", p->where);
    return TPX_EPROTO;
  }
  l->asks_in++;
  struct tpx__wire_ping a = {PING_ANSWER, m.seq};
  rc = tpx__ctl_send(p, tpx__wire_put_ping(&p->out, &a));
  if (rc) tpx__peer_fail_last(p, rc);
  return rc;
}
