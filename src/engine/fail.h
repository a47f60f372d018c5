/* A peer fails, closes, or goes away. tpx__peer_fail is where a peer's failure is
 * decided and logged, once; everything below returns errors to it. */
#ifndef TPX_ENGINE_FAIL_H
#define TPX_ENGINE_FAIL_H

#include <stdint.h>

struct tpx_peer;
struct tpx__op;

/* Fail the peer (no-op when already dead): log, tell the remote why, close
 * the control socket and the comms, fail every op. */
void tpx__peer_fail(struct tpx_peer *p, int err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
/* The same, with the detail tpx_err_quiet recorded (the usual way to pass a
 * lower layer's error up). */
void tpx__peer_fail_last(struct tpx_peer *p, int err);
/* A message named an id that is not one of ours in the right state: the
 * peer fails (TPX_EPROTO), which is returned. */
int tpx__peer_fail_proto(struct tpx_peer *p, const char *what, uint64_t id);
/* The peer's ERROR (its reason for failing the connection): its text is the
 * peer's claim, shown as its report, anything not printable replaced. */
void tpx__peer_fail_reported(struct tpx_peer *p, struct tpx__wire_error *e);
/* A ready peer gave no sign of life for silent_ms (live.h), unanswered
 * pings outstanding: it fails with TPX_ETIMEDOUT. */
void tpx__peer_fail_silent(struct tpx_peer *p, uint64_t silent_ms, uint32_t unanswered);
/* Graceful close by the user. */
void tpx__peer_shutdown(struct tpx_peer *p, int err);
/* The remote said goodbye or closed: finish what is in flight, fail what
 * waits for a message that can no longer come. */
void tpx__peer_remote_gone(struct tpx_peer *p, const char *why);
/* CLOSING and nothing left in flight: release the transport resources. */
void tpx__peer_check_closing(struct tpx_peer *p);
/* Setup and control-wait deadlines. */
void tpx__peer_deadlines(struct tpx_peer *p, uint64_t now);
/* A chunk of a closing peer completed: its transfers are still moving, so
 * the end-of-control-connection grace starts again. */
void tpx__peer_eof_progress(struct tpx_peer *p);

#endif
