/* A lost channel comes back (rejoin.h). */
#include "engine/rejoin.h"

#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/util.h"
#include "engine/channel.h"
#include "engine/control.h"
#include "engine/dial.h"
#include "engine/core.h"
#include "engine/peer.h"
#include "engine/stripe.h"

/* Our side of an attempt: a fresh listen, its handle to the peer. */
static int start(struct tpx_peer *p, struct tpx__channel *ch, uint64_t now) {
  int rc = tpx__channels_listen(p, ch->idx, ch->idx + 1);
  if (rc) return rc;
  ch->rj_gen++;
  ch->rj_listening = 1;
  ch->rj_deadline = now + tpx__ms_to_ns(REJOIN_ATTEMPT_MS);
  struct tpx__wire_chan m = {.step = CHAN_REJOIN, .ch = (uint16_t)ch->idx, .gen = ch->rj_gen, .handle = ch->my_handle};
  TPX_DEBUG("peer %s channel %d: rejoin attempt %u", p->where, ch->idx, ch->rj_gen);
  return tpx__ctl_send(p, tpx__wire_put_chan(&p->out, &m));
}

/* The attempt ends without the channel: comms closed, the pause doubled. */
static int give_up(struct tpx_peer *p, struct tpx__channel *ch, int tell) {
  int rc = tpx__channel_drop_send(p, ch);
  tpx__channel_drop_recv(p, ch);
  int had = ch->rj_listening || ch->rj_have_handle;
  ch->rj_listening = ch->rj_have_handle = ch->rj_up_sent = ch->rj_peer_up = 0;
  ch->rejoin_next_ns = tpx__now_ns() + tpx__ms_to_ns(ch->rejoin_wait_ms);
  ch->rejoin_wait_ms = ch->rejoin_wait_ms * 2 > REJOIN_MAX_MS ? REJOIN_MAX_MS : ch->rejoin_wait_ms * 2;
  struct tpx__wire_chan m = {.step = CHAN_DOWN, .ch = (uint16_t)ch->idx, .code = TPX_ETIMEDOUT};
  if (rc == 0 && tell && had) rc = tpx__ctl_send(p, tpx__wire_put_chan(&p->out, &m));
  return rc;
}

static int back(struct tpx_peer *p, struct tpx__channel *ch) {
  ch->down = 0;
  ch->rejoins++;
  p->nup++;
  ch->rj_listening = ch->rj_have_handle = ch->rj_up_sent = ch->rj_peer_up = 0;
  ch->rejoin_wait_ms = REJOIN_FIRST_MS;
  uint64_t now = tpx__now_ns();
  ch->sq.moved_ns = ch->rq.moved_ns = now;
  tpx__stripe_reset(p, ch->idx);
  TPX_INFO("peer %s channel %d is back (%d of %d channels up)", p->where, ch->idx, p->nup, p->nch);
  return tpx__stripe_replan(p);
}

static int step(struct tpx_peer *p, struct tpx__channel *ch, uint64_t now) {
  if (!ch->rj_listening && !ch->rj_have_handle) {
    if (now < ch->rejoin_next_ns) return 0;
    return start(p, ch, now);
  }
  if (ch->rj_up_sent) return 0; /* the peer's UP or DOWN decides */
  int up = ch->rj_listening && ch->rj_have_handle ? tpx__channel_connect(p, ch->idx) : 0;
  if (up < 0) {
    TPX_DEBUG("peer %s channel %d: rejoin attempt %u failed: %s", p->where, ch->idx, ch->rj_gen, tpx_last_error());
    return give_up(p, ch, 1);
  }
  if (up == 0) return now > ch->rj_deadline ? give_up(p, ch, 1) : 0;
  ch->rj_up_sent = 1;
  struct tpx__wire_chan m = {.step = CHAN_UP, .ch = (uint16_t)ch->idx, .gen = ch->rj_gen};
  int rc = tpx__ctl_send(p, tpx__wire_put_chan(&p->out, &m));
  if (rc == 0 && ch->rj_peer_up) rc = back(p, ch);
  return rc;
}

int tpx__rejoin_tick(struct tpx_peer *p, uint64_t now) {
  for (int c = 0; c < p->nch; c++) {
    struct tpx__channel *ch = &p->ch[c];
    if (!ch->down) continue;
    int rc = step(p, ch, now);
    if (rc) return rc;
  }
  return 0;
}

int tpx__rejoin_on_frame(struct tpx_peer *p, const struct tpx__wire_chan *m) {
  struct tpx__channel *ch = &p->ch[m->ch];
  if (!ch->down) return 0; /* an attempt of a channel we never lost: it ends by itself */
  switch (m->step) {
  case CHAN_DOWN: return give_up(p, ch, 0); /* the peer gave this attempt up */
  case CHAN_REJOIN: {
    int rc = tpx__dial_check(p, m->handle, 1); /* before anything is dialled */
    if (rc) return rc;
    if (ch->rj_have_handle || ch->rj_up_sent) { /* a new attempt of the peer's: ours restarts with it */
      if ((rc = give_up(p, ch, 0)) != 0) return rc;
    }
    memcpy(ch->dial->handle, m->handle, TPX_NET_HANDLE_BYTES);
    ch->rj_have_handle = 1;
    if (!ch->rj_listening) return start(p, ch, tpx__now_ns());
    return 0;
  }
  case CHAN_UP:
    ch->rj_peer_up = 1;
    return ch->rj_up_sent ? back(p, ch) : 0;
  default: return tpx_err_quiet(TPX_EPROTO, "peer %s: channel message step %u", p->where, m->step);
  }
}
