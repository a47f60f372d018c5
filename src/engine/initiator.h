/* The initiator's side: handlers of messages about our own transfers
 * (dispatch.c routes to them). Each returns 0, or the error it failed the
 * peer with. */
#ifndef TPX_ENGINE_INITIATOR_H
#define TPX_ENGINE_INITIATOR_H

struct tpx_peer;
struct tpx__wire_frame;

int tpx__initiator_on_read_data(struct tpx_peer *p, const struct tpx__wire_frame *f);
int tpx__initiator_on_status(struct tpx_peer *p, const struct tpx__wire_frame *f);
int tpx__initiator_on_notif(struct tpx_peer *p, const struct tpx__wire_frame *f);

#endif
