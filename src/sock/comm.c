/* Comms and requests of the built-in transport: isend/irecv/test/close on the
 * caller's side, and the per-socket progress functions the I/O threads run.
 *
 * Request life. Send: the caller fills ring slot seq % TPX_SOCK_RING, cuts
 * the message into parts (tpx__sock_split), queues each part with its header
 * on its socket, sets `pending` to the number of parts, publishes `posted`
 * and kicks the sockets' threads; each part sent decrements `pending`.
 * Receive: the caller fills the slot with `pending` = TPX_SOCK_UNSIZED and
 * publishes `posted`; a socket's thread that reads a part header of this
 * receive claims the part's range (recv_claim_check: in the message, the size the
 * first part announced, no overlap with an earlier part, at most one part per
 * socket), the first claim sizes the receive (replaces the sentinel by the
 * message size), and each part's length is subtracted once every byte of it
 * is in. So `pending` is the bytes of no part yet plus the whole length of
 * every part still being read: it reaches 0 only when the parts cover exactly
 * [0, size) and none is being read (or, on failure, when no socket can write
 * into the receive any more). At 0 test() releases the slot. A thread never
 * touches a slot after its decrement, so the caller may reuse it at once, and
 * nothing is written into a buffer after its receive was reported.
 *
 * Failures are per socket: a socket that hits EOF or an error fails only the
 * parts that still needed it (sender: its queued parts; receiver: the part it
 * was reading). Bytes queued before a peer's FIN are always read first, so a
 * sender that closes right after its last send completed never fails the
 * receiver's requests whose bytes were all sent. A part header that breaks
 * the rules (wire.h, recv_claim_check) breaks the whole recv comm
 * (comm_break, TPX_EPROTO): every socket drops its part and stops reading,
 * and every receive fails. Receives whose bytes can no
 * longer come (every socket ended, or stopped past them) fail: recv_fail_lost.
 *
 * A send larger than the posted receive: the receiver reads the whole message
 * (the excess goes to a scratch buffer), test() returns TPX_ETRUNC with
 * *done = 1 and sizes[0] = the sent size, and the comm stays usable.
 * Other errors (peer closed, reset, protocol) release the request with
 * *done = 0 and the comm's first error detail.
 *
 * Unpack mode (unpack.c): receives land in bounce pages instead of the
 * caller's buffer; a receive that test() reported done (rc 0 or TPX_ETRUNC)
 * stays held (TPX_SR_DONE) until irecvConsumed,
 * in FIFO order. The strict rules apply. */
#define _GNU_SOURCE
#include <errno.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/uio.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "common/timeline.h"
#include "common/util.h"
#include "cuda/gpu.h"
#include "sock/sock.h"
#include "sock/wire.h"

/* Syscalls per visit of one socket before its thread serves the others. */
#define DATA_BUDGET 4
#define TEST_YIELD_EVERY 64 /* test() yields once per this many consecutive misses */

static inline tpx_sock_req_t *slot(tpx_sock_comm_t *m, uint64_t seq) {
  return &m->reqs[seq % TPX_SOCK_RING];
}

static const char *kind_name(int kind) {
  switch (kind) {
  case TPX_SK_LISTEN: return "listen comm";
  case TPX_SK_SEND: return "send comm";
  case TPX_SK_RECV: return "recv comm";
  case TPX_SK_MR: return "memory handle";
  case TPX_SK_CONNECT: return "connect state";
  default: return "unknown handle";
  }
}

/* ---- failure bookkeeping (I/O threads) --------------------------------------- */

static void comm_set_error(tpx_sock_comm_t *m, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
static void comm_set_error(tpx_sock_comm_t *m, const char *fmt, ...) {
  int exp = 0;
  if (!atomic_compare_exchange_strong(&m->errset, &exp, 1)) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(m->errmsg, sizeof(m->errmsg), fmt, ap);
  va_end(ap);
  atomic_store_explicit(&m->errset, 2, memory_order_release);
  TPX_DEBUG("sock: %s", m->errmsg);
}

static void conn_fail(tpx_sock_conn_t *c, int code, const char *what, int e, uint64_t seq,
                      size_t left) {
  tpx_sock_comm_t *m = c->comm;
  c->dead = code;
  atomic_store(&m->peer_closed, 1);
  comm_set_error(m, "%s %s peer %s: %s socket %d: %s%s%s (message %llu, %zu bytes outstanding)",
                 kind_name(m->kind), m->kind == TPX_SK_SEND ? "to" : "from", m->peer,
                 c->index == 0 ? "control" : "data", c->index, what, e ? ": " : "",
                 e ? strerror(e) : "", (unsigned long long)seq, left);
}

static inline void req_fail(tpx_sock_req_t *r, int err) {
  int exp = 0;
  if (atomic_compare_exchange_strong(&r->err, &exp, err)) return;
  /* A truncation is reported as done: a receive that then lost bytes it
   * keeps must fail instead. */
  if (exp == TPX_ETRUNC && err != TPX_ETRUNC) atomic_compare_exchange_strong(&r->err, &exp, err);
}

/* `n` parts (send) or bytes (recv) of r are finished. Nothing of r may be
 * touched afterwards: the caller may reuse the slot once pending is 0. */
static inline void req_done(tpx_sock_req_t *r, uint64_t n) {
  atomic_fetch_sub_explicit(&r->pending, n, memory_order_acq_rel);
}

static inline int io_again(void) {
  return errno == EAGAIN || errno == EWOULDBLOCK;
}

/* ---- send side ----------------------------------------------------------------- */

/* Parts gathered into one sendmsg: header + bytes of each. */
#define SEND_BATCH 16
/* iovec entries per sendmsg: a header and a buffer per part, or the pieces
 * of vectored parts (the rest of a part goes in the next call). */
#define SEND_IOV 128

/* Part p's bytes from `skip` on into iov[*niov..max). 1 when all of them
 * went in, 0 when max ran out first (nothing after them may follow). */
static int send_payload(const tpx_sock_part_t *p, size_t skip, struct iovec *iov, int *niov,
                        int max) {
  if (p->len <= skip) return 1;
  if (p->iovcnt == 0) {
    iov[*niov].iov_base = p->buf + skip;
    iov[(*niov)++].iov_len = p->len - skip;
    return 1;
  }
  size_t got = 0;
  *niov += tpx__sock_iov_slice(p->iov, p->iovcnt, p->off + skip, p->len - skip, iov + *niov,
                               max - *niov, &got);
  return got == p->len - skip;
}

static int send_progress(tpx_sock_conn_t *c) {
  int budget = DATA_BUDGET;
  for (;;) {
    uint64_t tail = atomic_load_explicit(&c->parts_tail, memory_order_relaxed);
    uint64_t head = atomic_load(&c->parts_head); /* seq-cst: pairs with isend */
    if (tail == head) return 0;
    if (c->dead) {
      /* This socket is gone: its parts fail (the rest of the comm decides
       * nothing here; requests fail through their own parts). */
      for (; tail < head; tail++) {
        tpx_sock_req_t *r = c->parts[tail % TPX_SOCK_RING].req;
        c->done_bytes = 0;
        atomic_store(&c->parts_tail, tail + 1); /* seq-cst: pairs with isend's kick test */
        req_fail(r, c->dead);
        req_done(r, 1);
      }
      continue;
    }
    if (budget-- == 0) return 1;
    /* Queued parts back to back in one sendmsg: each part's header, then
     * its bytes, from where the last call stopped. */
    struct iovec iov[SEND_IOV];
    int niov = 0, nparts = 0;
    for (uint64_t t = tail; t < head && nparts < SEND_BATCH && niov + 2 <= SEND_IOV; t++) {
      tpx_sock_part_t *p = &c->parts[t % TPX_SOCK_RING];
      size_t skip = t == tail ? c->done_bytes : 0;
      if (skip < TPX_WIRE_PART_BYTES) {
        iov[niov].iov_base = p->hdr + skip;
        iov[niov++].iov_len = TPX_WIRE_PART_BYTES - skip;
        skip = 0;
      } else {
        skip -= TPX_WIRE_PART_BYTES;
      }
      nparts++;
      if (!send_payload(p, skip, iov, &niov, SEND_IOV)) break;
    }
    struct msghdr mh;
    memset(&mh, 0, sizeof(mh));
    mh.msg_iov = iov;
    mh.msg_iovlen = (size_t)niov;
    uint64_t t0 = tpx__tl_on ? tpx__now_ns() : 0;
    ssize_t n = c->seal ? tpx__sock_seal_send(c->seal, c->fd, iov, niov)
                        : sendmsg(c->fd, &mh, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n > 0) TPX_TL(TL_SOCK_TX, c->fd, 0, (uint64_t)n, tpx__now_ns() - t0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (io_again()) return 0;
      tpx_sock_part_t *p = &c->parts[tail % TPX_SOCK_RING];
      conn_fail(c, TPX_EREMOTE, c->seal ? "send (sealed records)" : "send", errno, p->seq,
                TPX_WIRE_PART_BYTES + p->len - c->done_bytes);
      continue;
    }
    size_t left = (size_t)n;
    for (uint64_t t = tail; t < tail + (uint64_t)nparts; t++) {
      tpx_sock_part_t *p = &c->parts[t % TPX_SOCK_RING];
      size_t need = TPX_WIRE_PART_BYTES + p->len - c->done_bytes;
      if (left < need) {
        c->done_bytes += left;
        break;
      }
      left -= need;
      tpx_sock_req_t *r = p->req;
      c->done_bytes = 0;
      atomic_store(&c->parts_tail, t + 1); /* seq-cst: pairs with isend's kick test */
      req_done(r, 1);
    }
  }
}

/* ---- receive side ---------------------------------------------------------------- */

#define POS_READING 0
#define POS_ENDED UINT64_MAX

/* Receives that can no longer complete fail (m->mu held). Once a socket has
 * ended, and every other one has ended too or stopped at a part header of a
 * message s (whose receive is not posted, or waits for unpack admission):
 * a socket's parts come in order, so a stopped socket brings nothing of the
 * messages before s, and an ended one nothing at all. Every unfinished
 * receive before the smallest such s then fails, instead of waiting for
 * bytes that cannot come (a peer gone while this side is behind). */
static void recv_fail_lost(tpx_sock_comm_t *m) {
  if (atomic_load(&m->ndead) == 0) return;
  uint64_t lim = UINT64_MAX;
  for (int i = 0; i <= m->nsocks; i++) {
    uint64_t p = atomic_load(&m->conns[i].pos);
    if (p == POS_READING) return; /* may still bring anything */
    if (p != POS_ENDED && p - 1 < lim) lim = p - 1;
  }
  uint64_t posted = atomic_load(&m->posted);
  int code = atomic_load(&m->broken);
  if (code == 0) code = TPX_EREMOTE;
  for (uint64_t s = m->tail; s < posted && s < lim; s++) {
    tpx_sock_req_t *r = slot(m, s);
    if (r->state != TPX_SR_INFLIGHT || atomic_load(&r->pending) == 0) continue;
    req_fail(r, code);
    if (m->upk) tpx__sock_upk_skip(m, s);
    atomic_store_explicit(&r->pending, 0, memory_order_release);
  }
}

static void recv_fail_lost_now(tpx_sock_comm_t *m) {
  if (atomic_load(&m->ndead) == 0) return;
  pthread_mutex_lock(&m->mu);
  recv_fail_lost(m);
  pthread_mutex_unlock(&m->mu);
}

/* Socket c of a recv comm failed or ended (`code`, with conn_fail's detail
 * already recorded): its part in progress fails, and so do the receives
 * that can no longer complete. */
static void recv_conn_dead(tpx_sock_conn_t *c) {
  tpx_sock_comm_t *m = c->comm;
  if (c->have) {
    tpx_sock_req_t *r = c->cur.req;
    c->have = 0;
    req_fail(r, c->dead);
    req_done(r, c->cur.len);
  }
  atomic_store(&c->wait_post, 0);
  atomic_store(&c->pos, POS_ENDED);
  atomic_fetch_add(&m->ndead, 1);
  recv_fail_lost_now(m);
}

/* The peer broke the protocol on recv comm m: every socket stops (each one
 * drops the part it was reading the next time it runs, so all are kicked),
 * and every receive fails once no socket can write into it any more
 * (recv_conn_dead, recv_fail_lost). */
static void comm_break(tpx_sock_comm_t *m, int code) {
  int exp = 0;
  if (!atomic_compare_exchange_strong(&m->broken, &exp, code)) return;
  /* Under rx_mu: teardown sets `closing` under it before it detaches the
   * sockets, and creation sets rx_live once all are attached (and kicks
   * them itself if the comm broke before). */
  pthread_mutex_lock(&m->rx_mu);
  if (m->rx_live && !atomic_load(&m->closing))
    for (int i = 0; i <= m->nsocks; i++)
      tpx__sock_io_kick(&m->conns[i]);
  pthread_mutex_unlock(&m->rx_mu);
}

static void recv_proto_error(tpx_sock_conn_t *c, const char *why, uint64_t seq, uint64_t size,
                             uint64_t off, uint64_t len) {
  tpx_sock_comm_t *m = c->comm;
  c->dead = TPX_EPROTO;
  atomic_store(&m->peer_closed, 1);
  comm_set_error(m,
                 "recv comm from peer %s: socket %d: bad part header (%s: seq %llu, size %llu,"
                 " offset %llu, length %llu); comm failed",
                 m->peer, c->index, why, (unsigned long long)seq, (unsigned long long)size,
                 (unsigned long long)off, (unsigned long long)len);
  comm_break(m, TPX_EPROTO);
  recv_conn_dead(c);
}

static inline tpx_sock_range_t *claimed(tpx_sock_comm_t *m, uint64_t seq) {
  return &m->rx_ranges[(seq % TPX_SOCK_RING) * (uint64_t)(m->nsocks + 1)];
}

/* May a part [off, off + len) of message seq (size bytes) be read into
 * receive r (m->rx_mu held)? NULL if so, else why not. The header's own
 * range (off + len <= size, len > 0 unless empty) is checked already. */
static const char *recv_claim_check(tpx_sock_comm_t *m, tpx_sock_req_t *r, uint64_t seq,
                                    uint64_t size, uint64_t off, uint64_t len) {
  /* The slot moved on (completed, released, reused) or the receive is
   * complete or failed: no part of it may be read any more. */
  if (r->rx_seq != seq || atomic_load(&r->pending) == 0)
    return "part of a message already complete or failed";
  if (r->rx_msize != 0 && r->rx_msize != size + 1) return "size differs from an earlier part";
  /* Sequence numbers strictly increase on each socket: a socket brings at
   * most one part of a message. */
  uint32_t max = (uint32_t)m->nsocks + 1;
  if (r->rx_nparts >= max) return "more parts than sockets";
  const tpx_sock_range_t *g = claimed(m, seq);
  for (uint32_t i = 0; i < r->rx_nparts; i++)
    if (off < g[i].off + g[i].len && g[i].off < off + len) return "overlaps an earlier part";
  if (r->rx_nparts + 1 == max && r->rx_covered + len < size)
    return "parts cannot cover the message (one part per socket)";
  return NULL;
}

/* Parse the part header in c->rhdr: the range checks that need no receive
 * and the full sequence number (parts on one socket come in increasing
 * order). 0 = well formed; -1 = the socket failed. */
static int recv_parse_header(tpx_sock_conn_t *c, uint64_t *seq, uint64_t *size, uint64_t *off,
                             uint64_t *len) {
  uint32_t seq32;
  const char *bad = tpx__wire_part_decode(c->rhdr, TPX_SOCK_MAX_MSG, &seq32, size, off, len);
  uint32_t delta = seq32 - (uint32_t)c->rseq;
  if (bad == NULL && c->have_rseq && (delta == 0 || delta >= 0x80000000u)) bad = "sequence";
  if (bad != NULL) {
    recv_proto_error(c, bad, seq32, *size, *off, *len);
    return TPX_EPROTO;
  }
  *seq = c->rseq + delta;
  return 0;
}

/* Has the receive for `seq` been posted? Announce the wait before looking
 * again: irecv publishes `posted` before it looks at wait_post, so one of us
 * sees the other. 1 = not yet (kicked when it is). */
static int recv_wait_posted(tpx_sock_conn_t *c, uint64_t seq) {
  tpx_sock_comm_t *m = c->comm;
  atomic_store(&c->pos, POS_READING);
  if (seq >= atomic_load(&m->posted)) {
    atomic_store(&c->pos, seq + 1);
    atomic_store(&c->wait_post, 1);
    if (seq >= atomic_load(&m->posted)) {
      recv_fail_lost_now(m);
      return 1;
    }
    atomic_store(&c->pos, POS_READING);
  }
  atomic_store_explicit(&c->wait_post, 0, memory_order_relaxed);
  return 0;
}

/* A whole part header is in c->rhdr: find its receive, claim the part's
 * range and set up c->cur. 0 = ready to read the bytes; 2 = an empty
 * message, done (next header); 1 = stopped (receive not posted, or unpack
 * admission waits), kicked later; TPX_EPROTO = the socket failed. */
static int recv_header(tpx_sock_conn_t *c) {
  tpx_sock_comm_t *m = c->comm;
  uint64_t seq, size, off, len;
  if (recv_parse_header(c, &seq, &size, &off, &len) != 0) return TPX_EPROTO;
  if (recv_wait_posted(c, seq) != 0) return 1;
  tpx_sock_req_t *r = slot(m, seq);
  tpx_sock_upk_t *u = m->upk;
  pthread_mutex_lock(&m->rx_mu);
  const char *why = recv_claim_check(m, r, seq, size, off, len);
  if (why != NULL) {
    pthread_mutex_unlock(&m->rx_mu);
    recv_proto_error(c, why, seq, size, off, len);
    return TPX_EPROTO;
  }
  /* Unpack mode: pages before any byte, and before the receive can
   * complete (an empty message completes as soon as it is sized). A stop
   * here leaves everything as it was: this header is parsed (and checked)
   * again. */
  if (u != NULL && tpx__sock_upk_admit(m, c, seq, TPX_MIN((size_t)size, r->size)) != 0) {
    pthread_mutex_unlock(&m->rx_mu);
    atomic_store(&c->pos, seq + 1);
    recv_fail_lost_now(m);
    return 1;
  }
  /* Claim the range. The first part sizes the receive. */
  claimed(m, seq)[r->rx_nparts++] = (tpx_sock_range_t){off, len};
  r->rx_covered += len;
  int sizing = r->rx_msize == 0;
  if (sizing) {
    r->rx_msize = size + 1;
    r->msg_size = (size_t)size;
    if (size > r->size) req_fail(r, TPX_ETRUNC);
  }
  c->rseq = seq;
  c->have_rseq = 1;
  c->rhdr_got = 0;
  if (len == 0) {
    /* An empty message (size 0: its only part, so `sizing`): complete now,
     * and r may be gone once unlocked. */
    if (sizing) req_done(r, TPX_SOCK_UNSIZED);
    pthread_mutex_unlock(&m->rx_mu);
    return 2;
  }
  size_t keep = r->size > off ? TPX_MIN((size_t)len, r->size - (size_t)off) : 0;
  tpx_sock_part_t *p = &c->cur;
  p->req = r;
  p->seq = seq;
  p->len = (size_t)len;
  p->keep = keep;
  p->iovcnt = keep && u == NULL ? r->iovcnt : 0;
  p->iov = r->iov;
  p->off = (size_t)off;
  p->buf = keep && u == NULL && r->iovcnt == 0 ? r->buf + off : NULL;
  p->pages = keep && u != NULL ? u->pages[tpx__tcpx_slot(seq)] + off / TPX_SOCK_PAGE : NULL;
  c->have = 1;
  c->done_bytes = 0;
  /* Not 0 here: this part's bytes still count. */
  if (sizing) req_done(r, TPX_SOCK_UNSIZED - size);
  pthread_mutex_unlock(&m->rx_mu);
  return 0;
}

/* One read of the socket into the list: through its record layer when
 * sealed (checked plaintext only). */
static ssize_t conn_read(tpx_sock_conn_t *c, struct iovec *iov, int n) {
  if (c->seal) return tpx__sock_seal_recv(c->seal, c->fd, iov, n);
  struct msghdr mh;
  memset(&mh, 0, sizeof(mh));
  mh.msg_iov = iov;
  mh.msg_iovlen = (size_t)n;
  return recvmsg(c->fd, &mh, MSG_DONTWAIT);
}

/* A sealed socket's read failed on a record, not on the socket: the comm
 * fails for good (the record's bytes were never handed out). 1 if so. */
static int recv_seal_error(tpx_sock_conn_t *c, uint64_t seq, size_t left) {
  const char *why = errno == EBADMSG    ? "data failed authentication (a record altered, replayed, reordered "
                                          "or dropped on the path, or the peer's key differs)"
                    : errno == EMSGSIZE  ? "data failed authentication (a record length out of range)"
                    : errno == EOVERFLOW ? "record numbers used up"
                    : errno == EIO       ? "record layer: libcrypto failed"
                                         : NULL;
  if (c->seal == NULL || why == NULL) return 0;
  conn_fail(c, TPX_EAUTH, why, 0, seq, left);
  TPX_WARN("sock: recv comm from peer %s: socket %d: %s; comm failed", c->comm->peer, c->index, why);
  comm_break(c->comm, TPX_EAUTH);
  recv_conn_dead(c);
  return 1;
}

/* iovec entries per recvmsg of a vectored receive (the rest of the part
 * comes in the next call), the next part header included. */
#define RECV_IOV 64

/* One recvmsg into the buffer or pieces of the part, bytes [done, keep) of
 * it, then `more` when the read can end the part. */
static ssize_t read_into(tpx_sock_conn_t *c, const tpx_sock_part_t *p, size_t done, const struct iovec *more) {
  struct iovec iov[RECV_IOV];
  size_t want = p->keep - done;
  int n = 1;
  if (p->iovcnt == 0) {
    iov[0] = (struct iovec){p->buf + done, want};
  } else {
    size_t got = 0;
    n = tpx__sock_iov_slice(p->iov, p->iovcnt, p->off + done, want, iov, RECV_IOV - 1, &got);
    if (got < want) more = NULL; /* the header comes after the bytes not in this read */
  }
  if (more) iov[n++] = *more;
  return conn_read(c, iov, n);
}

/* One read of the part being received: into its buffer, pieces or bounce
 * pages, or, past what the receive keeps, into scratch. The next part
 * header rides along when this read can end the part. */
static ssize_t read_part(tpx_sock_conn_t *c, tpx_sock_part_t *p, char *scratch) {
  struct iovec more = {c->rhdr, TPX_WIRE_PART_BYTES};
  ssize_t n;
  uint64_t t0 = tpx__tl_on ? tpx__now_ns() : 0;
  if (c->done_bytes < p->keep) {
    int last = p->keep == p->len;
    if (p->pages)
      n = tpx__sock_upk_recv(c->fd, c->comm->upk, p->pages, c->done_bytes, p->keep, last ? &more : NULL);
    else
      n = read_into(c, p, c->done_bytes, last ? &more : NULL);
  } else {
    struct iovec sc = {scratch, TPX_MIN(p->len - c->done_bytes, (size_t)TPX_SOCK_SCRATCH)};
    n = conn_read(c, &sc, 1); /* truncated: discard the excess */
  }
  if (n > 0) TPX_TL(TL_SOCK_RX, c->fd, 0, (uint64_t)n, tpx__now_ns() - t0);
  return n;
}

static int recv_progress(tpx_sock_conn_t *c, char *scratch) {
  int budget = DATA_BUDGET;
  for (;;) {
    if (c->dead) return 0;
    int broken = atomic_load_explicit(&c->comm->broken, memory_order_relaxed);
    if (broken) {
      /* Another socket saw the peer break the protocol: drop the part being
       * read (not one more byte into its buffer) and stop. */
      c->dead = broken;
      recv_conn_dead(c);
      return 0;
    }
    if (!c->have) {
      if (c->rhdr_got < TPX_WIRE_PART_BYTES) {
        if (budget-- == 0) return 1;
        struct iovec hv = {c->rhdr + c->rhdr_got, TPX_WIRE_PART_BYTES - c->rhdr_got};
        ssize_t n = conn_read(c, &hv, 1);
        if (n > 0) {
          c->rhdr_got += (size_t)n;
          continue;
        }
        if (n < 0 && errno == EINTR) continue;
        if (n < 0 && io_again()) return 0;
        if (n < 0 && recv_seal_error(c, c->rseq + c->have_rseq, 0)) return 0;
        if (n == 0 && c->rhdr_got == 0) {
          /* Between parts: the peer closed after its last message. */
          conn_fail(c, TPX_EREMOTE, "closed by peer", 0, c->rseq + c->have_rseq, 0);
        } else {
          conn_fail(c, TPX_EREMOTE, n == 0 ? "closed by peer inside a part header" : "recv",
                    n == 0 ? 0 : errno, c->rseq + c->have_rseq, 0);
        }
        recv_conn_dead(c);
        return 0;
      }
      int h = recv_header(c);
      if (h == 2) continue;
      if (h != 0) return 0;
    }
    tpx_sock_part_t *p = &c->cur;
    if (c->done_bytes < p->len) {
      if (budget-- == 0) return 1;
      ssize_t n = read_part(c, p, scratch);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && io_again()) return 0;
      if (n < 0 && recv_seal_error(c, p->seq, p->len - c->done_bytes)) return 0;
      if (n <= 0) {
        conn_fail(c, TPX_EREMOTE, n == 0 ? "closed by peer" : "recv", n == 0 ? 0 : errno, p->seq,
                  p->len - c->done_bytes);
        recv_conn_dead(c);
        return 0;
      }
      size_t got = (size_t)n;
      size_t mine = TPX_MIN(got, p->len - c->done_bytes);
      c->done_bytes += mine;
      c->rhdr_got = got - mine; /* bytes of the next part header */
      if (c->done_bytes < p->len) continue;
    }
    c->have = 0;
    req_done(p->req, p->len);
  }
}

int tpx__sock_conn_progress(tpx_sock_conn_t *c, void *scratch) {
  return c->comm->kind == TPX_SK_SEND ? send_progress(c) : recv_progress(c, scratch);
}

/* ---- comm creation and teardown ----------------------------------------------- */

int tpx__sock_comm_new(tpx_sock_net_t *sn, int kind, int dev, int nsocks, uint64_t comm_id,
                       int *fds, const char *peer, tpx_sock_comm_t **out) {
  int n = nsocks + 1;
  tpx_sock_comm_t *m = calloc(1, sizeof(*m));
  tpx_sock_conn_t *conns = calloc((size_t)n, sizeof(*conns));
  if (m == NULL || conns == NULL) {
    free(m);
    free(conns);
    for (int i = 0; i < n; i++)
      close(fds[i]);
    return tpx_err_quiet(TPX_ENOMEM, "sock: out of memory for a comm with %s", peer);
  }
  m->sn = sn;
  m->kind = kind;
  m->dev = dev;
  m->comm_id = comm_id;
  m->nsocks = nsocks;
  m->gpu_bound = sn->unpack && sn->gpu_ok ? tpx__gpu_current_device() : TPX_GPU_NONE;
  /* Unpack mode reproduces the TCPX plugin, whose rules are strict mode's. */
  m->strict = sn->cfg.sock_strict != 0 || sn->unpack;
  m->limit = m->strict ? TPX_SOCK_STRICT_REQUESTS : TPX_SOCK_RING;
  m->stall_seq = UINT64_MAX;
  m->conns = conns;
  snprintf(m->peer, sizeof(m->peer), "%s", peer);
  pthread_mutex_init(&m->mu, NULL);
  pthread_mutex_init(&m->rx_mu, NULL);
  int rc = 0;
  if (kind == TPX_SK_RECV) {
    m->rx_ranges = calloc((size_t)TPX_SOCK_RING * (size_t)n, sizeof(tpx_sock_range_t));
    if (m->rx_ranges == NULL)
      rc = tpx_err_quiet(TPX_ENOMEM, "sock: out of memory for a comm with %s", peer);
  }
  for (int i = 0; i < n; i++) {
    conns[i].fd = fds[i];
    conns[i].index = i;
    conns[i].comm = m;
    conns[i].progress = tpx__sock_conn_progress;
    if (kind == TPX_SK_SEND && rc == 0) {
      conns[i].parts = calloc(TPX_SOCK_RING, sizeof(tpx_sock_part_t));
      if (conns[i].parts == NULL)
        rc = tpx_err_quiet(TPX_ENOMEM, "sock: out of memory for a comm with %s", peer);
    }
  }
  if (rc == 0 && kind == TPX_SK_RECV && sn->unpack) rc = tpx__sock_upk_create(m);
  if (rc != 0) {
    tpx__sock_comm_destroy(m);
    return rc;
  }
  *out = m;
  return 0;
}

int tpx__sock_comm_seal(tpx_sock_comm_t *m, const uint8_t (*keys)[TPX_AEAD_KEY_BYTES]) {
  for (int i = 0; i <= m->nsocks; i++) {
    int rc = tpx__sock_seal_new(keys[i], m->kind == TPX_SK_SEND, m->sn->seal_rekey, &m->conns[i].seal);
    if (rc != 0) return rc;
  }
  return 0;
}

int tpx__sock_comm_create(tpx_sock_net_t *sn, int kind, int dev, int nsocks, uint64_t comm_id,
                          int *fds, const char *peer, const uint8_t (*keys)[TPX_AEAD_KEY_BYTES], void **out) {
  int n = nsocks + 1;
  tpx_sock_comm_t *m = NULL;
  int rc = tpx__sock_comm_new(sn, kind, dev, nsocks, comm_id, fds, peer, &m);
  if (rc != 0) return rc;
  if (keys != NULL && (rc = tpx__sock_comm_seal(m, keys)) != 0) {
    tpx__sock_comm_destroy(m);
    return rc;
  }
  tpx_sock_conn_t *conns = m->conns;
  rc = tpx__sock_pool_get(sn, dev, &m->pool);
  if (rc == 0) tpx__sock_pool_place(m->pool, m);
  for (int i = 0; i < n && rc == 0; i++)
    rc = tpx__sock_io_attach(conns[i].placed, &conns[i]);
  if (rc == 0) {
    /* From now on comm_break may kick every socket; if the peer broke the
     * protocol while they were being attached, kick them here. */
    pthread_mutex_lock(&m->rx_mu);
    m->rx_live = 1;
    if (atomic_load(&m->broken))
      for (int i = 0; i < n; i++)
        tpx__sock_io_kick(&conns[i]);
    pthread_mutex_unlock(&m->rx_mu);
  }
  if (rc == 0) {
    m->token = tpx__sock_reg_add(&sn->reg, kind, m);
    if (m->token == 0)
      rc = tpx_err_quiet(TPX_ENOMEM, "sock: more than %d open comms/handles", TPX_SOCK_MAX_OBJECTS);
  }
  if (rc != 0) {
    tpx__sock_comm_destroy(m);
    return rc;
  }
  TPX_DEBUG("sock: %s %#llx with %s on %s: %d data sockets, comm id %016llx%s%s", kind_name(kind),
            (unsigned long long)m->token, peer, sn->devs[dev].name, nsocks,
            (unsigned long long)comm_id, keys ? ", sealed (AES-256-GCM)" : "",
            sn->unpack  ? ", unpack"
            : m->strict ? ", strict"
                        : "");
  *out = (void *)(uintptr_t)m->token;
  return 0;
}

void tpx__sock_comm_destroy(tpx_sock_comm_t *m) {
  int n = m->nsocks + 1;
  /* Sockets kick each other only at unpack admission: stop that first, so
   * no thread kicks a socket whose own thread has already let it go. */
  tpx__sock_upk_quiesce(m);
  pthread_mutex_lock(&m->rx_mu); /* comm_break kicks only under it */
  atomic_store(&m->closing, 1);
  pthread_mutex_unlock(&m->rx_mu);
  tpx_sock_conn_t *list[TPX_SOCK_MAX_NSOCKS + 1];
  for (int i = 0; i < n; i++)
    list[i] = &m->conns[i];
  tpx__sock_io_detach(list, n);
  if (m->pool) tpx__sock_pool_forget(m->pool, m);
  for (int i = 0; i < n; i++) {
    if (m->conns[i].fd >= 0) close(m->conns[i].fd);
    free(m->conns[i].parts);
    tpx__sock_seal_free(m->conns[i].seal);
  }
  if (m->pool) tpx__sock_pool_put(m->sn, m->dev);
  uint64_t inflight = atomic_load(&m->posted) - m->tail;
  if (inflight > 0)
    TPX_DEBUG("sock: closing %s with %s with %llu requests in flight", kind_name(m->kind), m->peer,
              (unsigned long long)inflight);
  /* No thread touches the pages any more (conns detached): free them, then
   * drop the GPU references the memory needed. */
  tpx__sock_upk_destroy(m);
  tpx__sock_gpu_fini(m);
  pthread_mutex_destroy(&m->mu);
  pthread_mutex_destroy(&m->rx_mu);
  for (int i = 0; i < TPX_SOCK_RING; i++)
    free(m->reqs[i].iov);
  free(m->rx_ranges);
  free(m->conns);
  free(m);
}

static tpx_sock_comm_t *comm_get(tpx_sock_net_t *sn, void *comm, int kind, const char *fn,
                                 int *rc) {
  int got = TPX_SK_NONE;
  tpx_sock_comm_t *m = tpx__sock_reg_get(&sn->reg, (uint64_t)(uintptr_t)comm, kind, &got);
  if (m != NULL) return m;
  if (comm == NULL)
    *rc = tpx_err_quiet(TPX_EINVAL, "%s: %s is NULL", fn, kind_name(kind));
  else if (got != TPX_SK_NONE)
    *rc = tpx_err_quiet(TPX_EINVAL, "%s: handle %p is a %s, not a %s", fn, comm, kind_name(got),
                  kind_name(kind));
  else
    *rc = tpx_err_quiet(TPX_EINVAL, "%s: %p is not an open %s (closed, or not from this transport)", fn,
                  comm, kind_name(kind));
  return NULL;
}

static int comm_close(tpx_net_t *net, void *comm, int kind, const char *fn) {
  tpx_sock_net_t *sn = tpx__sock_net_of(net, fn);
  if (sn == NULL) return TPX_EINVAL;
  int rc = 0;
  tpx_sock_comm_t *m = comm_get(sn, comm, kind, fn, &rc);
  if (m == NULL) return rc;
  tpx__sock_reg_del(&sn->reg, m->token);
  tpx__sock_comm_destroy(m);
  return 0;
}

int tpx__sock_close_send(tpx_net_t *net, void *comm) {
  return comm_close(net, comm, TPX_SK_SEND, "closeSend");
}

int tpx__sock_close_recv(tpx_net_t *net, void *comm) {
  return comm_close(net, comm, TPX_SK_RECV, "closeRecv");
}

/* ---- posting ------------------------------------------------------------------ */

/* Slot for the next request, or NULL with *rc set (0 = back-pressure). */
static tpx_sock_req_t *req_alloc(tpx_sock_comm_t *m, const char *fn, int *rc) {
  uint64_t posted = atomic_load_explicit(&m->posted, memory_order_relaxed);
  if (posted - m->tail >= (uint64_t)m->limit) {
    if (m->strict)
      *rc = tpx_err_quiet(TPX_EINTERNAL,
                    "%s: unable to allocate requests: %d already in flight on %s %s"
                    " (strict mode: the TCPX plugin's limit)",
                    fn, m->limit, kind_name(m->kind), m->peer);
    else
      *rc = 0;
    return NULL;
  }
  tpx_sock_req_t *r = slot(m, posted);
  r->seq = posted;
  r->state = TPX_SR_INFLIGHT;
  r->msg_size = 0;
  r->stage_end = 0;
  r->iovcnt = 0;
  atomic_store_explicit(&r->err, 0, memory_order_relaxed);
  return r;
}

static inline void *req_token(tpx_sock_comm_t *m, uint64_t seq) {
  uint64_t t =
      ((m->token & 0xffffffffu) << 48) | (((m->token >> 32) & 0xffffu) << 32) | (seq & 0xffffffffu);
  return (void *)(uintptr_t)t;
}

static int check_buffer(const void *data, size_t size, const char *fn) {
  if (size > TPX_SOCK_MAX_MSG)
    return tpx_err_quiet(TPX_EINVAL, "%s: size %zu exceeds the maximum message of %llu bytes", fn, size,
                   (unsigned long long)TPX_SOCK_MAX_MSG);
  if (data == NULL && size > 0)
    return tpx_err_quiet(TPX_EINVAL, "%s: NULL buffer of %zu bytes", fn, size);
  if (size > 0 && (uintptr_t)data + size < (uintptr_t)data)
    return tpx_err_quiet(TPX_EINVAL, "%s: buffer %p + %zu wraps the address space", fn, data, size);
  return 0;
}

/* Unpack mode: at most 2048 pages of 4 KiB per request, as the TCPX plugin. */
static int check_unpack_size(tpx_sock_comm_t *m, size_t size, const char *fn) {
  if (m->sn->unpack && size > TPX_SOCK_UNPACK_MAX_MSG)
    return tpx_err_quiet(TPX_EINVAL,
                   "%s: %zu bytes on %s %s: unpack mode (TCPX contract) takes at most %zu bytes"
                   " (2048 pages of 4 KiB) per request; use chunks <= 4 MiB",
                   fn, size, kind_name(m->kind), m->peer, TPX_SOCK_UNPACK_MAX_MSG);
  return 0;
}

/* Unpack mode with a GPU: the GPU of a send buffer in CUDA memory, else -1.
 * A memory handle says it; without one the pointer is asked. */
static int send_gpu(tpx_sock_net_t *sn, void *mh, const void *data, size_t size) {
  if (!sn->gpu_ok || size == 0) return TPX_GPU_NONE;
  if (mh != NULL) {
    tpx_sock_mr_t *mr = tpx__sock_reg_get(&sn->reg, (uint64_t)(uintptr_t)mh, TPX_SK_MR, NULL);
    return mr != NULL && mr->type == TPX_PTR_CUDA ? mr->gpu : TPX_GPU_NONE;
  }
  int gpu = -1;
  if (!tpx__gpu_is_device_ptr(data, &gpu)) return TPX_GPU_NONE;
  return gpu >= 0 ? gpu : 0; /* managed memory may name no GPU */
}

/* NCCL_DYNAMIC_CHUNK_SIZE 0 (or unset, before the engine filled it in): the
 * plugin's tcpxCommProgress cuts the send into pieces of
 * min(chunk, remaining) = 0 bytes forever, so it never finishes, and neither
 * does anything after it on the comm (the plugin works on the oldest active
 * request only). Emulated by never putting it, or what follows, on the wire.
 * m->mu held. */
static void send_stall(tpx_sock_comm_t *m, tpx_sock_req_t *r) {
  atomic_store_explicit(&r->pending, 1, memory_order_relaxed);
  atomic_store_explicit(&m->posted, r->seq + 1, memory_order_release);
  if (m->stall_seq != UINT64_MAX) return;
  m->stall_seq = r->seq;
  TPX_WARN("isend to %s: NCCL_DYNAMIC_CHUNK_SIZE is 0 or unset: the TCPX plugin cuts this %zu-byte "
           "send into 0-byte pieces, and it never finishes (emulated; docs/CONFIG.md)",
           m->peer, r->size);
}

static void send_queue(tpx_sock_comm_t *m, tpx_sock_req_t *r);

int tpx__sock_isend(tpx_net_t *net, void *comm, void *data, size_t size, int tag, void *mh,
                    void **request) {
  (void)tag; /* maxRecvs is 1: matching is FIFO per comm */
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "isend");
  if (sn == NULL) return TPX_EINVAL;
  if (request == NULL) return tpx_err_quiet(TPX_EINVAL, "isend: request pointer is NULL");
  int rc = 0;
  tpx_sock_comm_t *m = comm_get(sn, comm, TPX_SK_SEND, "isend", &rc);
  if (m == NULL) return rc;
  if ((rc = check_buffer(data, size, "isend")) != 0) return rc;
  if ((rc = tpx__sock_mr_check(sn, mh, data, size, "isend")) != 0) return rc;
  int gpu = -1;
  if (sn->unpack) {
    if ((rc = check_unpack_size(m, size, "isend")) != 0) return rc;
    gpu = send_gpu(sn, mh, data, size);
  }
  pthread_mutex_lock(&m->mu);
  tpx_sock_req_t *r = req_alloc(m, "isend", &rc);
  if (r == NULL) {
    pthread_mutex_unlock(&m->mu);
    *request = NULL;
    return rc;
  }
  if (gpu >= 0) {
    /* CUDA memory: the bytes go on the wire from a pinned host copy. */
    void *staged = NULL;
    rc = tpx__sock_stage_copy(m, r, gpu, data, size, &staged);
    if (rc != 0) {
      r->state = TPX_SR_FREE; /* never published */
      pthread_mutex_unlock(&m->mu);
      *request = NULL;
      return rc > 0 ? 0 : rc; /* staging full: back-pressure, retry later */
    }
    data = staged;
  }
  uint64_t seq = r->seq;
  r->buf = data;
  r->size = size;
  if (sn->unpack && ((size > 0 && sn->tcpx_chunk == 0) || m->stall_seq != UINT64_MAX)) {
    send_stall(m, r);
    *request = req_token(m, seq);
    pthread_mutex_unlock(&m->mu);
    return 0;
  }
  send_queue(m, r);
  *request = req_token(m, seq);
  pthread_mutex_unlock(&m->mu);
  return 0;
}

/* Queue the parts of send r (buf or pieces set, m->mu held) and publish it.
 * Small messages whole on socket 0; larger ones cut over the data sockets,
 * first part on the next socket in turn (wire.h: the receiver follows the
 * part headers). */
static void send_queue(tpx_sock_comm_t *m, tpx_sock_req_t *r) {
  uint64_t seq = r->seq;
  size_t size = r->size;
  size_t per = size;
  int np = tpx__sock_split(size, m->nsocks, seq - m->tail, &per);
  int first = np == 0 ? 0 : 1 + (int)(m->rot % (unsigned)m->nsocks);
  if (np == 0)
    np = 1;
  else
    m->rot += (unsigned)np;
  atomic_store_explicit(&r->pending, (uint64_t)np, memory_order_relaxed);
  for (int j = 0; j < np; j++) {
    tpx_sock_conn_t *d = first == 0 ? &m->conns[0] : &m->conns[1 + (first - 1 + j) % m->nsocks];
    uint64_t head = atomic_load_explicit(&d->parts_head, memory_order_relaxed);
    tpx_sock_part_t *p = &d->parts[head % TPX_SOCK_RING];
    size_t off = (size_t)j * per;
    p->req = r;
    p->buf = r->iovcnt ? NULL : r->buf + off;
    p->iov = r->iov;
    p->iovcnt = r->iovcnt;
    p->off = off;
    p->len = TPX_MIN(per, size - off);
    p->keep = p->len;
    p->seq = seq;
    p->pages = NULL;
    tpx__wire_part_encode(p->hdr, seq, size, off, p->len);
    /* Kick only a socket whose queue was empty: with parts still queued its
     * thread is sending (and reads the head again after each part) or waits
     * for room (EPOLLOUT runs it). Seq-cst store then load here, store of the
     * tail then load of the head there: one of us sees the other. */
    atomic_store(&d->parts_head, head + 1);
    if (atomic_load(&d->parts_tail) == head) tpx__sock_io_kick(d);
  }
  atomic_store_explicit(&m->posted, seq + 1, memory_order_release);
}

/* Whether a receive's buffer is device memory: its registration says CUDA, or,
 * unregistered, a pointer query says so. */
static int recv_into_device(tpx_sock_net_t *sn, void *mh, void *data) {
  if (mh != NULL) {
    tpx_sock_mr_t *mr = tpx__sock_reg_get(&sn->reg, (uint64_t)(uintptr_t)mh, TPX_SK_MR, NULL);
    return mr != NULL && mr->type == TPX_PTR_CUDA;
  }
  return tpx__gpu_is_device_ptr(data, NULL);
}

static void recv_publish(tpx_sock_comm_t *m, tpx_sock_req_t *r);

int tpx__sock_irecv(tpx_net_t *net, void *comm, int n, void **data, size_t *sizes, int *tags,
                    void **mhandles, void **request) {
  (void)tags;
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "irecv");
  if (sn == NULL) return TPX_EINVAL;
  if (request == NULL) return tpx_err_quiet(TPX_EINVAL, "irecv: request pointer is NULL");
  int rc = 0;
  tpx_sock_comm_t *m = comm_get(sn, comm, TPX_SK_RECV, "irecv", &rc);
  if (m == NULL) return rc;
  if (n != 1)
    return tpx_err_quiet(TPX_EINVAL,
                   "irecv: n = %d, but this transport takes 1 buffer per receive (maxRecvs 1)", n);
  if (data == NULL || sizes == NULL)
    return tpx_err_quiet(TPX_EINVAL, "irecv: %s array is NULL", data == NULL ? "data" : "sizes");
  if ((rc = check_buffer(data[0], sizes[0], "irecv")) != 0) return rc;
  if ((rc = tpx__sock_mr_check(sn, mhandles ? mhandles[0] : NULL, data[0], sizes[0], "irecv")) != 0)
    return rc;
  if ((rc = check_unpack_size(m, sizes[0], "irecv")) != 0) return rc;
  int host_buf =
      sn->host_recv_stalls && !recv_into_device(sn, mhandles ? mhandles[0] : NULL, data[0]);
  pthread_mutex_lock(&m->mu);
  tpx_sock_req_t *r = req_alloc(m, "irecv", &rc);
  if (r == NULL) {
    pthread_mutex_unlock(&m->mu);
    *request = NULL;
    return rc;
  }
  uint64_t seq = r->seq;
  if (host_buf && m->stall_seq == UINT64_MAX) {
    m->stall_seq = seq;
    TPX_WARN("irecv from %s: receive %llu into host memory %p on an UNPACK comm: the TCPX plugin's "
             "helper thread fails its recv() on the devmem socket and exits, so this receive and "
             "every later request of the comm will never complete (emulated)",
             m->peer, (unsigned long long)seq, data[0]);
  }
  r->buf = data[0];
  r->size = sizes[0];
  recv_publish(m, r);
  *request = req_token(m, seq);
  pthread_mutex_unlock(&m->mu);
  return 0;
}

/* Publish receive r (buffer or pieces set, m->mu held). */
static void recv_publish(tpx_sock_comm_t *m, tpx_sock_req_t *r) {
  uint64_t seq = r->seq;
  /* A thread may still look at this slot for a part of the receive that had
   * it before (a duplicate, rejected): reset under rx_mu. */
  pthread_mutex_lock(&m->rx_mu);
  r->rx_seq = seq;
  r->rx_msize = 0;
  r->rx_covered = 0;
  r->rx_nparts = 0;
  atomic_store_explicit(&r->pending, TPX_SOCK_UNSIZED, memory_order_relaxed);
  pthread_mutex_unlock(&m->rx_mu);
  /* Publish, then wake the sockets stopped at a part of this receive: they
   * announce the wait before looking at `posted` again (recv_header). */
  atomic_store(&m->posted, seq + 1);
  for (int i = 0; i <= m->nsocks; i++)
    if (atomic_load(&m->conns[i].wait_post)) tpx__sock_io_kick(&m->conns[i]);
  recv_fail_lost(m); /* after a socket ended, this receive may be one that cannot come */
}

/* The comm of an isendv / irecvv and its checked list: 0 with *mp and
 * *total, or an error (logged). Strict mode keeps the TCPX plugin's one
 * buffer per request (caps.iov is 0 there); unpack mode has no such ops. */
static int vec_args(tpx_sock_net_t *sn, void *comm, int kind, const struct iovec *iov, int iovcnt,
                    void **mhandles, void **request, const char *fn, tpx_sock_comm_t **mp,
                    size_t *total) {
  if (request == NULL) return tpx_err_quiet(TPX_EINVAL, "%s: request pointer is NULL", fn);
  int rc = 0;
  tpx_sock_comm_t *m = comm_get(sn, comm, kind, fn, &rc);
  if (m == NULL) return rc;
  if (m->strict || sn->unpack)
    return tpx_err_quiet(TPX_EUSAGE, "%s: %s %s is in %s mode, which takes one buffer per request", fn,
                   kind_name(m->kind), m->peer, sn->unpack ? "unpack" : "strict");
  if ((rc = tpx__sock_iov_check(iov, iovcnt, total, fn)) != 0) return rc;
  for (int i = 0; mhandles && i < iovcnt; i++)
    if ((rc = tpx__sock_mr_check(sn, mhandles[i], iov[i].iov_base, iov[i].iov_len, fn)) != 0)
      return rc;
  *mp = m;
  return 0;
}

/* A slot for a vectored request with its list copied, m->mu held: r, or
 * NULL with *rc (0 = back-pressure). */
static tpx_sock_req_t *vec_alloc(tpx_sock_comm_t *m, const struct iovec *iov, int iovcnt,
                                 size_t total, const char *fn, int *rc) {
  tpx_sock_req_t *r = req_alloc(m, fn, rc);
  if (r == NULL) return NULL;
  if ((*rc = tpx__sock_req_set_iov(r, iov, iovcnt)) != 0) {
    r->state = TPX_SR_FREE; /* never published */
    *rc = tpx_err_quiet(*rc, "%s: %s", fn, tpx_last_error());
    return NULL;
  }
  r->buf = NULL;
  r->size = total;
  return r;
}

/* isendv / irecvv: one request over the pieces, queued (send) or published
 * (receive) as one buffer of their total would be. */
static int vec_post(tpx_net_t *net, void *comm, int kind, const struct iovec *iov, int iovcnt,
                    void **mhandles, void **request, const char *fn) {
  tpx_sock_net_t *sn = tpx__sock_net_of(net, fn);
  if (sn == NULL) return TPX_EINVAL;
  tpx_sock_comm_t *m = NULL;
  size_t total = 0;
  int rc = vec_args(sn, comm, kind, iov, iovcnt, mhandles, request, fn, &m, &total);
  if (rc != 0) return rc;
  pthread_mutex_lock(&m->mu);
  tpx_sock_req_t *r = vec_alloc(m, iov, iovcnt, total, fn, &rc);
  *request = r ? req_token(m, r->seq) : NULL;
  if (r && kind == TPX_SK_SEND)
    send_queue(m, r);
  else if (r)
    recv_publish(m, r);
  pthread_mutex_unlock(&m->mu);
  return rc;
}

int tpx__sock_isendv(tpx_net_t *net, void *comm, const struct iovec *iov, int iovcnt, int tag,
                     void **mhandles, void **request) {
  (void)tag; /* FIFO per comm, as isend */
  return vec_post(net, comm, TPX_SK_SEND, iov, iovcnt, mhandles, request, "isendv");
}

int tpx__sock_irecvv(tpx_net_t *net, void *comm, const struct iovec *iov, int iovcnt, int tag,
                     void **mhandles, void **request) {
  (void)tag;
  return vec_post(net, comm, TPX_SK_RECV, iov, iovcnt, mhandles, request, "irecvv");
}

int tpx__sock_iflush(tpx_net_t *net, void *comm, int n, void **data, size_t *sizes, void **mhandles,
                     void **request) {
  (void)data;
  (void)sizes;
  (void)mhandles;
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "iflush");
  if (sn == NULL) return TPX_EINVAL;
  if (request == NULL) return tpx_err_quiet(TPX_EINVAL, "iflush: request pointer is NULL");
  int rc = 0;
  if (comm_get(sn, comm, TPX_SK_RECV, "iflush", &rc) == NULL) return rc;
  if (n != 1) return tpx_err_quiet(TPX_EINVAL, "iflush: n = %d (maxRecvs 1)", n);
  *request = NULL; /* host memory: nothing to flush */
  return 0;
}

/* ---- test ---------------------------------------------------------------------- */

static void req_release(tpx_sock_comm_t *m, tpx_sock_req_t *r) {
  r->state = TPX_SR_RELEASED;
  if (m->upk) tpx__sock_upk_release(m, r->seq); /* its bounce pages and slot */
  if (r->stage_end) tpx__sock_stage_release(m, r);
  if (r->seq == m->thead) m->thead++;
  uint64_t posted = atomic_load_explicit(&m->posted, memory_order_relaxed);
  while (m->tail < posted && slot(m, m->tail)->state == TPX_SR_RELEASED) {
    slot(m, m->tail)->state = TPX_SR_FREE;
    m->tail++;
  }
  if (m->thead < m->tail) m->thead = m->tail;
}

static const char *comm_errmsg(tpx_sock_comm_t *m) {
  if (atomic_load_explicit(&m->errset, memory_order_acquire) == 2) return m->errmsg;
  return "peer closed";
}

/* The request behind a test() token, in flight and testable: 0 with m->mu
 * held, or an error (nothing held). */
static int test_lookup(tpx_sock_net_t *sn, void *request, tpx_sock_comm_t **mp, int *kindp,
                       tpx_sock_req_t **rp) {
  uint64_t t = (uint64_t)(uintptr_t)request;
  if (request == NULL || (t >> 48) == 0)
    return tpx_err_quiet(TPX_EINVAL, "test: %p is not a request of this transport", request);
  uint64_t ctok = (((t >> 32) & 0xffffu) << 32) | (t >> 48);
  int kind = TPX_SK_NONE;
  tpx_sock_comm_t *m = tpx__sock_reg_get(&sn->reg, ctok, TPX_SK_NONE, &kind);
  if (m == NULL || (kind != TPX_SK_SEND && kind != TPX_SK_RECV))
    return tpx_err_quiet(TPX_EINVAL, "test: request %p belongs to no open comm (comm closed?)", request);
  pthread_mutex_lock(&m->mu);
  uint32_t seq32 = (uint32_t)t;
  tpx_sock_req_t *r = slot(m, seq32);
  if (r->state != TPX_SR_INFLIGHT || (uint32_t)r->seq != seq32) {
    int held = r->state == TPX_SR_DONE && (uint32_t)r->seq == seq32;
    pthread_mutex_unlock(&m->mu);
    if (held)
      return tpx_err_quiet(TPX_EINVAL,
                     "test: request %u of %s %s was already reported done; it is held until"
                     " irecvConsumed (unpack mode)",
                     seq32, kind_name(kind), m->peer);
    return tpx_err_quiet(TPX_EINVAL, "test: request %p of %s %s is not in flight (already completed?)",
                   request, kind_name(kind), m->peer);
  }
  if (m->strict && r->seq != m->thead) {
    unsigned long long head = (unsigned long long)m->thead;
    pthread_mutex_unlock(&m->mu);
    return tpx_err_quiet(TPX_EINTERNAL,
                   "test: request %u of %s %s is not the oldest in flight (%llu is); strict mode"
                   " (TCPX) only tests the head",
                   seq32, kind_name(kind), m->peer, head);
  }
  *mp = m;
  *kindp = kind;
  *rp = r;
  return 0;
}

int tpx__sock_test(tpx_net_t *net, void *request, int *done, size_t *sizes) {
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "test");
  if (sn == NULL) return TPX_EINVAL;
  if (done == NULL) return tpx_err_quiet(TPX_EINVAL, "test: done pointer is NULL");
  *done = 0;
  tpx_sock_comm_t *m = NULL;
  tpx_sock_req_t *r = NULL;
  int kind = TPX_SK_NONE;
  int rc = test_lookup(sn, request, &m, &kind, &r);
  if (rc != 0) return rc;
  uint32_t seq32 = (uint32_t)r->seq;
  int closed = m->strict && atomic_load(&m->peer_closed);
  /* A stalled comm (host-memory receive, see irecv) never completes again. */
  if (atomic_load_explicit(&r->pending, memory_order_acquire) != 0 || r->seq >= m->stall_seq) {
    int yield = ++m->misses % TEST_YIELD_EVERY == 0;
    pthread_mutex_unlock(&m->mu);
    /* A caller that polls test() in a tight loop without ever yielding would
     * keep a core from the I/O threads on a small machine: give it up now and
     * then. Only rarely: NCCL's proxy thread, the engine and our tools yield
     * or nap themselves when nothing progressed, and a yield here on every
     * miss doubles their context switches. */
    if (yield) sched_yield();
    /* TCPX: rc 2 while the peer is gone and the data may still be arriving. */
    if (closed)
      return tpx_err_quiet(TPX_ESYSTEM, "test: %s %s: peer closed, request %u not complete yet",
                           kind_name(kind), m->peer, seq32);
    return 0;
  }
  m->misses = 0;
  int err = atomic_load(&r->err);
  if (closed && err == TPX_EREMOTE) {
    /* The plugin: once its control socket reads end-of-file, every test of a
     * request that is not done returns 2 again (tcpxTest -> tcpxCommProgress
     * -> socketProgressOpt): permanent, never another error. The request
     * stays until the comm is closed. */
    pthread_mutex_unlock(&m->mu);
    return tpx_err_quiet(TPX_ESYSTEM, "test: %s %s: peer closed; request %u can no longer complete",
                         kind_name(kind), m->peer, seq32);
  }
  size_t size = kind == TPX_SK_SEND ? r->size : r->msg_size;
  size_t cap = r->size;
  if (m->upk && (err == 0 || err == TPX_ETRUNC)) {
    /* Unpack mode: the entries are in; publish the count and keep the slot
     * and its pages until irecvConsumed. */
    tpx__sock_upk_publish(m, r->seq);
    r->state = TPX_SR_DONE;
    m->thead = r->seq + 1;
  } else {
    req_release(m, r);
  }
  pthread_mutex_unlock(&m->mu);
  if (err == 0 || err == TPX_ETRUNC) {
    *done = 1;
    if (sizes && !(m->strict && kind == TPX_SK_RECV)) *sizes = size;
  }
  if (err == TPX_ETRUNC)
    return tpx_err_quiet(TPX_ETRUNC,
                   "test: recv comm from %s: message %u of %zu bytes is larger than the"
                   " posted receive of %zu bytes (excess discarded, comm still usable)",
                   m->peer, seq32, size, cap);
  /* A complete request is rc 0 even once the peer closed: the plugin's test
   * returns its errors before it sets done (docs/UNPACK.md, "Peer close"). */
  if (err != 0) return tpx_err_quiet(err, "test: request %u failed: %s", seq32, comm_errmsg(m));
  return 0;
}

/* ---- irecvConsumed (unpack mode) -------------------------------------------------- */

int tpx__sock_irecv_consumed(tpx_net_t *net, void *comm, int n, void *request) {
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "irecvConsumed");
  if (sn == NULL) return TPX_EINVAL;
  int rc = 0;
  tpx_sock_comm_t *m = comm_get(sn, comm, TPX_SK_RECV, "irecvConsumed", &rc);
  if (m == NULL) return rc;
  if (m->upk == NULL)
    return tpx_err_quiet(TPX_EUSAGE, "irecvConsumed: recv comm from %s is not in unpack mode", m->peer);
  if (n != 1) return tpx_err_quiet(TPX_EINVAL, "irecvConsumed: n = %d (maxRecvs 1)", n);
  uint64_t t = (uint64_t)(uintptr_t)request;
  uint64_t ctok = (((t >> 32) & 0xffffu) << 32) | (t >> 48);
  if (request == NULL || (t >> 48) == 0 || ctok != m->token)
    return tpx_err_quiet(TPX_EINVAL, "irecvConsumed: %p is not a request of recv comm from %s", request,
                   m->peer);
  uint32_t seq32 = (uint32_t)t;
  pthread_mutex_lock(&m->mu);
  tpx_sock_req_t *r = slot(m, seq32);
  if (r->state != TPX_SR_DONE || (uint32_t)r->seq != seq32) {
    int inflight = r->state == TPX_SR_INFLIGHT && (uint32_t)r->seq == seq32;
    pthread_mutex_unlock(&m->mu);
    return tpx_err_quiet(TPX_EINVAL, "irecvConsumed: request %u of recv comm from %s %s", seq32, m->peer,
                   inflight ? "has not been reported done by test yet"
                            : "is not held (already consumed, failed, or never posted)");
  }
  if (r->seq != m->tail) {
    unsigned long long head = (unsigned long long)m->tail;
    pthread_mutex_unlock(&m->mu);
    return tpx_err_quiet(TPX_EINTERNAL,
                   "irecvConsumed: request %u of recv comm from %s consumed out of order: %llu"
                   " is the oldest held receive (FIFO, as the TCPX plugin)",
                   seq32, m->peer, head);
  }
  req_release(m, r); /* pages and slot back; may wake a stalled control thread */
  pthread_mutex_unlock(&m->mu);
  return 0;
}
