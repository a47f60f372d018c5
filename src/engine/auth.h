/* Shared-key authentication of the control connection (docs/SECURITY.md),
 * when the endpoint has a key (cfg.auth_key_len > 0). Before HELLO:
 *
 *   connector -> acceptor  AUTH_CHALLENGE  Nc (32 fresh random bytes)
 *   acceptor -> connector  AUTH_RESPONSE   Ns, HMAC(K, label | version | 'A' | Nc | Ns)
 *   connector -> acceptor  AUTH_PROOF      HMAC(K, label | version | 'C' | Nc | Ns), then HELLO
 *
 * Each side checks the other's MAC (constant time) before it sends its
 * transport handles: the connector before HELLO, the acceptor before
 * HELLO_ACK (it refuses a HELLO that no valid proof preceded). The role byte
 * makes a reflected MAC fail, fresh nonces on both sides a replayed one.
 * Both then derive the session key the transport's data sockets prove
 * (tpx/net.h, listen_keyed): HMAC(K, "tpx-p2p data key" | version | Nc | Ns).
 * A key on one side only fails both sides with TPX_EAUTH. */
#ifndef TPX_ENGINE_AUTH_H
#define TPX_ENGINE_AUTH_H

#include <stdint.h>

struct tpx_peer;
struct tpx__wire_frame;

/* Connector, control connection up: send the challenge (state P_WAIT_AUTH).
 * Errors returned with tpx_err_quiet's detail; the caller fails the peer. */
int tpx__auth_start(struct tpx_peer *p);
/* A MSG_AUTH frame, either role. 1: the connector has authenticated the
 * acceptor and sent its proof (the caller sends HELLO next); 0: handled
 * (the acceptor answered, or took the proof); < 0: the peer failed. */
int tpx__auth_on_frame(struct tpx_peer *p, const struct tpx__wire_frame *f);
/* Acceptor, HELLO arrived: 0 when it may be taken (the proof was good, or
 * this endpoint has no key); else the peer failed (TPX_EAUTH). */
int tpx__auth_hello_ok(struct tpx_peer *p);

#endif
