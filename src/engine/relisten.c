/* Fresh listen handles for a plugin's failed connect or accept (relisten.h). */
#include "engine/relisten.h"

#include <stdio.h>
#include <string.h>

#include "common/error.h"
#include "common/log.h"
#include "common/retry.h"
#include "common/util.h"
#include "engine/channel.h"
#include "engine/control.h"
#include "engine/dial.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/peer.h"

uint32_t tpx__relisten_flag(const struct tpx_peer *p) { return p->ep->net->caps.builtin ? 0 : HELLO_F_RELISTEN; }

void tpx__relisten_agree(struct tpx_peer *p, uint32_t peer_flags) {
  p->relisten = tpx__relisten_flag(p) && (peer_flags & HELLO_F_RELISTEN);
}

static int send_frame(struct tpx_peer *p, uint8_t step, int c, uint32_t gen, int code, const uint8_t *handle) {
  struct tpx__wire_relisten m = {step, (uint16_t)c, gen, code, handle};
  if (step != RELISTEN_UP) {
    p->rl_sent++;
    p->rl_peer_up = 0; /* an UP the peer sent before reading this one answers less */
    p->rl_up_sent = 0;
  }
  return tpx__ctl_send(p, tpx__wire_put_relisten(&p->out, &m));
}

int tpx__relisten_failed(struct tpx_peer *p, const struct tpx__chan_fail *f) {
  tpx_endpoint_t *ep = p->ep;
  if (!p->relisten || f->ch < 0) return 0;
  struct tpx__channel *ch = &p->ch[f->ch];
  struct tpx_retry *r = f->accept ? &ch->rt.acc : &ch->rt.conn;
  char last[320], tail[64]; /* the transport's detail, without the code's name it ends with */
  snprintf(last, sizeof(last), "%s", tpx_last_error());
  snprintf(tail, sizeof(tail), " (%s)", tpx_strerror(f->code));
  size_t n = strlen(last), t = strlen(tail);
  if (n >= t && strcmp(last + n - t, tail) == 0) last[n - t] = '\0';
  uint64_t now = tpx__now_ns();
  if (!tpx__retry_failed_plugin(r, f->code, ep->cfg.socket_retry_cnt, ep->cfg.socket_retry_sleep_msec, now)) {
    if (r->failed > 1) {
      char causes[200];
      tpx__retry_causes(r, causes, sizeof(causes));
      (void)tpx_err_quiet(f->code, "%.200s; %d attempts, each with a fresh listen handle: %s", last, r->failed,
                          causes);
    }
    return 0;
  }
  if (f->accept) {
    tpx__channel_drop_recv(p, ch);
    ch->rt.relisten_due = 1;
    ch->rt.acc_code = f->code;
  } else {
    ch->rt.want_handle = 1;
    ch->rt.ask_due = 1;
    ch->rt.conn_code = f->code;
  }
  p->rl_up_sent = 0;
  TPX_DEBUG("%s; retry %d with a fresh listen handle in %llu ms", last, r->failed,
            (unsigned long long)((r->next_ns - now) / 1000000ull));
  return 1;
}

/* Channel c listens anew and the peer gets the handle (code: why). */
static int relisten(struct tpx_peer *p, int c, int code) {
  struct tpx__channel *ch = &p->ch[c];
  tpx__channel_drop_recv(p, ch);
  int rc = tpx__channels_listen(p, c, c + 1);
  if (rc) return rc;
  ch->rt.recv_gen++;
  ch->rt.relisten_due = 0;
  return send_frame(p, RELISTEN_HANDLE, c, ch->rt.recv_gen, code, ch->my_handle);
}

int tpx__relisten_step(struct tpx_peer *p, uint64_t now) {
  int did = 0;
  for (int c = 0; p->relisten && c < p->nch; c++) {
    struct tpx__chan_retry *rt = &p->ch[c].rt;
    int rc = 0;
    if (rt->ask_due && now >= rt->conn.next_ns) {
      rt->ask_due = 0;
      rc = send_frame(p, RELISTEN_ASK, c, rt->send_gen, rt->conn_code, NULL);
      did++;
    }
    if (rc == 0 && rt->relisten_due && now >= rt->acc.next_ns) {
      rc = relisten(p, c, rt->acc_code);
      did++;
    }
    if (rc) return rc;
  }
  return did;
}

int tpx__relisten_all_up(struct tpx_peer *p) {
  if (!p->relisten) return 1;
  if (!p->rl_up_sent) {
    int rc = send_frame(p, RELISTEN_UP, 0, p->rl_got, 0, NULL);
    if (rc) return rc;
    p->rl_up_sent = 1;
  }
  return p->rl_peer_up;
}

/* The peer's connect to our handle of generation m->gen failed. */
static int on_ask(struct tpx_peer *p, struct tpx__channel *ch, const struct tpx__wire_relisten *m) {
  if (m->gen > ch->rt.recv_gen)
    return tpx_err_quiet(TPX_EPROTO, "peer %s channel %d: asks about handle %u, we sent up to %u", p->where,
                         ch->idx, m->gen, ch->rt.recv_gen);
  tpx__retry_note(&ch->rt.peer_conn, m->code);
  if (m->gen < ch->rt.recv_gen || ch->rt.relisten_due) return 0; /* a fresh one is on its way already */
  if (++ch->rt.asks > p->ep->cfg.socket_retry_cnt)
    return tpx_err_quiet(TPX_EPROTO, "peer %s channel %d: asked for more than %d fresh listen handles "
                         "(TPX_SOCKET_RETRY_CNT)", p->where, ch->idx, p->ep->cfg.socket_retry_cnt);
  TPX_DEBUG("peer %s channel %d: its connect failed (%s): listening anew", p->where, ch->idx,
            tpx_strerror(m->code));
  return relisten(p, ch->idx, 0);
}

/* A fresh handle of the peer's for our connect. */
static int on_handle(struct tpx_peer *p, struct tpx__channel *ch, const struct tpx__wire_relisten *m) {
  /* Each side's failures are bounded by the retry count; both sides' together by twice it. */
  uint64_t most = 2 * ((uint64_t)p->ep->cfg.socket_retry_cnt + 1);
  if (m->gen != ch->rt.send_gen + 1 || m->gen > most)
    return tpx_err_quiet(TPX_EPROTO, "peer %s channel %d: handle %u after %u (at most %llu)", p->where, ch->idx,
                         m->gen, ch->rt.send_gen, (unsigned long long)most);
  int rc = tpx__dial_check(p, m->handle, 1);
  if (rc) return rc;
  if (m->code) tpx__retry_note(&ch->rt.peer_acc, m->code);
  if ((rc = tpx__channel_drop_send(p, ch)) != 0) return rc;
  memcpy(ch->dial->handle, m->handle, TPX_NET_HANDLE_BYTES);
  ch->rt.send_gen = m->gen;
  ch->rt.want_handle = ch->rt.ask_due = 0; /* an ASK not sent yet is answered */
  TPX_DEBUG("peer %s channel %d: fresh listen handle %u%s%s: connecting anew", p->where, ch->idx, m->gen,
            m->code ? ", its accept failed: " : "", m->code ? tpx_strerror(m->code) : "");
  return 0;
}

void tpx__relisten_on_frame(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  tpx_endpoint_t *ep = p->ep;
  struct tpx__wire_relisten m;
  int rc;
  if (ep->cfg.auth_key_len && p->auth != PEER_AUTH_OK) /* cannot happen in transport setup; never trusted */
    rc = tpx_err_quiet(TPX_EAUTH, "peer %s: relisten message before authentication", p->where);
  else if (!p->relisten)
    rc = tpx_err_quiet(TPX_EPROTO, "peer %s: relisten message, but fresh handles were not agreed", p->where);
  else if ((rc = tpx__wire_get_relisten(f, &m)) != 0)
    rc = tpx_err_quiet(rc, "peer %s: bad relisten message: %s", p->where, tpx_last_error());
  else if (m.step != RELISTEN_UP && m.ch >= p->nch)
    rc = tpx_err_quiet(TPX_EPROTO, "peer %s: relisten message for channel %u of %d", p->where, m.ch, p->nch);
  else if (m.step == RELISTEN_UP && m.gen > p->rl_sent)
    rc = tpx_err_quiet(TPX_EPROTO, "peer %s: read %u of our %u relisten messages", p->where, m.gen, p->rl_sent);
  if (rc) {
    tpx__peer_fail_last(p, rc);
    return;
  }
  p->setup_next = 0; /* the next pass steps the setup */
  if (m.step == RELISTEN_UP) {
    p->rl_peer_up = m.gen == p->rl_sent; /* else it has yet to read some of ours */
    return;
  }
  p->rl_got++;
  p->rl_peer_up = 0;
  p->rl_up_sent = 0;
  rc = m.step == RELISTEN_ASK ? on_ask(p, &p->ch[m.ch], &m) : on_handle(p, &p->ch[m.ch], &m);
  if (rc) tpx__peer_fail_last(p, rc);
}
