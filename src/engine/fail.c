/* Failure and close of a peer (fail.h). */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/retry.h"
#include "common/util.h"
#include "engine/channel.h"
#include "engine/control.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/op.h"
#include "engine/peer.h"

/* How long after its control connection ended a peer's transfers may go on
 * without one chunk completing (docs/A3HIGH.md, "A dead peer"). */
#define EOF_GRACE_MS 500

/* What the peer is told: our message (its code's name already taken off)
 * without its own name in front (it names us itself); to a peer not
 * authenticated while we have a key, only "refused" (docs/SECURITY.md). */
static const char *told(const struct tpx_peer *p, const char *msg) {
  if (p->ep->cfg.auth_key_len && p->auth != PEER_AUTH_OK) return "refused";
  size_t wl = strlen(p->where);
  if (strncmp(msg, "peer ", 5) == 0 && strncmp(msg + 5, p->where, wl) == 0) {
    msg += 5 + wl;
    if (*msg == ':') msg++;
    while (*msg == ' ') msg++;
  }
  return msg;
}

void tpx__peer_fail(struct tpx_peer *p, int err, const char *fmt, ...) {
  if (p->state == P_DEAD) return;
  char msg[320];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(msg, sizeof(msg), fmt, ap);
  va_end(ap);
  tpx_endpoint_t *ep = p->ep;
  /* A setup we dialled fails into tpx_connect, which returns and logs it:
   * logged here too it would show twice. */
  int quiet = (err == TPX_ECLOSED || err == TPX_ECANCELED) || (!p->incoming && tpx__peer_in_setup(p->state));
  /* A detail taken from tpx_last_error() ends with the code's name: named
   * in the log, not in errmsg (the caller's own error adds it again). */
  msg[tpx__err_untail(msg, err)] = '\0';
  /* a connection that never became a peer: rate-limited with the others (peer_log.h) */
  int counted = !quiet && p->incoming && !p->ever_ready && !tpx__refused_log_ok(p);
  if (quiet || counted) TPX_DEBUG("%s (%s)", msg, tpx_strerror(err));
  else TPX_ERROR("%s (%s)", msg, tpx_strerror(err));
  snprintf(p->errmsg, sizeof(p->errmsg), "%s", msg);
  tpx__peer_log_flush(p);
  if (tpx__peer_in_setup(p->state)) ep->setups--;
  int was_up = p->state == P_READY || p->state == P_CLOSING;
  p->state = P_DEAD;
  p->err = err;
  /* Tell the peer why, unless it is the one that went away. */
  if (p->fd >= 0 && !p->eof && err != TPX_ECLOSED && err != TPX_ECANCELED) {
    (void)tpx__wire_put_error(&p->out, err, told(p, msg));
  } else if (p->fd >= 0 && !p->eof && err == TPX_ECANCELED && was_up && !p->bye_sent) {
    (void)tpx__wire_put_bye(&p->out);
    p->bye_sent = 1;
  }
  tpx__ctl_drop(p, 1);
  tpx__channels_close(p);
  tpx__op_fail_all(p, err, 0);
  tpx__ep_signal(ep);
}

void tpx__peer_fail_last(struct tpx_peer *p, int err) { tpx__peer_fail(p, err, "%s", tpx_last_error()); }

int tpx__peer_fail_proto(struct tpx_peer *p, const char *what, uint64_t id) {
  tpx__peer_fail(p, TPX_EPROTO, "peer %s: %s for unknown or finished transfer id %llu", p->where, what,
                 (unsigned long long)id);
  return TPX_EPROTO;
}

void tpx__peer_fail_reported(struct tpx_peer *p, struct tpx__wire_error *e) {
  for (char *c = e->msg; *c; c++)
    if (*c < 0x20 || *c > 0x7e) *c = '?';
  if (p->ep->cfg.auth_key_len && !p->incoming && p->auth != PEER_AUTH_OK) { /* anyone could have said it */
    tpx__peer_fail(p, TPX_EAUTH, "peer %s: sent an error before it proved the key (TPX_AUTH_KEY): its code and "
                   "text not taken (it said, unverified: %s)", p->where, e->msg);
    return;
  }
  int code = e->code < 0 && e->code >= TPX_EUNKNOWN ? e->code : TPX_EREMOTE;
  tpx__peer_fail(p, code == TPX_ECLOSED || code == TPX_ECANCELED ? TPX_EREMOTE : code, "peer %s reported: %s",
                 p->where, e->msg);
}

void tpx__peer_fail_silent(struct tpx_peer *p, uint64_t silent_ms, uint32_t unanswered) {
  tpx__peer_fail(p, TPX_ETIMEDOUT, "peer %s: no sign of life for %llu ms (%u ping(s) unanswered, "
                 "TPX_PEER_TIMEOUT_MS=%d)", p->where, (unsigned long long)silent_ms, unanswered,
                 p->ep->cfg.peer_timeout_ms);
}

void tpx__peer_shutdown(struct tpx_peer *p, int err) {
  tpx__peer_fail(p, err, "peer %s: closed locally", p->where);
}

void tpx__peer_remote_gone(struct tpx_peer *p, const char *why) {
  if (tpx__peer_in_setup(p->state)) {
    tpx__peer_fail(p, TPX_ECLOSED, "peer %s: %s during connection setup", p->where, why);
    return;
  }
  if (p->state != P_READY) return;
  TPX_DEBUG("peer %s: %s; finishing transfers in flight", p->where, why);
  p->state = P_CLOSING;
  p->eof_deadline = tpx__now_ns() + tpx__ms_to_ns(EOF_GRACE_MS);
  p->err = TPX_ECLOSED;
  snprintf(p->errmsg, sizeof(p->errmsg), "peer %s: %s", p->where, why);
  tpx__op_fail_all(p, TPX_ECLOSED, 1);
  tpx__peer_check_closing(p);
  tpx__ep_signal(p->ep);
}

void tpx__peer_eof_progress(struct tpx_peer *p) {
  if (p->state == P_CLOSING && p->eof_deadline) p->eof_deadline = tpx__now_ns() + tpx__ms_to_ns(EOF_GRACE_MS);
}

void tpx__peer_check_closing(struct tpx_peer *p) {
  if (p->state != P_CLOSING || tpx__channels_busy(p)) return;
  tpx__peer_fail(p, TPX_ECLOSED, "%s", p->errmsg);
}

void tpx__peer_deadlines(struct tpx_peer *p, uint64_t now) {
  if (tpx__peer_in_setup(p->state)) {
    if (now > p->setup_deadline) {
      int c = 0;
      char why[300] = "";
      if (p->state == P_NET_SETUP) {
        while (c < p->nch && p->ch[c].sq.comm && p->ch[c].rq.comm) c++;
        tpx__channels_setup_why(p, c, why, sizeof(why)); /* what its connect went through */
      } else if (p->state == P_CONNECTING && p->dial.failed) {
        char causes[200];
        tpx__retry_causes(&p->dial, causes, sizeof(causes));
        snprintf(why, sizeof(why), "%sfailed attempts: %s",
                 tpx__retry_all_were(&p->dial, ECONNREFUSED) ? "nothing listens there: is the server running, on "
                                                               "this port? "
                                                             : "",
                 causes);
      } else if (p->state == P_WAIT_ACK) {
        snprintf(why, sizeof(why), "connected, but no tpx answer: is the program on %s a tpx endpoint?", p->where);
      }
      char stage[80];
      if (p->state != P_NET_SETUP)
        snprintf(stage, sizeof(stage), "%s", tpx__peer_setup_stage(p->state));
      else if (c < p->nch)
        snprintf(stage, sizeof(stage), "transport connect/accept, channel %d", c);
      else /* ours are up; the peer's UP did not come (relisten.h) */
        snprintf(stage, sizeof(stage), "the peer's transport connect/accept");
      tpx__peer_fail(p, TPX_ETIMEDOUT, "peer %s: connection setup not done after %d ms (%s)%s%.300s", p->where,
                     p->ep->cfg.connect_timeout_ms, stage, why[0] ? ": " : "", why);
    }
    return;
  }
  if (p->state != P_READY && p->state != P_CLOSING) return;
  if (p->state == P_CLOSING && p->eof_deadline && now > p->eof_deadline) {
    tpx__peer_fail(p, TPX_ECLOSED, "%s; %llu requests still in the transport, none completed for %d ms",
                   p->errmsg, (unsigned long long)p->inflight, EOF_GRACE_MS);
    return;
  }
  for (struct tpx__op *o = p->active; o; o = o->next) {
    if (o->phase == PH_DATA && o->resend_deadline && now > o->resend_deadline) {
      tpx__peer_fail(p, TPX_ETIMEDOUT, "peer %s: %s %llu: chunks of a lost channel did not come again within %d ms",
                     p->where, tpx__op_kind_name(o->kind), (unsigned long long)o->id, p->ep->cfg.timeout_ms);
      return;
    }
    if ((o->phase == PH_WAIT_ACK || (o->kind == K_READ && o->phase == PH_WAIT_HDR)) &&
        o->deadline && now > o->deadline) {
      tpx__peer_fail(p, TPX_ETIMEDOUT, "peer %s: %s %llu got no %s after %d ms", p->where,
                tpx__op_kind_name(o->kind), (unsigned long long)o->id,
                o->kind == K_READ ? "answer" : "acknowledgement", p->ep->cfg.timeout_ms);
      return;
    }
  }
}
