/* Operations: one struct for every kind of transfer, the user's (write, read,
 * send, recv) and the peer's we serve (incoming write, served read,
 * standalone notification): struct tpx__op is core.h's. Lifetime, the data phase
 * and completion live in op.c; ids in ids.c (ids.h). */
#ifndef TPX_ENGINE_OP_H
#define TPX_ENGINE_OP_H

#include <stdatomic.h>
#include <stdint.h>

#include "engine/core.h"
#include "engine/ids.h"
#include "engine/plan.h"
#include "engine/route.h"
#include "engine/wire.h"

struct tpx_peer;
struct tpx_endpoint;
struct tpx__wlink;

void tpx__op_set_errmsg(struct tpx__op *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Internal ops (we serve a peer's request) and user handles. */
struct tpx__op *tpx__op_new_internal(struct tpx_peer *p, int kind, uint32_t nents);
struct tpx__op *tpx__op_new_user(struct tpx_peer *p, int kind, uint32_t nents);
int tpx__op_copy_notif(struct tpx__op *o, const void *msg, uint32_t len);
/* Free an op that holds no references and is in no list. */
void tpx__op_free(struct tpx__op *o);
void tpx__op_free_internal(struct tpx__op *o);
/* Link a user op into ep->xfers, taking references on its peer and memory. */
void tpx__op_user_link(struct tpx__op *o);
/* Free a user op that is not in flight (drops its references). */
void tpx__op_user_destroy(struct tpx__op *o);

/* The peer's list of ops in progress (deadlines, failure). */
void tpx__op_active_add(struct tpx_peer *p, struct tpx__op *o);

/* Round-robin start channel for the next transfer of nchunks chunks. */
uint32_t tpx__op_take_first_ch(struct tpx_peer *p, uint64_t nchunks);
/* Queue every chunk on the peer's windows (or finish at once when there
 * are none). Returns < 0 when the peer can no longer go on. */
int tpx__op_start_data(struct tpx__op *o, uint32_t first_ch, int is_recv);
/* window_done_fn: one chunk of o left channel ch's window. */
int tpx__op_chunk_done(struct tpx__op *o, int ch);
/* Every chunk is through and no lost channel's answer is due: the data
 * phase ends (as when its last chunk finishes). */
int tpx__op_maybe_done(struct tpx__op *o);
/* Free the resend layers (route.h); none of their links may be queued. */
void tpx__op_drop_layers(struct tpx__op *o);
/* Done (status 0) or failed: user ops report, internal ops are freed once
 * they leave the peer's arrival-order FIFO (notif.c). */
void tpx__op_finish(struct tpx__op *o, int status);
/* The peer failed (every op) or went away (only_ctrl_waits: the ops waiting
 * for a control message that can no longer come). */
void tpx__op_fail_all(struct tpx_peer *p, int err, int only_ctrl_waits);
/* Status of an acknowledged / refused id, back to the peer. */
int tpx__op_send_status(struct tpx_peer *p, int what, uint64_t id, int status);


#endif
