/* Notifications. A peer's notification travels with a write (or a read, or
 * alone) and must not be seen before the data it follows: incoming writes
 * and notifications enter the peer's arrival-order FIFO, and a notification
 * is delivered to the endpoint's queue only when it and everything before it
 * has landed. Lock held. */
#ifndef TPX_ENGINE_NOTIF_H
#define TPX_ENGINE_NOTIF_H

#include <stdint.h>

#include "tpx/endpoint.h"

struct tpx_peer;
struct tpx__op;

/* What one held notification of len payload bytes is charged. */
uint64_t tpx__notif_cost(uint32_t len);
/* A standalone notification with nothing before it: counted, queued. */
void tpx__notif_arrive(struct tpx_peer *p, const uint8_t *msg, uint32_t len);
/* Append a counted one to the endpoint's queue (tpx_get_notif / tpx_wait_notif pop it). */
void tpx__notif_deliver(tpx_endpoint_t *ep, struct tpx_peer *p, const uint8_t *msg, uint32_t len);
/* The peer is being freed: its notifications not popped yet go too. */
void tpx__notif_forget_peer(tpx_endpoint_t *ep, struct tpx_peer *p);
int tpx__notif_pop(tpx_endpoint_t *ep, tpx_notif_t *out);
void tpx__notif_queue_free(tpx_endpoint_t *ep);

/* The peer's arrival-order FIFO of incoming ops. */
void tpx__notif_fifo_push(struct tpx_peer *p, struct tpx__op *o);
/* The head, if it finished, leaves the FIFO (its notification delivered when
 * it succeeded); the caller frees it. NULL: nothing finished at the head. */
struct tpx__op *tpx__notif_fifo_pop_done(struct tpx_peer *p);
/* The head, finished or not (the peer failed: nothing is delivered). */
struct tpx__op *tpx__notif_fifo_pop(struct tpx_peer *p);

#endif
