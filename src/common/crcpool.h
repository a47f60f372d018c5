/* CRC-32C off the progress thread: a few worker threads sum chunks while
 * the progress thread goes on posting (integrity, src/engine/integrity.h).
 * One pool per endpoint. Asynchronous: start returns a ticket, poll says when
 * the sum is in; a ticket holds its slot until polled done or dropped. The
 * bytes must stay put until then: drop waits for a sum already running. */
#ifndef TPX_COMMON_CRCPOOL_H
#define TPX_COMMON_CRCPOOL_H

#include <stdint.h>
#include <sys/uio.h>

typedef struct tpx_crcpool tpx_crcpool_t;

/* done(arg) runs on a worker after each sum (the progress thread's wake-up). */
int tpx__crcpool_create(int threads, void (*done)(void *), void *arg, tpx_crcpool_t **out);
void tpx__crcpool_destroy(tpx_crcpool_t *p); /* every sum dropped, threads joined; NULL ok */
/* The CRC-32C of data[0..len), or of nv pieces (copied). TPX_EAGAIN while
 * every slot is taken (sum it in place instead). */
int tpx__crcpool_start(tpx_crcpool_t *p, const void *data, uint64_t len, const struct iovec *iov, int nv,
                       uint64_t *ticket);
/* 1: done, *crc set (the slot is free again); 0: not yet. */
int tpx__crcpool_poll(tpx_crcpool_t *p, uint64_t ticket, uint32_t *crc);
void tpx__crcpool_drop(tpx_crcpool_t *p, uint64_t ticket);

#endif
