/* The engine's control stream (src/engine/wire.c), as a peer sends it: the
 * input is the byte stream of a control connection. Each frame the framer
 * accepts goes to the decoder of its type, as dispatch.c routes it (MSG_AUTH
 * MSG_RELISTEN and MSG_PING included); a frame a decoder accepts must encode back to exactly its own bytes (one encoding
 * per message: nothing a decoder accepts is lost or invented), and every
 * pointer a decoder hands out is read whole (ASan checks it lies in the
 * frame). A WRITE or READ then goes through what the target derives from it
 * (src/engine/plan.c, with the target's bounds on the entries): the chunks
 * of its plan, plain or packed, must cover every byte of every entry once,
 * in order, each at most `chunk` bytes, and seeking to a chunk must land
 * where walking to it does. The stream is also searched as transport setup
 * reads it (tpx__wire_find_error: only an ERROR is read ahead of frames
 * that wait), which must find exactly the first ERROR after whole frames. */
#include <string.h>

#include "engine/op.h"
#include "engine/plan.h"
#include "common/crc32c.h"
#include "engine/wire.h"
#include "fuzz.h"
#include "tpx/error.h"

#define WALK_MAX_CHUNKS 4096 /* plans with more chunks are counted, not walked */

static volatile uint8_t sink;

static void touch(const uint8_t *p, size_t n) {
  uint8_t x = 0;
  for (size_t i = 0; i < n; i++)
    x ^= p[i];
  sink = x;
}

/* The frame re-encoded by the encoder must be the frame. */
static void same_frame(struct tpx__wbuf *b, int rc, const uint8_t *frame, long n) {
  FUZZ_CHECK(rc == 0);
  FUZZ_CHECK(b->len == (size_t)n);
  FUZZ_CHECK(memcmp(b->p, frame, (size_t)n) == 0);
}

/* Walk the plan chunk by chunk: every byte of every entry once, in order. */
static void walk_plan(const struct tpx__xent *e, uint32_t n, uint32_t chunk, uint64_t pmax, uint64_t nchunks,
                      uint64_t total, uint64_t probe) {
  struct tpx__cursor c;
  tpx__plan_seek_packed(e, n, chunk, pmax, 0, &c);
  uint32_t at_e = 0;
  uint64_t at_off = 0, bytes = 0, idx = 0;
  while (at_e < n && e[at_e].len == 0)
    at_e++;
  struct tpx__cursor at_probe = {0};
  for (; idx < nchunks; idx++) {
    FUZZ_CHECK(c.e < n);
    FUZZ_CHECK(c.idx == idx);
    FUZZ_CHECK(c.e == at_e && c.off == at_off); /* starts where the last one ended */
    FUZZ_CHECK(c.len >= 1 && c.len <= chunk);
    if (idx == probe) at_probe = c;
    /* The chunk's bytes, entry by entry. */
    uint64_t left = c.len;
    int pieces = 0;
    while (left > 0) {
      FUZZ_CHECK(at_e < n);
      uint64_t here = e[at_e].len - at_off;
      uint64_t take = left < here ? left : here;
      if (pieces > 0) FUZZ_CHECK(pmax && at_off == 0 && take == e[at_e].len && take <= pmax);
      pieces++;
      left -= take;
      at_off += take;
      if (at_off == e[at_e].len) {
        at_e++;
        at_off = 0;
        while (at_e < n && e[at_e].len == 0)
          at_e++;
      }
    }
    FUZZ_CHECK(c.end - c.e >= (uint32_t)pieces); /* empty entries ride along */
    FUZZ_CHECK(tpx__plan_gathered(e, &c) == (pieces > 1));
    bytes += c.len;
    int more = tpx__plan_advance(e, n, chunk, &c, 1);
    FUZZ_CHECK(more == (idx + 1 < nchunks));
  }
  FUZZ_CHECK(at_e == n && bytes == total);
  if (probe < nchunks) { /* seeking lands where walking did */
    struct tpx__cursor s;
    tpx__plan_seek_packed(e, n, chunk, pmax, probe, &s);
    FUZZ_CHECK(s.e == at_probe.e && s.off == at_probe.off && s.len == at_probe.len &&
               s.end == at_probe.end);
  }
}

static void on_rw(const struct tpx__wire_frame *f, const uint8_t *frame, long n) {
  struct tpx__wire_rw m;
  if (tpx__wire_get_rw(f, &m) != 0) return;
  touch(m.entries, (size_t)m.n * WIRE_ENTRY_BYTES);
  if (m.has_notif) touch(m.notif, m.notif_len);
  if (m.data) touch(m.data, m.inl_len);
  struct tpx__wire_entry *ents = m.n ? malloc(m.n * sizeof(*ents)) : NULL;
  struct tpx__xent *x = m.n ? calloc(m.n, sizeof(*x)) : NULL;
  FUZZ_CHECK(m.n == 0 || (ents && x));
  uint64_t total = 0, inl = 0;
  int fits = 1; /* the target's bound (target.c): at most OP_MAX_BYTES in all */
  for (uint32_t i = 0; i < m.n; i++) {
    tpx__wire_entry_at(m.entries, i, &ents[i]);
    inl += ents[i].len;
    if (ents[i].len > OP_MAX_BYTES || total + ents[i].len > OP_MAX_BYTES)
      fits = 0;
    else
      total += ents[i].len;
    x[i].len = ents[i].len;
  }
  if (m.data) FUZZ_CHECK(m.inl_len == inl);
  struct tpx__wbuf b = {0};
  struct iovec iov = {(void *)m.data, (size_t)m.inl_len};
  int write_inl = f->type == MSG_WRITE && m.inl;
  int rc = tpx__wire_put_rw_plan(&b, f->type, m.id, m.first_ch, m.chunk, ents, m.n,
                                 m.has_notif ? m.notif : NULL, m.notif_len, write_inl ? &iov : NULL,
                                 write_inl ? 1 : m.inl, m.pack_log2, m.sum_on);
  if (!m.sum_on || m.sum == tpx__crc32c(0, m.data, (size_t)m.inl_len)) same_frame(&b, rc, frame, n); /* re-encoding sums */
  tpx__wbuf_free(&b);
  if (fits) {
    uint64_t pmax = m.pack_log2 ? 1ull << m.pack_log2 : 0;
    uint64_t plain = tpx__plan_nchunks(x, m.n, m.chunk);
    uint64_t nchunks = tpx__plan_nchunks_packed(x, m.n, m.chunk, pmax);
    FUZZ_CHECK(plain != UINT64_MAX && nchunks <= plain);
    FUZZ_CHECK((nchunks == 0) == (total == 0));
    if (nchunks <= WALK_MAX_CHUNKS)
      walk_plan(x, m.n, m.chunk, pmax, nchunks, total, m.id % (nchunks + 1));
  }
  free(ents);
  free(x);
}

static void on_frame(const struct tpx__wire_frame *f, const uint8_t *frame, long n) {
  struct tpx__wbuf b = {0};
  switch (f->type) {
  case MSG_HELLO:
  case MSG_HELLO_ACK: {
    struct tpx__wire_hello h;
    if (tpx__wire_get_hello(f, &h) != 0) break;
    FUZZ_CHECK(h.nch >= 1 && h.nch <= WIRE_MAX_CHANNELS && memchr(h.name, 0, sizeof(h.name)));
    touch(h.handles, (size_t)h.nch * TPX_NET_HANDLE_BYTES);
    same_frame(&b, tpx__wire_put_hello(&b, f->type == MSG_HELLO_ACK, &h), frame, n);
    break;
  }
  case MSG_ERROR: {
    struct tpx__wire_error e;
    if (tpx__wire_get_error(f, &e) != 0) break;
    size_t len = f->len - 6; /* code, length, text */
    FUZZ_CHECK(len <= WIRE_MAX_ERRMSG && e.msg[len] == '\0');
    if (memchr(e.msg, 0, len) == NULL) /* embedded NULs are cut at the first by the encoder */
      same_frame(&b, tpx__wire_put_error(&b, e.code, e.msg), frame, n);
    break;
  }
  case MSG_CTS: {
    struct tpx__wire_cts c;
    if (tpx__wire_get_cts(f, &c) != 0) break;
    same_frame(&b, tpx__wire_put_cts(&b, &c), frame, n);
    break;
  }
  case MSG_SEND: {
    struct tpx__wire_send s;
    if (tpx__wire_get_send(f, &s) != 0) break;
    FUZZ_CHECK(s.inl ? s.data != NULL && s.len <= WIRE_MAX_INLINE : s.data == NULL);
    if (s.inl) touch(s.data, s.len);
    struct iovec iov = {(void *)s.data, s.inl ? (size_t)s.len : 0};
    int rc = tpx__wire_put_send(&b, &s, &iov, s.inl ? 1 : 0);
    if (s.inl != 2 || s.sum == tpx__crc32c(0, s.data, (size_t)s.len)) same_frame(&b, rc, frame, n);
    break;
  }
  case MSG_WRITE:
  case MSG_READ: on_rw(f, frame, n); break;
  case MSG_READ_DATA: {
    struct tpx__wire_read_data r;
    if (tpx__wire_get_read_data(f, &r) != 0) break;
    if (r.inl) touch(r.data, r.inl_len);
    struct iovec iov = {(void *)r.data, (size_t)r.inl_len};
    int rc = tpx__wire_put_read_data(&b, &r, &iov, r.inl ? 1 : 0);
    if (r.inl != 2 || r.sum == tpx__crc32c(0, r.data, (size_t)r.inl_len)) same_frame(&b, rc, frame, n);
    break;
  }
  case MSG_STATUS: {
    struct tpx__wire_status s;
    if (tpx__wire_get_status(f, &s) != 0) break;
    FUZZ_CHECK(s.status <= 0 && s.status >= TPX_EUNKNOWN);
    same_frame(&b, tpx__wire_put_status(&b, &s), frame, n);
    break;
  }
  case MSG_NOTIF: {
    struct tpx__wire_notif m;
    if (tpx__wire_get_notif(f, &m) != 0) break;
    FUZZ_CHECK(m.len <= TPX_NOTIF_MAX);
    touch(m.msg, m.len);
    same_frame(&b, tpx__wire_put_notif(&b, m.msg, m.len), frame, n);
    break;
  }
  case MSG_AUTH: {
    struct tpx__wire_auth a;
    if (tpx__wire_get_auth(f, &a) != 0) break;
    FUZZ_CHECK(a.step >= AUTH_CHALLENGE && a.step <= AUTH_PROOF);
    same_frame(&b, tpx__wire_put_auth(&b, &a), frame, n);
    break;
  }
  case MSG_RELISTEN: {
    struct tpx__wire_relisten r;
    if (tpx__wire_get_relisten(f, &r) != 0) break;
    FUZZ_CHECK(r.step >= RELISTEN_ASK && r.step <= RELISTEN_UP && r.ch < WIRE_MAX_CHANNELS);
    FUZZ_CHECK(r.code <= 0 && r.code > TPX_EUNKNOWN && (r.step == RELISTEN_HANDLE) == (r.handle != NULL));
    FUZZ_CHECK(f->len == WIRE_RELISTEN_BYTES + (r.handle ? TPX_NET_HANDLE_BYTES : 0));
    if (r.handle) touch(r.handle, TPX_NET_HANDLE_BYTES);
    same_frame(&b, tpx__wire_put_relisten(&b, &r), frame, n);
    break;
  }
  case MSG_SCHED: {
    struct tpx__wire_sched s;
    if (tpx__wire_get_sched(f, &s) != 0) break;
    FUZZ_CHECK(s.len >= 1 && s.len <= WIRE_MAX_CHANNELS && f->len == 1u + s.len);
    same_frame(&b, tpx__wire_put_sched(&b, &s), frame, n);
    break;
  }
  case MSG_CHAN: {
    struct tpx__wire_chan c;
    if (tpx__wire_get_chan(f, &c) != 0) break;
    FUZZ_CHECK(c.step >= CHAN_DOWN && c.step <= CHAN_RATE && c.ch < WIRE_MAX_CHANNELS);
    FUZZ_CHECK((c.step == CHAN_REJOIN) == (c.handle != NULL));
    if (c.step == CHAN_RESEND) FUZZ_CHECK(c.pat.len >= 1 && c.pat.len <= WIRE_MAX_CHANNELS);
    if (c.handle) touch(c.handle, TPX_NET_HANDLE_BYTES);
    same_frame(&b, tpx__wire_put_chan(&b, &c), frame, n);
    break;
  }
  case MSG_PING: {
    struct tpx__wire_ping m;
    if (tpx__wire_get_ping(f, &m) != 0) break;
    FUZZ_CHECK((m.kind == PING_ASK || m.kind == PING_ANSWER) && m.seq != 0 && f->len == WIRE_PING_BYTES);
    same_frame(&b, tpx__wire_put_ping(&b, &m), frame, n);
    break;
  }
  case MSG_SUM: {
    struct tpx__wire_sum m;
    if (tpx__wire_get_sum(f, &m) != 0) break;
    FUZZ_CHECK(m.what >= ST_WRITE && m.what <= ST_SEND && m.n >= 1 && m.n <= WIRE_MAX_SUMS && f->len == 11u + 8u * m.n);
    same_frame(&b, tpx__wire_put_sum(&b, &m), frame, n);
    break;
  }
  default: break; /* MSG_BYE: no payload to decode (dispatch.c ignores it) */
  }
  tpx__wbuf_free(&b);
}

static void fuzz_setup(void) {}

/* The ERROR read ahead during transport setup (tpx__wire_find_error): found
 * only at a frame boundary after whole frames that are not errors, itself
 * a whole ERROR frame that decodes to the same code and text. */
static void find_error(const uint8_t *data, size_t size) {
  struct tpx__wire_error e;
  size_t at = 0, off = 0;
  int r = tpx__wire_find_error(data, size, &e, &at);
  FUZZ_CHECK(r == 1 || r == 0 || r == TPX_EPROTO || r == TPX_EVERSION);
  if (r != 1) return;
  FUZZ_CHECK(at < size && memchr(e.msg, 0, sizeof(e.msg)) != NULL);
  struct tpx__wire_frame f;
  while (off < at) {
    long n = tpx__wire_frame_parse(data + off, size - off, &f);
    FUZZ_CHECK(n > 0 && f.type != MSG_ERROR);
    off += (size_t)n;
  }
  FUZZ_CHECK(off == at && tpx__wire_frame_parse(data + at, size - at, &f) > 0 && f.type == MSG_ERROR);
  struct tpx__wire_error again;
  FUZZ_CHECK(tpx__wire_get_error(&f, &again) == 0 && again.code == e.code && strcmp(again.msg, e.msg) == 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  size_t off = 0;
  find_error(data, size);
  while (off < size) {
    struct tpx__wire_frame f;
    long n = tpx__wire_frame_parse(data + off, size - off, &f);
    if (n <= 0) {
      FUZZ_CHECK(n == 0 || n == TPX_EPROTO || n == TPX_EVERSION);
      break;
    }
    FUZZ_CHECK((size_t)n == WIRE_HDR_BYTES + f.len && (size_t)n <= size - off);
    FUZZ_CHECK(f.payload == data + off + WIRE_HDR_BYTES);
    on_frame(&f, data + off, n);
    off += (size_t)n;
  }
  return 0;
}
