/* Two-sided matching: receive announcements (CTS) meet posted sends. The
 * handlers (dispatch.c routes to them) return 0, or the error they failed the
 * peer with. */
#ifndef TPX_ENGINE_MATCH_H
#define TPX_ENGINE_MATCH_H

#include <stdint.h>

struct tpx_peer;
struct op;
struct wire_frame;
struct cts_entry;

int tpx__match_on_cts(struct tpx_peer *p, const struct wire_frame *f);
int tpx__match_on_send(struct tpx_peer *p, const struct wire_frame *f);
/* Oldest unmatched announcement with this tag, removed from the ring. */
int tpx__match_take_cts(struct tpx_peer *p, uint64_t tag, struct cts_entry *out);
/* A posted send with no announcement yet waits for one. */
void tpx__match_queue_send(struct tpx_peer *p, struct op *o);
/* Matched: move the send's data (or refuse it when it does not fit). */
void tpx__match_start_send(struct tpx_peer *p, struct op *o, const struct cts_entry *c);

#endif
