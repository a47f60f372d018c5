/* The timeline: where the time of a transfer goes (TPX_TIMELINE=path).
 *
 * A fixed array of events (chunk posted, done in the transport, landed;
 * staging copies started and finished; socket reads and writes), each with a
 * CLOCK_MONOTONIC time, so the files of two processes on one host merge on
 * one clock. Recording is one relaxed atomic add and a store; off, it costs
 * one predicted branch, like the log macros. The events are written as text
 * to path.<pid> when the process exits (or tpx__tl_flush is called);
 * bench/timeline.py draws them. When the array is full, later events are
 * counted and dropped. */
#ifndef TPX_COMMON_TIMELINE_H
#define TPX_COMMON_TIMELINE_H

#include <stdint.h>

enum tpx_tl_kind {
  TL_OP_POST = 0,  /* a=op kind, b=op id, c=bytes, d=chunks */
  TL_OP_DONE,      /* b=op id, c=status */
  TL_TARGET,       /* a peer's write/read arrived: a=op kind, b=op id, c=bytes */
  TL_SEND_POST,    /* a=channel, b=op id, c=chunk, d=bytes (isend posted) */
  TL_SEND_DONE,    /* a=channel, b=op id, c=chunk: the transport reports it sent */
  TL_RECV_POST,    /* a=channel, b=op id, c=chunk, d=bytes (irecv posted) */
  TL_RECV_DONE,    /* a=channel, b=op id, c=chunk: its bytes arrived */
  TL_RECV_LANDED,  /* a=channel, b=op id, c=chunk: consumed (copied to the GPU) and released */
  TL_D2H_START,    /* a=channel, b=op id, c=chunk, d=bytes: staging copy of a send */
  TL_D2H_DONE,     /* a=channel, b=op id, c=chunk (seen done by the poster) */
  TL_H2D_START,    /* a=channel, b=GPU address it goes to (pairs start and done; the staging
                      slot knows no op), d=bytes: copy of a received chunk to the GPU */
  TL_H2D_DONE,     /* a=channel, b=the same address, d=bytes */
  TL_SOCK_TX,      /* a=socket (fd), c=bytes written by one sendmsg, d=its ns (recorded when it returns) */
  TL_SOCK_RX,      /* a=socket (fd), c=bytes read by one recvmsg, d=its ns (recorded when it returns) */
  TL_SOCK_KICK,    /* a=socket (fd): another thread queues work for the socket and wakes its thread */
  TL_KINDS
};

extern int tpx__tl_on; /* set once, before any data moves */

void tpx__tl_open(const char *path);
void tpx__tl_rec(int kind, int64_t a, uint64_t b, uint64_t c, uint64_t d);
/* Write what was recorded so far (appending) and start over. */
void tpx__tl_flush(void);

#define TPX_TL(kind, a, b, c, d)                                                 \
  do {                                                                           \
    if (__builtin_expect(tpx__tl_on, 0)) tpx__tl_rec((kind), (a), (b), (c), (d)); \
  } while (0)

#endif
