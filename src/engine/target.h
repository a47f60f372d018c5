/* The target's side: handlers of the peer's one-sided requests (dispatch.c
 * routes to them). Each returns 0, or the error it failed the peer with. */
#ifndef TPX_ENGINE_TARGET_H
#define TPX_ENGINE_TARGET_H

struct tpx_peer;
struct tpx__wire_frame;

int tpx__target_on_write(struct tpx_peer *p, const struct tpx__wire_frame *f);
int tpx__target_on_read(struct tpx_peer *p, const struct tpx__wire_frame *f);

#endif
