/* Shared-key authentication of the control connection (auth.h). */
#include <string.h>

#include "common/error.h"
#include "common/hmac.h"
#include "engine/admit.h"
#include "engine/auth.h"
#include "engine/control.h"
#include "engine/core.h"
#include "engine/ctl_seal.h"
#include "engine/fail.h"
#include "engine/peer.h"

enum { ROLE_ACCEPTOR = 'A', ROLE_CONNECTOR = 'C' };

/* The transcript a MAC covers: what it is for, the protocol version, whose
 * MAC it is, and both nonces. */
static int transcript_mac(const struct tpx_peer *p, const char *label, size_t label_len, int role,
                          uint8_t out[TPX_MAC_BYTES]) {
  const tpx_config_t *c = &p->ep->cfg;
  uint8_t hdr[2] = {WIRE_VERSION, (uint8_t)role};
  struct tpx_mac_part parts[] = {{label, label_len},
                                 {hdr, role ? 2u : 1u},
                                 {p->auth_nc, WIRE_AUTH_NONCE},
                                 {p->auth_ns, WIRE_AUTH_NONCE}};
  return tpx__hmac(c->auth_key, c->auth_key_len, parts, 4, out);
}

static int proof_mac(const struct tpx_peer *p, int role, uint8_t out[TPX_MAC_BYTES]) {
  static const char label[] = "tpx-p2p control auth";
  return transcript_mac(p, label, sizeof(label), role, out);
}

/* Both proofs checked: the key the transport's data sockets prove. */
static int derive_session_key(struct tpx_peer *p) {
  static const char label[] = "tpx-p2p data key";
  _Static_assert(TPX_MAC_BYTES == TPX_NET_KEY_BYTES, "the session key is one HMAC-SHA256");
  int rc = transcript_mac(p, label, sizeof(label), 0, p->auth_skey);
  if (rc == 0) {
    const tpx_net_ops_t *o = p->ep->net->ops;
    p->auth = PEER_AUTH_OK;
    tpx__admit_good(p); /* a key holder's source: its next connections wait longer for their first frame */
    /* Handed to the channels: their data sockets prove it where the
     * transport takes keys (otherwise its sockets are its own). */
    p->net_key = o->listen_keyed && o->connect_keyed ? p->auth_skey : NULL;
  }
  return rc;
}

/* TPX_ENCRYPT: from here on the control connection carries records
 * (ctl_seal.h); the bytes already queued go as they are. */
static int seal_begin(struct tpx_peer *p) {
  const tpx_config_t *c = &p->ep->cfg;
  if (!c->encrypt) return 0;
  return tpx__ctl_seal_new(c->auth_key, c->auth_key_len, p->auth_nc, p->auth_ns, !p->incoming, p->out.len, &p->seal);
}

static int fail(struct tpx_peer *p, int err, const char *why) {
  tpx__peer_fail(p, err, "peer %s: authentication failed: %s", p->where, why);
  return err;
}

/* The peer's MAC for role, compared in constant time. */
static int mac_ok(struct tpx_peer *p, int role, const uint8_t *mac) {
  uint8_t want[TPX_MAC_BYTES];
  int rc = proof_mac(p, role, want);
  int ok = rc == 0 && tpx__mac_equal(want, mac, TPX_MAC_BYTES);
  tpx__cleanse(want, sizeof(want));
  if (rc) return fail(p, rc, tpx_last_error());
  return ok ? 0 : fail(p, TPX_EAUTH, "its proof of the key is wrong (not the same TPX_AUTH_KEY)");
}

int tpx__auth_start(struct tpx_peer *p) {
  struct tpx__wire_auth m = {.step = AUTH_CHALLENGE};
  int rc = tpx__random_bytes(p->auth_nc, WIRE_AUTH_NONCE);
  if (rc) return rc;
  memcpy(m.nonce, p->auth_nc, WIRE_AUTH_NONCE);
  if ((rc = tpx__ctl_send(p, tpx__wire_put_auth(&p->out, &m))) != 0) return rc;
  p->state = P_WAIT_AUTH;
  return 0;
}

/* Our own challenge, coming back on a connection to us: another endpoint
 * would need our key to answer it, so a reflected one must not be answered
 * (it would hand the attacker the response our connector waits for). */
static int own_challenge(const struct tpx_peer *p, const uint8_t *nonce) {
  for (const struct tpx_peer *q = p->ep->peers; q; q = q->next)
    if (q != p && !q->incoming && q->state == P_WAIT_AUTH &&
        memcmp(q->auth_nc, nonce, WIRE_AUTH_NONCE) == 0)
      return 1;
  return 0;
}

static int on_challenge(struct tpx_peer *p, const struct tpx__wire_auth *m) {
  if (p->auth != PEER_AUTH_NONE) return fail(p, TPX_EAUTH, "a second challenge");
  if (own_challenge(p, m->nonce))
    return fail(p, TPX_EAUTH, "it sent back a challenge of this endpoint (reflection)");
  memcpy(p->auth_nc, m->nonce, WIRE_AUTH_NONCE);
  struct tpx__wire_auth r = {.step = AUTH_RESPONSE};
  int rc = tpx__random_bytes(p->auth_ns, WIRE_AUTH_NONCE);
  if (rc == 0) rc = proof_mac(p, ROLE_ACCEPTOR, r.mac);
  if (rc) return fail(p, rc, tpx_last_error());
  memcpy(r.nonce, p->auth_ns, WIRE_AUTH_NONCE);
  p->auth = PEER_AUTH_CHALLENGED;
  if ((rc = tpx__ctl_send(p, tpx__wire_put_auth(&p->out, &r))) != 0)
    return fail(p, rc, "sending the response failed");
  return 0;
}

static int on_response(struct tpx_peer *p, const struct tpx__wire_auth *m) {
  memcpy(p->auth_ns, m->nonce, WIRE_AUTH_NONCE);
  int rc = mac_ok(p, ROLE_ACCEPTOR, m->mac);
  if (rc) return rc;
  struct tpx__wire_auth r = {.step = AUTH_PROOF};
  rc = proof_mac(p, ROLE_CONNECTOR, r.mac);
  if (rc == 0) rc = derive_session_key(p);
  if (rc) return fail(p, rc, tpx_last_error());
  if ((rc = tpx__ctl_send(p, tpx__wire_put_auth(&p->out, &r))) != 0)
    return fail(p, rc, "sending the proof failed");
  if ((rc = seal_begin(p)) != 0) return fail(p, rc, tpx_last_error());
  return 1;
}

int tpx__auth_on_frame(struct tpx_peer *p, const struct tpx__wire_frame *f) {
  struct tpx__wire_auth m;
  int rc = tpx__wire_get_auth(f, &m);
  if (rc) return fail(p, rc, tpx_last_error());
  if (!p->ep->cfg.auth_key_len)
    return fail(p, TPX_EAUTH, "the peer has a key (TPX_AUTH_KEY) and this endpoint has none");
  if (!p->incoming) {
    if (p->state != P_WAIT_AUTH || m.step != AUTH_RESPONSE)
      return fail(p, TPX_EAUTH, "unexpected step");
    return on_response(p, &m);
  }
  if (m.step == AUTH_CHALLENGE) return on_challenge(p, &m);
  if (m.step != AUTH_PROOF || p->auth != PEER_AUTH_CHALLENGED)
    return fail(p, TPX_EAUTH, "unexpected step");
  if ((rc = mac_ok(p, ROLE_CONNECTOR, m.mac)) != 0) return rc;
  if ((rc = derive_session_key(p)) != 0) return fail(p, rc, tpx_last_error());
  if ((rc = seal_begin(p)) != 0) return fail(p, rc, tpx_last_error());
  return 0;
}

int tpx__auth_hello_ok(struct tpx_peer *p) {
  if (!p->ep->cfg.auth_key_len || p->auth == PEER_AUTH_OK) return 0;
  return fail(p, TPX_EAUTH,
              p->auth == PEER_AUTH_NONE
                  ? "this endpoint requires a key (TPX_AUTH_KEY) and the peer sent no proof"
                  : "hello before the proof");
}
