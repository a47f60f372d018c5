/* The byte accounting of the transport's receive side (src/sock/comm.c)
 * against the hostile-peers invariants: every byte written once, no
 * overlap, a receive complete only when whole. The input describes up to 8
 * messages over a recv comm of 1..4 data sockets (sock_drive.h), each one
 * cut cleanly (disjoint parts covering it, at most one per socket, 4 KiB
 * offsets) or by a liar (any ranges, sizes that disagree, duplicates,
 * parts cut short by an EOF, garbage), the receives' capacities (smaller
 * than the message: truncation), and the interleaving of writes, posts,
 * socket runs and tests. Every part's payload byte at message offset x is
 * pattern(message, x, part), distinct per part.
 *
 * Checked, for every receive test() reports done (rc 0 or TPX_ETRUNC):
 * its reported size S is a size some part of that message announced; its
 * buffer holds, for [0, min(S, cap)), the bytes of a set of disjoint parts
 * of that message, each sent whole, which cover [0, S) exactly (so no byte
 * came from two parts, or from a part cut short, or from nowhere); its
 * bytes from S to its capacity are untouched; and nothing changes in it
 * after it was reported (nor in a failed one's). When the input held no
 * lie, every receive completes, with exactly the bytes sent. */
#include "sock_drive.h"

#define MAX_MSGS 8
#define MAX_PARTS 64
#define MAX_SIZE (48 * 1024)
#define CANARY 0xa5

struct part {
  int msg, sock, tag;
  uint64_t size, off, len; /* as its header says */
  int whole;               /* every byte of it was written */
  size_t written;          /* of header + payload */
  size_t limit;            /* bytes to write before an EOF (a short part), or SIZE_MAX */
};

struct msg {
  uint64_t size;
  size_t cap;
  uint8_t *buf, *snap;
  void *req;
  int reported; /* 0 not yet, 1 done, -1 failed */
  uint64_t got; /* reported size */
};

struct bytes_run {
  struct drive d;
  struct msg m[MAX_MSGS];
  int nmsgs, nposted;
  struct part p[MAX_PARTS];
  int np;
  int q[DRIVE_MAX_NSOCKS + 1][MAX_PARTS]; /* each socket's parts, in message order */
  int qn[DRIVE_MAX_NSOCKS + 1], qat[DRIVE_MAX_NSOCKS + 1];
  int lie; /* the input held a lie: completion is not owed */
};

static inline uint8_t pattern(int msg, uint64_t x, int tag) {
  uint32_t b = (uint32_t)(msg * 2654435761u) ^ (uint32_t)(tag * 40503u);
  return (uint8_t)(b + (uint32_t)x * (uint32_t)(2 * tag + 1) + (uint32_t)(x >> 8) * 31u);
}

FUZZ_NO_COVERAGE static void fill_pattern(uint8_t *buf, size_t n, int msg, uint64_t x, int tag) {
  for (size_t k = 0; k < n; k++)
    buf[k] = pattern(msg, x + k, tag);
}

static void add_part(struct bytes_run *r, int msg, int sock, uint64_t size, uint64_t off,
                     uint64_t len) {
  if (r->np == MAX_PARTS) return;
  struct part *p = &r->p[r->np];
  *p = (struct part){msg, sock, r->np + 1, size, off, len, 0, 0, SIZE_MAX};
  r->q[sock][r->qn[sock]++] = r->np++;
}

/* A clean cut: k parts at 4 KiB boundaries on k distinct sockets. */
static void cut_clean(struct bytes_run *r, struct fuzz_in *in, int i) {
  uint64_t size = r->m[i].size;
  int nsk = r->d.nsocks + 1;
  int k = 1 + fuzz_u8(in) % nsk;
  uint64_t pages = (size + 4095) / 4096;
  if ((uint64_t)k > pages) k = pages ? (int)pages : 1;
  int socks[DRIVE_MAX_NSOCKS + 1];
  for (int s = 0; s < nsk; s++)
    socks[s] = s;
  for (int s = nsk - 1; s > 0; s--) { /* a permutation from the input */
    int j = fuzz_u8(in) % (s + 1), t = socks[s];
    socks[s] = socks[j];
    socks[j] = t;
  }
  uint64_t off = 0;
  for (int j = 0; j < k; j++) {
    uint64_t left_pages = (size - off + 4095) / 4096;
    uint64_t take =
        j == k - 1 ? size - off : (1 + fuzz_u8(in) % (left_pages - (uint64_t)(k - 1 - j))) * 4096;
    if (take > size - off) take = size - off;
    add_part(r, i, socks[j], size, off, take);
    off += take;
  }
}

/* A liar's parts: anything near plausible. */
static void cut_lie(struct bytes_run *r, struct fuzz_in *in, int i) {
  r->lie = 1;
  int n = 1 + fuzz_u8(in) % 4;
  for (int j = 0; j < n; j++) {
    uint8_t how = fuzz_u8(in);
    int sock = fuzz_u8(in) % (r->d.nsocks + 1);
    uint64_t size = how & 1 ? fuzz_u16(in) % (MAX_SIZE + 1) : r->m[i].size;
    uint64_t off = (uint64_t)(fuzz_u8(in) % 13) * 4096;
    if (how & 2) off += fuzz_u8(in); /* not on a page */
    uint64_t len = how & 4 ? fuzz_u16(in) % (MAX_SIZE + 1) : size > off ? size - off : 0;
    if (how & 8 && r->np) { /* a copy of an earlier part, maybe elsewhere */
      struct part c = r->p[fuzz_u8(in) % r->np];
      if (c.msg == i) size = c.size, off = c.off, len = c.len;
    }
    add_part(r, i, sock, size, off, len);
    if (how & 16 && r->np) r->p[r->np - 1].limit = fuzz_u16(in) % (TPX_WIRE_PART_BYTES + len + 1);
  }
}

/* Write what socket s may take of its current part; 1 if anything moved. */
static int write_some(struct bytes_run *r, int s, size_t max) {
  if (r->qat[s] == r->qn[s] || r->d.peer[s] < 0) return 0;
  struct part *p = &r->p[r->q[s][r->qat[s]]];
  size_t total = TPX_WIRE_PART_BYTES + (size_t)p->len, stop = total < p->limit ? total : p->limit;
  uint8_t buf[4096];
  size_t moved = 0;
  while (p->written < stop && moved < max) {
    size_t n = 0, at = p->written;
    if (at < TPX_WIRE_PART_BYTES) {
      uint8_t h[TPX_WIRE_PART_BYTES];
      tpx__wire_part_encode(h, (uint64_t)p->msg, p->size, p->off, p->len);
      n = TPX_WIRE_PART_BYTES - at;
      memcpy(buf, h + at, n);
    } else {
      uint64_t x = at - TPX_WIRE_PART_BYTES;
      n = stop - at < sizeof(buf) ? stop - at : sizeof(buf);
      fill_pattern(buf, n, p->msg, p->off + x, p->tag);
    }
    if (n > stop - at) n = stop - at;
    if (n > max - moved) n = max - moved;
    size_t k = drive_write(&r->d, s, buf, n);
    if (k == 0) break;
    p->written += k;
    moved += k;
  }
  if (p->written == total) p->whole = 1;
  if (p->written == stop) {
    r->qat[s]++;
    if (stop < total) drive_eof(&r->d, s); /* cut short: the socket ends there */
  }
  return moved > 0;
}

static void post_next(struct bytes_run *r) {
  if (r->nposted == r->nmsgs) return;
  struct msg *m = &r->m[r->nposted++];
  m->req = drive_post(&r->d, m->buf, m->cap);
}

static void test_msg(struct bytes_run *r, int i) {
  struct msg *m = &r->m[i];
  if (i >= r->nposted || m->reported) return;
  int done = 0;
  size_t size = 0;
  int rc = tpx__sock_test(r->d.net, m->req, &done, &size);
  if (rc == 0 && !done) return;
  m->reported = done ? 1 : -1;
  m->got = size;
  FUZZ_CHECK(done ? rc == 0 || rc == TPX_ETRUNC : rc < 0);
  if (done) FUZZ_CHECK((rc == TPX_ETRUNC) == (size > m->cap));
  memcpy(m->snap, m->buf, m->cap);
}

/* Do bytes [o, o + len) of buf (as far as keep) hold part tag's pattern? */
FUZZ_NO_COVERAGE static int holds(const uint8_t *buf, int msg, uint64_t o, uint64_t len,
                                  size_t keep, int tag) {
  for (uint64_t x = o; x < o + len && x < keep; x++)
    if (buf[x] != pattern(msg, x, tag)) return 0;
  return 1;
}

/* A done receive's buffer: whole disjoint parts of its message cover [0, S). */
static void check_done(struct bytes_run *r, int i) {
  struct msg *m = &r->m[i];
  uint64_t S = m->got;
  size_t keep = S < m->cap ? (size_t)S : m->cap;
  for (size_t x = keep; x < m->cap; x++)
    FUZZ_CHECK(m->buf[x] == CANARY);
  /* Offsets reached by chains of such parts from 0 (each part ends one). */
  uint64_t reached[MAX_PARTS + 1];
  int nr = 1, announced = 0, whole = 0;
  reached[0] = 0;
  for (int k = 0; k < nr && !whole; k++) {
    uint64_t o = reached[k];
    for (int j = 0; j < r->np; j++) {
      struct part *p = &r->p[j];
      if (p->msg != i || p->size != S) continue;
      announced = 1;
      if (!p->whole || p->off != o || p->len > S - o || (p->len == 0 && S != 0)) continue;
      if (!holds(m->buf, i, o, p->len, keep, p->tag)) continue;
      int seen = 0;
      for (int q = 0; q < nr; q++)
        seen |= reached[q] == o + p->len;
      if (!seen && nr <= MAX_PARTS) reached[nr++] = o + p->len;
      whole |= o + p->len == S;
    }
  }
  FUZZ_CHECK(announced);
  FUZZ_CHECK(whole);
}

static void setup(struct bytes_run *r, struct fuzz_in *in) {
  drive_open(&r->d, DRIVE_DEFAULT, 1 + fuzz_u8(in) % DRIVE_MAX_NSOCKS);
  r->nmsgs = 1 + fuzz_u8(in) % MAX_MSGS;
  for (int i = 0; i < r->nmsgs; i++) {
    struct msg *m = &r->m[i];
    uint8_t kind = fuzz_u8(in);
    m->size = fuzz_u16(in) % (MAX_SIZE + 1);
    m->cap = kind & 8 ? (size_t)(m->size - fuzz_u16(in) % (m->size + 1))
                      : (size_t)m->size + (kind & 16 ? fuzz_u8(in) : 0);
    m->buf = malloc(m->cap ? m->cap : 1);
    m->snap = malloc(m->cap ? m->cap : 1);
    FUZZ_CHECK(m->buf && m->snap);
    memset(m->buf, CANARY, m->cap);
    if ((kind & 3) == 3)
      cut_lie(r, in, i);
    else
      cut_clean(r, in, i);
  }
}

static void fuzz_setup(void) {
  drive_net(DRIVE_DEFAULT);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  struct fuzz_in in = {data, size, 0};
  static struct bytes_run r;
  memset(&r, 0, sizeof(r));
  setup(&r, &in);
  int nsk = r.d.nsocks + 1;
  /* The interleaving: from the input while it lasts, then round robin. */
  for (int steps = 0, stuck = 0; steps < 100000; steps++) {
    int left = 0;
    for (int s = 0; s < nsk; s++)
      left |= r.qat[s] < r.qn[s] && r.d.peer[s] >= 0;
    if (!left) break;
    uint8_t op = fuzz_more(&in) ? fuzz_u8(&in) : (uint8_t)(1 + 4 * (steps % nsk));
    int s = (op >> 2) % nsk;
    switch (op & 3) {
    case 0: post_next(&r); break;
    case 1:
      if (write_some(&r, s, op & 0x80 ? (size_t)1 + fuzz_u16(&in) : SIZE_MAX))
        stuck = 0;
      else if (r.qat[s] < r.qn[s] && r.d.peer[s] >= 0 && ++stuck > 2 * nsk) {
        /* the receiver will not take more: post, run, and at last give up */
        post_next(&r);
        drive_settle(&r.d);
        if (stuck > 8 * nsk) {
          r.lie = 1;
          drive_eof(&r.d, s);
          stuck = 0;
        }
      }
      break;
    case 2: drive_run(&r.d, s); break;
    default:
      drive_settle(&r.d);
      test_msg(&r, r.nposted ? fuzz_u8(&in) % r.nposted : 0);
      break;
    }
  }
  while (r.nposted < r.nmsgs)
    post_next(&r);
  for (int s = 0; s < nsk; s++) {
    if (r.qat[s] < r.qn[s]) r.lie = 1; /* parts never written whole */
    drive_eof(&r.d, s);
  }
  drive_settle(&r.d);
  for (int i = 0; i < r.nmsgs; i++)
    test_msg(&r, i);
  drive_settle(&r.d);
  for (int i = 0; i < r.nmsgs; i++) {
    struct msg *m = &r.m[i];
    if (!r.lie) FUZZ_CHECK(m->reported == 1 && m->got == m->size);
    if (m->reported == 1) check_done(&r, i);
    if (m->reported) FUZZ_CHECK(memcmp(m->buf, m->snap, m->cap) == 0);
  }
  drive_close(&r.d);
  for (int i = 0; i < r.nmsgs; i++) {
    free(r.m[i].buf);
    free(r.m[i].snap);
  }
  return 0;
}
