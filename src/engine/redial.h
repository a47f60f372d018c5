/* The control connection's connect (we dial the peer), retried on transient
 * errors (common/retry.h: EHOSTUNREACH, ENETUNREACH, ECONNREFUSED, ETIMEDOUT)
 * within the peer's setup deadline, without blocking: a failed attempt
 * closes its socket, and the next one starts from a progress pass once its
 * pause is over. */
#ifndef TPX_ENGINE_REDIAL_H
#define TPX_ENGINE_REDIAL_H

#include <stdint.h>
#include <sys/socket.h>

struct tpx_peer;

/* The first attempt to sa for a peer in P_CONNECTING without a socket yet;
 * retries only when `retries` (else the first failure is the last). A
 * failure is the peer's (tpx__peer_fail); lock held. */
void tpx__redial_start(struct tpx_peer *p, const struct sockaddr *sa, socklen_t len, int retries);
/* An attempt's connect failed with errno err (seen on its socket): another
 * one later, or the peer fails naming every attempt's cause. */
void tpx__redial_failed(struct tpx_peer *p, int err);
/* From the progress pass: the next attempt once its pause is over. Returns 1
 * when it started one. */
int tpx__redial_step(struct tpx_peer *p, uint64_t now);

#endif
