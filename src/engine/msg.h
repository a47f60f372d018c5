/* Handlers of the messages a ready peer sends (initiator.c, target.c, match.c;
 * dispatch.c routes to them). Each returns 0, or the error it failed the
 * peer with. */
#ifndef TPX_ENGINE_MSG_H
#define TPX_ENGINE_MSG_H

#include <stdint.h>

struct tpx_peer;
struct op;
struct wire_frame;
struct cts_entry;

/* initiator.c */
int tpx__initiator_on_read_data(struct tpx_peer *p, const struct wire_frame *f);
int tpx__initiator_on_status(struct tpx_peer *p, const struct wire_frame *f);
int tpx__initiator_on_notif(struct tpx_peer *p, const struct wire_frame *f);

/* target.c */
int tpx__target_on_write(struct tpx_peer *p, const struct wire_frame *f);
int tpx__target_on_read(struct tpx_peer *p, const struct wire_frame *f);

/* match.c */
int tpx__match_on_cts(struct tpx_peer *p, const struct wire_frame *f);
int tpx__match_on_send(struct tpx_peer *p, const struct wire_frame *f);
/* Oldest unmatched announcement with this tag, removed from the ring. */
int tpx__match_take_cts(struct tpx_peer *p, uint64_t tag, struct cts_entry *out);
/* A posted send with no announcement yet waits for one. */
void tpx__match_queue_send(struct tpx_peer *p, struct op *o);
/* Matched: move the send's data (or refuse it when it does not fit). */
void tpx__match_start_send(struct tpx_peer *p, struct op *o, const struct cts_entry *c);

#endif
