/* Fresh listen handles for a loaded ncclNet plugin's failed connect or
 * accept (docs/RELIABILITY.md, "Plugins"). The ncclNet contract says nothing
 * of calling accept again on a listen comm whose accept failed, nor connect
 * on a handle whose connect failed (the handle holds the plugin's connect
 * stage), so a retry needs a new listen comm on the same device and its
 * handle at the connector: MSG_RELISTEN (wire.h).
 * - Our accept failed: after the retry pause the listen comm closes, a new
 *   one listens, and RELISTEN_HANDLE takes its handle to the peer, which
 *   drops its connect to the old one (a comm that came up closes; one in
 *   progress is abandoned, abandon.h) and connects to the new.
 * - Our connect failed: after the pause RELISTEN_ASK asks the peer for a
 *   fresh handle; the peer closes what it had for the channel, listens anew
 *   and answers with RELISTEN_HANDLE.
 * Only a failure common/retry.h calls transient for a plugin is retried,
 * within TPX_SOCKET_RETRY_CNT (per channel and direction) and the setup
 * deadline; the built-in transport retries its own sockets (sock/setup.c)
 * and never takes this path. Since a side whose own comms are up may be
 * told of its peer's failed accept, a side becomes ready only when the peer
 * said RELISTEN_UP after reading every frame of ours. Both sides must have
 * said HELLO_F_RELISTEN; with an older peer a failure ends the setup as
 * before. Frames are taken only during transport setup, from a peer that
 * got there (authenticated, when a key is set). Lock held. */
#ifndef TPX_ENGINE_RELISTEN_H
#define TPX_ENGINE_RELISTEN_H

#include <stdint.h>

struct tpx_peer;
struct tpx__wire_frame;
struct tpx__chan_fail;

/* The HELLO flag this side sends: HELLO_F_RELISTEN on a loaded plugin. */
uint32_t tpx__relisten_flag(const struct tpx_peer *p);
/* The peer's HELLO / HELLO_ACK flags: whether the peer takes this path. */
void tpx__relisten_agree(struct tpx_peer *p, uint32_t peer_flags);
/* A channel's connect or accept failed (f, detail in tpx_last_error()): 1
 * when a retry with a fresh handle is on its way (logged at debug); 0 when
 * not, tpx_last_error() then naming every attempt's cause. */
int tpx__relisten_failed(struct tpx_peer *p, const struct tpx__chan_fail *f);
/* ASKs and new listens whose pause ended: the number sent, or < 0 (detail
 * recorded; the caller fails the peer). */
int tpx__relisten_step(struct tpx_peer *p, uint64_t now);
/* Every comm of ours is up: 1 when the peer's are too (ready), 0 to wait for
 * its UP, < 0 when ours could not be sent. */
int tpx__relisten_all_up(struct tpx_peer *p);
/* A MSG_RELISTEN during transport setup; failures fail the peer. */
void tpx__relisten_on_frame(struct tpx_peer *p, const struct tpx__wire_frame *f);

#endif
