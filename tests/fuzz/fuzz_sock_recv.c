/* The transport's receive state machine (src/sock/comm.c), fed by a peer
 * that may send anything: the input is a script of steps over a recv comm
 * of 1..4 data sockets (sock_drive.h): post a receive (any capacity up to
 * 64 KiB, allocated to the byte so ASan sees any write past it; in default
 * mode also as a list of pieces, irecvv, each allocated so), write raw
 * bytes or a part header of chosen fields (plus payload) to one socket, run
 * one socket or all, end one socket (EOF), test a request. Default, strict
 * (the TCPX plugin's rules) or unpack mode (the TCPX receive contract:
 * bounce pages admitted in order, receives held until irecvConsumed) per
 * input.
 *
 * Checked: no sanitizer report; test() answers only 0 (not done, or done),
 * TPX_ETRUNC (done), a failure (not done), or in strict mode
 * TPX_ESYSTEM (peer closed) / TPX_EINTERNAL (not the head); a receive
 * reported done has a size that fits its receive unless TPX_ETRUNC; and
 * liveness: once every socket ended and ran, no posted receive waits any
 * more (done or failed: recv_fail_lost), none forever. */
#include "sock_drive.h"

#define MAX_POSTS 48
#define MAX_CAP 65536

#define MAX_PIECES 5

struct posted {
  void *req;
  uint8_t *buf;
  size_t cap;
  int finished;
  uint8_t
      *piece[MAX_PIECES]; /* a vectored receive: each piece allocated to the byte (buf unused) */
  int npieces;
};

/* A vectored receive of cap bytes (default mode): 1..4 pieces, an empty one
 * among them when the shape says so, each its own allocation. */
static void *post_pieces(struct drive *d, struct posted *p, uint8_t shape) {
  struct iovec iov[MAX_PIECES];
  int n = 1 + (shape >> 1) % 4;
  size_t left = p->cap;
  for (int i = 0; i < n; i++) {
    size_t l = i == n - 1 ? left : left / (size_t)(n - i) + (shape >> 3 & 1);
    if (l > left) l = left;
    uint8_t *b = malloc(l ? l : 1);
    FUZZ_CHECK(b);
    p->piece[p->npieces] = b;
    iov[p->npieces++] = (struct iovec){l ? b : NULL, l};
    left -= l;
    if (i == 0 && (shape & 0x20)) { /* an empty piece */
      p->piece[p->npieces] = NULL;
      iov[p->npieces++] = (struct iovec){NULL, 0};
    }
  }
  return drive_postv(d, iov, p->npieces);
}

struct run {
  struct drive d;
  int strict, unpack;
  struct posted p[MAX_POSTS];
  int np;
  uint64_t seq[DRIVE_MAX_NSOCKS + 1]; /* next header sequence per socket (steered by the input) */
};

/* test() on post k: 1 when it is finished (done or failed). */
static int test_one(struct run *r, int k) {
  struct posted *p = &r->p[k];
  if (p->finished) return 1;
  int done = 0;
  size_t size = 0;
  int rc = tpx__sock_test(r->d.net, p->req, &done, &size);
  if (rc == TPX_EINTERNAL) { /* strict: only the oldest request in flight */
    FUZZ_CHECK(r->strict && !done);
    return 0;
  }
  if (rc == TPX_ESYSTEM) { /* strict: peer closed, may still complete or never */
    FUZZ_CHECK(r->strict && !done);
    return 0;
  }
  if (rc == 0 && !done) return 0;
  if (rc == 0 || rc == TPX_ETRUNC) {
    FUZZ_CHECK(done);
    if (!r->strict) FUZZ_CHECK(rc == TPX_ETRUNC ? size > p->cap : size <= p->cap);
    /* unpack: held until consumed, in order (test answers the oldest only) */
    if (r->unpack) FUZZ_CHECK(tpx__sock_irecv_consumed(r->d.net, r->d.comm, 1, p->req) == 0);
  } else {
    FUZZ_CHECK(!done && rc < 0);
  }
  p->finished = 1;
  return 1;
}

static void step_post(struct run *r, struct fuzz_in *in) {
  size_t cap = fuzz_u16(in) % (MAX_CAP + 1);
  if (r->np == MAX_POSTS || (uint64_t)r->np - r->d.m->tail >= (uint64_t)r->d.m->limit) return;
  struct posted *p = &r->p[r->np];
  uint8_t shape = r->strict ? 0 : fuzz_u8(in);
  p->cap = cap;
  if (shape & 1) {
    p->req = post_pieces(&r->d, p, shape);
  } else {
    p->buf = malloc(cap ? cap : 1);
    FUZZ_CHECK(p->buf);
    p->req = drive_post(&r->d, p->buf, cap);
  }
  FUZZ_CHECK(p->req != NULL);
  r->np++;
}

/* A part header whose fields come from the input, mostly near valid ones. */
static void step_part(struct run *r, struct fuzz_in *in, int s) {
  uint8_t h[TPX_WIRE_PART_BYTES];
  uint8_t how = fuzz_u8(in);
  uint64_t seq = how & 1 ? fuzz_u32(in) : r->seq[s] + (how >> 1 & 3);
  uint64_t size = how & 8 ? fuzz_take(in, 8) : fuzz_u16(in) % (MAX_CAP + 4097);
  uint64_t off = how & 16 ? fuzz_take(in, 8) : (uint64_t)(fuzz_u8(in) % 17) * 4096;
  uint64_t len = how & 32 ? fuzz_take(in, 8) : size > off ? size - off : 0;
  if ((how & 32) == 0 && (how & 64)) len = len > 4096 ? len - 4096 : len; /* a prefix */
  tpx__wire_part_encode(h, seq, size, off, len);
  if (how & 128) h[fuzz_u8(in) % sizeof(h)] ^= fuzz_u8(in); /* one byte off */
  r->seq[s] = seq + 1;
  drive_write(&r->d, s, h, sizeof(h));
  size_t pay = fuzz_u16(in) % (MAX_CAP + 1), got;
  if (pay > len) pay = (size_t)len;
  const uint8_t *b = fuzz_bytes(in, pay < 256 ? pay : 256, &got);
  /* payload: input bytes, then a fill (the kernel buffer holds ~200 KiB) */
  drive_write(&r->d, s, b, got);
  static const uint8_t fill[4096];
  for (size_t left = pay - got; left > 0;) {
    size_t k = left < sizeof(fill) ? left : sizeof(fill);
    if (drive_write(&r->d, s, fill, k) != k) break;
    left -= k;
  }
}

static void step(struct run *r, struct fuzz_in *in) {
  uint8_t op = fuzz_u8(in);
  int s = (op >> 4) % (r->d.nsocks + 1);
  switch (op & 7) {
  case 0: step_post(r, in); break;
  case 1: {
    size_t got;
    const uint8_t *b = fuzz_bytes(in, fuzz_u8(in), &got);
    drive_write(&r->d, s, b, got);
    break;
  }
  case 2: step_part(r, in, s); break;
  case 3:
    for (int k = fuzz_u8(in) % 8; k >= 0; k--)
      drive_run(&r->d, s);
    break;
  case 4: drive_settle(&r->d); break;
  case 5: drive_eof(&r->d, s); break;
  case 6:
    if (r->np) test_one(r, fuzz_u8(in) % r->np);
    break;
  default:
    step_part(r, in, s);
    drive_settle(&r->d);
    break;
  }
}

static void fuzz_setup(void) {
  drive_net(DRIVE_DEFAULT);
  drive_net(DRIVE_STRICT);
  drive_net(DRIVE_UNPACK);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fuzz_in in = {data, size, 0};
  static struct run r;
  memset(&r, 0, sizeof(r));
  uint8_t mode = fuzz_u8(&in);
  r.unpack = mode >> 3 & 1;
  r.strict = (mode & 1) || r.unpack;
  drive_open(&r.d,
             r.unpack   ? DRIVE_UNPACK
             : r.strict ? DRIVE_STRICT
                        : DRIVE_DEFAULT,
             1 + (mode >> 1) % DRIVE_MAX_NSOCKS);
  for (int steps = 0; fuzz_more(&in) && steps < 256; steps++)
    step(&r, &in);
  /* Every socket ends. Then comm.c's promise (recv_fail_lost): once a
   * socket has ended and every other one has ended or stopped at a part
   * of a later message s, no receive before s waits any more (done or
   * failed); test() says which, in order (strict mode answers for the
   * oldest request only, and once the peer closed it may answer "peer
   * closed" for good, TCPX's rc 2). A socket stopped at a later message
   * does not read its EOF; when every socket stopped so and none ended,
   * the receives before them wait for the caller's deadline (a lying
   * peer only: an honest one sends every message's parts before a later
   * one's on each socket). */
  for (int i = 0; i <= r.d.nsocks; i++)
    drive_eof(&r.d, i);
  drive_settle(&r.d);
  uint64_t lim = drive_lost_below(&r.d);
  for (int k = 0; k < r.np && (uint64_t)k < lim; k++) {
    if (r.p[k].finished) continue;
    FUZZ_CHECK(atomic_load(&r.d.m->reqs[k % TPX_SOCK_RING].pending) == 0);
    int fin = test_one(&r, k);
    if (r.strict && !fin) break;
    FUZZ_CHECK(fin);
  }
  drive_close(&r.d);
  for (int k = 0; k < r.np; k++) {
    free(r.p[k].buf);
    for (int i = 0; i < r.p[k].npieces; i++)
      free(r.p[k].piece[i]);
  }
  return 0;
}
