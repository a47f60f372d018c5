/* Two-sided matching: receive announcements (CTS) meet posted sends. The
 * handlers (dispatch.c routes to them) return 0, or the error they failed the
 * peer with. */
#ifndef TPX_ENGINE_MATCH_H
#define TPX_ENGINE_MATCH_H

#include <stdint.h>

struct tpx_peer;
struct tpx__op;
struct tpx__wire_frame;
struct tpx__cts_entry;

int tpx__match_on_cts(struct tpx_peer *p, const struct tpx__wire_frame *f);
int tpx__match_on_send(struct tpx_peer *p, const struct tpx__wire_frame *f);
/* Oldest unmatched announcement with this tag, removed from the ring. */
int tpx__match_take_cts(struct tpx_peer *p, uint64_t tag, struct tpx__cts_entry *out);
/* A posted send with no announcement yet waits for one. */
void tpx__match_queue_send(struct tpx_peer *p, struct tpx__op *o);
/* Matched: move the send's data (or refuse it when it does not fit). */
void tpx__match_start_send(struct tpx_peer *p, struct tpx__op *o, const struct tpx__cts_entry *c);

#endif
