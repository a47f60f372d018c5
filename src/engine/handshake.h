/* Connection setup: the dialled TCP connection comes up, HELLO / HELLO_ACK
 * exchange identities, channel counts and the transport's listen handles,
 * then every channel's transport connect/accept completes and the peer is
 * ready (incoming ones wait in the accept queue). Failures fail the peer. */
#ifndef TPX_ENGINE_HANDSHAKE_H
#define TPX_ENGINE_HANDSHAKE_H

#include <stdint.h>

struct tpx_peer;
struct tpx__wire_frame;

void tpx__handshake_connected(struct tpx_peer *p);
/* MSG_AUTH before HELLO (auth.h); the connector goes on with HELLO once it
 * authenticated the acceptor. */
void tpx__handshake_on_auth(struct tpx_peer *p, const struct tpx__wire_frame *f);
void tpx__handshake_on_hello(struct tpx_peer *p, const struct tpx__wire_frame *f);
void tpx__handshake_on_hello_ack(struct tpx_peer *p, const struct tpx__wire_frame *f);
/* P_NET_SETUP: drive connect/accept (unless a step that found nothing new
 * asked to wait until later than now: handshake.c). 1: the peer became ready
 * (frames that arrived meanwhile are waiting to be parsed), 0: progress or
 * not yet (did counts comms that came up), < 0: failed. */
int tpx__handshake_step(struct tpx_peer *p, int *did, uint64_t now);

#endif
