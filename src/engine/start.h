/* Starting posted transfers (start.c): the control message that starts one
 * and its chunks queued on the peer's windows. tpx_xfer_post starts a small
 * transfer at once (its answer comes sooner) and leaves a larger one to the
 * next progress pass, so a post costs the caller no transport call; started
 * either way, transfers leave in the order they were posted. */
#ifndef TPX_ENGINE_START_H
#define TPX_ENGINE_START_H

struct tpx_peer;
struct tpx__op;

/* Transfers up to this many bytes start inside tpx_xfer_post (with a
 * progress thread): one control message, at most one chunk. */
#define START_NOW_MAX_BYTES (64u << 10)

/* Send the control message that starts o and queue its data (lock held). A
 * failure to send fails the peer, which finishes o with the error. */
void tpx__start_now(struct tpx_peer *p, struct tpx__op *o);
/* Whether the post should start o itself: small, and nothing posted before
 * it still waits for its start. */
int tpx__start_in_post(const struct tpx_peer *p, const struct tpx__op *o);
/* Leave o's start to the next pass (phase PH_QUEUED). */
void tpx__start_defer(struct tpx_peer *p, struct tpx__op *o);
/* Start every deferred transfer of a ready peer, in post order (lock
 * held; each pass and whatever must follow them on the control connection).
 * Returns how many started. */
int tpx__start_deferred(struct tpx_peer *p);

#endif
