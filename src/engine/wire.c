/* Control-plane frames and blobs: see wire.h for the layouts. */
#include "engine/wire.h"

#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/error.h"

void tpx__wbuf_free(struct tpx__wbuf *b) {
  free(b->p);
  b->p = NULL;
  b->len = b->cap = 0;
}

static uint8_t *wb_grow(struct tpx__wbuf *b, size_t n) {
  if (b->oom) return NULL;
  if (b->len + n > b->cap) {
    size_t cap = b->cap ? b->cap : 256;
    while (cap < b->len + n) cap *= 2;
    uint8_t *p = realloc(b->p, cap);
    if (!p) {
      b->oom = 1;
      return NULL;
    }
    b->p = p;
    b->cap = cap;
  }
  uint8_t *at = b->p + b->len;
  b->len += n;
  return at;
}
static void wb_u8(struct tpx__wbuf *b, uint8_t v) {
  uint8_t *p = wb_grow(b, 1);
  if (p) *p = v;
}
static void wb_u16(struct tpx__wbuf *b, uint16_t v) {
  uint8_t *p = wb_grow(b, 2);
  if (p) tpx__put16(p, v);
}
static void wb_u32(struct tpx__wbuf *b, uint32_t v) {
  uint8_t *p = wb_grow(b, 4);
  if (p) tpx__put32(p, v);
}
static void wb_u64(struct tpx__wbuf *b, uint64_t v) {
  uint8_t *p = wb_grow(b, 8);
  if (p) tpx__put64(p, v);
}
static void wb_bytes(struct tpx__wbuf *b, const void *src, size_t n) {
  if (n == 0) return;
  uint8_t *p = wb_grow(b, n);
  if (p) memcpy(p, src, n);
}

static uint64_t iov_total(const struct iovec *iov, int n) {
  uint64_t t = 0;
  for (int i = 0; i < n; i++) t += iov[i].iov_len;
  return t;
}
static void wb_iov(struct tpx__wbuf *b, const struct iovec *iov, int n) {
  for (int i = 0; i < n; i++) wb_bytes(b, iov[i].iov_base, iov[i].iov_len);
}

/* Frames are built in place: header first, length patched at the end. On
 * failure the partial frame is dropped so the buffer stays a frame stream. */
static size_t frame_begin(struct tpx__wbuf *b, uint8_t type) {
  size_t start = b->len;
  wb_u32(b, WIRE_MAGIC);
  wb_u8(b, WIRE_VERSION);
  wb_u8(b, type);
  wb_u16(b, 0);
  wb_u32(b, 0);
  return start;
}
static int frame_end(struct tpx__wbuf *b, size_t start) {
  if (b->oom) {
    b->oom = 0;
    b->len = start;
    return tpx_err_quiet(TPX_ENOMEM, "control message: out of memory");
  }
  size_t plen = b->len - start - WIRE_HDR_BYTES;
  if (plen > WIRE_MAX_PAYLOAD) {
    b->len = start;
    return tpx_err_quiet(TPX_EINVAL, "control message of %zu bytes exceeds %u", plen, WIRE_MAX_PAYLOAD);
  }
  tpx__put32(b->p + start + 8, (uint32_t)plen);
  return 0;
}

long tpx__wire_frame_parse(const uint8_t *buf, size_t avail, struct tpx__wire_frame *f) {
  /* Judge the magic as soon as its bytes arrive, so garbage is refused early. */
  static const uint8_t magic[4] = {'T', 'P', 'X', 'C'};
  for (size_t i = 0; i < avail && i < 4; i++)
    if (buf[i] != magic[i]) return tpx_err_quiet(TPX_EPROTO, "control stream: bad magic (not a tpx peer?)");
  if (avail < WIRE_HDR_BYTES) return 0;
  f->version = buf[4];
  f->type = buf[5];
  uint16_t flags = tpx__get16(buf + 6);
  f->len = tpx__get32(buf + 8);
  if (f->version != WIRE_VERSION)
    return tpx_err_quiet(TPX_EVERSION, "control stream: protocol version %u, we speak %u", f->version,
                   WIRE_VERSION);
  if (flags != 0) return tpx_err_quiet(TPX_EPROTO, "control stream: unknown frame flags 0x%x", flags);
  if (f->type == 0 || f->type > MSG_TYPE_MAX)
    return tpx_err_quiet(TPX_EPROTO, "control stream: unknown message type %u", f->type);
  if (f->len > WIRE_MAX_PAYLOAD)
    return tpx_err_quiet(TPX_EPROTO, "control stream: frame of %u bytes exceeds the %u limit", f->len,
                   WIRE_MAX_PAYLOAD);
  if (avail < WIRE_HDR_BYTES + (size_t)f->len) return 0;
  f->payload = buf + WIRE_HDR_BYTES;
  return (long)(WIRE_HDR_BYTES + f->len);
}

/* ---- reader ---- */
struct rd {
  const uint8_t *p;
  size_t len, pos;
  int bad;
};
static const uint8_t *rd_take(struct rd *r, size_t n) {
  if (r->bad || r->len - r->pos < n) {
    r->bad = 1;
    return NULL;
  }
  const uint8_t *at = r->p + r->pos;
  r->pos += n;
  return at;
}
static uint8_t rd_u8(struct rd *r) {
  const uint8_t *p = rd_take(r, 1);
  return p ? *p : 0;
}
static uint16_t rd_u16(struct rd *r) {
  const uint8_t *p = rd_take(r, 2);
  return p ? tpx__get16(p) : 0;
}
static uint32_t rd_u32(struct rd *r) {
  const uint8_t *p = rd_take(r, 4);
  return p ? tpx__get32(p) : 0;
}
static uint64_t rd_u64(struct rd *r) {
  const uint8_t *p = rd_take(r, 8);
  return p ? tpx__get64(p) : 0;
}
static int rd_done(struct rd *r, const char *what) {
  if (r->bad) return tpx_err_quiet(TPX_EPROTO, "control message %s: truncated", what);
  if (r->pos != r->len)
    return tpx_err_quiet(TPX_EPROTO, "control message %s: %zu trailing bytes", what, r->len - r->pos);
  return 0;
}
static struct rd rd_of(const struct tpx__wire_frame *f) {
  struct rd r = {f->payload, f->len, 0, 0};
  return r;
}
/* Length-prefixed (u8) string into a NUL-terminated buffer of cap bytes. */
static int rd_str(struct rd *r, char *out, size_t cap) {
  uint8_t n = rd_u8(r);
  const uint8_t *p = rd_take(r, n);
  if (!p || n >= cap) {
    r->bad = 1;
    out[0] = '\0';
    return TPX_EPROTO;
  }
  memcpy(out, p, n);
  out[n] = '\0';
  if (memchr(out, '\0', n)) r->bad = 1; /* embedded NUL: refuse */
  return 0;
}
static void wb_str(struct tpx__wbuf *b, const char *s, size_t max) {
  size_t n = strnlen(s, max);
  if (n > 255) n = 255;
  wb_u8(b, (uint8_t)n);
  wb_bytes(b, s, n);
}

/* ---- messages ---- */
int tpx__wire_put_hello(struct tpx__wbuf *b, int ack, const struct tpx__wire_hello *h) {
  if (h->nch == 0 || h->nch > WIRE_MAX_CHANNELS)
    return tpx_err_quiet(TPX_EINVAL, "hello: %u channels", h->nch);
  size_t s = frame_begin(b, ack ? MSG_HELLO_ACK : MSG_HELLO);
  wb_u64(b, h->uuid);
  wb_u32(b, (uint32_t)h->gpu);
  wb_u16(b, h->nch);
  wb_u32(b, h->flags);
  wb_str(b, h->name, TPX_NAME_MAX - 1);
  wb_bytes(b, h->handles, (size_t)h->nch * TPX_NET_HANDLE_BYTES);
  return frame_end(b, s);
}
int tpx__wire_get_hello(const struct tpx__wire_frame *f, struct tpx__wire_hello *h) {
  struct rd r = rd_of(f);
  h->uuid = rd_u64(&r);
  h->gpu = (int32_t)rd_u32(&r);
  h->nch = rd_u16(&r);
  h->flags = rd_u32(&r);
  rd_str(&r, h->name, sizeof(h->name));
  if (!r.bad && (h->nch == 0 || h->nch > WIRE_MAX_CHANNELS))
    return tpx_err_quiet(TPX_EPROTO, "hello: channel count %u outside 1..%d", h->nch, WIRE_MAX_CHANNELS);
  h->handles = rd_take(&r, (size_t)h->nch * TPX_NET_HANDLE_BYTES);
  return rd_done(&r, "hello");
}

int tpx__wire_put_error(struct tpx__wbuf *b, int32_t code, const char *msg) {
  size_t s = frame_begin(b, MSG_ERROR);
  wb_u32(b, (uint32_t)code);
  size_t n = strnlen(msg, WIRE_MAX_ERRMSG);
  wb_u16(b, (uint16_t)n);
  wb_bytes(b, msg, n);
  return frame_end(b, s);
}
int tpx__wire_get_error(const struct tpx__wire_frame *f, struct tpx__wire_error *m) {
  struct rd r = rd_of(f);
  m->code = (int32_t)rd_u32(&r);
  uint16_t n = rd_u16(&r);
  if (n > WIRE_MAX_ERRMSG) r.bad = 1;
  const uint8_t *p = rd_take(&r, n);
  m->msg[0] = '\0';
  if (p) {
    memcpy(m->msg, p, n);
    m->msg[n] = '\0';
  }
  return rd_done(&r, "error");
}

int tpx__wire_find_error(const uint8_t *buf, size_t len, struct tpx__wire_error *e, size_t *at) {
  size_t off = 0;
  while (off < len) {
    struct tpx__wire_frame f;
    long n = tpx__wire_frame_parse(buf + off, len - off, &f);
    if (n <= 0) return (int)n;
    if (f.type == MSG_ERROR) {
      int rc = tpx__wire_get_error(&f, e);
      if (rc == 0) *at = off;
      return rc == 0 ? 1 : rc;
    }
    off += (size_t)n;
  }
  return 0;
}

int tpx__wire_put_cts(struct tpx__wbuf *b, const struct tpx__wire_cts *m) {
  size_t s = frame_begin(b, MSG_CTS);
  wb_u64(b, m->recv_id);
  wb_u64(b, m->tag);
  wb_u64(b, m->cap);
  wb_u8(b, m->inl_ok ? 1 : 0);
  return frame_end(b, s);
}
int tpx__wire_get_cts(const struct tpx__wire_frame *f, struct tpx__wire_cts *m) {
  struct rd r = rd_of(f);
  m->recv_id = rd_u64(&r);
  m->tag = rd_u64(&r);
  m->cap = rd_u64(&r);
  m->inl_ok = rd_u8(&r);
  if (!r.bad && m->inl_ok > 1) return tpx_err_quiet(TPX_EPROTO, "cts: bad inline flag %u", m->inl_ok);
  return rd_done(&r, "cts");
}

static int chunk_ok(uint32_t chunk) { return chunk >= 1 && chunk <= WIRE_MAX_CHUNK; }

int tpx__wire_put_send(struct tpx__wbuf *b, const struct tpx__wire_send *m, const struct iovec *iov, int niov) {
  if (m->inl && (m->len > WIRE_MAX_INLINE || iov_total(iov, niov) != m->len))
    return tpx_err_quiet(TPX_EINVAL, "send: inline data of %llu bytes", (unsigned long long)m->len);
  size_t s = frame_begin(b, MSG_SEND);
  wb_u64(b, m->recv_id);
  wb_u64(b, m->len);
  wb_u16(b, m->first_ch);
  wb_u32(b, m->chunk);
  wb_u8(b, m->inl > 2 ? 1 : m->inl);
  if (m->inl) wb_iov(b, iov, niov);
  if (m->inl == 2) wb_u32(b, tpx__crc32c_pieces(NULL, 0, iov, niov));
  return frame_end(b, s);
}
int tpx__wire_get_send(const struct tpx__wire_frame *f, struct tpx__wire_send *m) {
  struct rd r = rd_of(f);
  m->recv_id = rd_u64(&r);
  m->len = rd_u64(&r);
  m->first_ch = rd_u16(&r);
  m->chunk = rd_u32(&r);
  m->inl = rd_u8(&r);
  m->data = NULL;
  if (!r.bad && (m->inl > 2 || (m->inl && m->len > WIRE_MAX_INLINE)))
    return tpx_err_quiet(TPX_EPROTO, "send: inline flag %u with %llu bytes", m->inl, (unsigned long long)m->len);
  if (m->inl) m->data = rd_take(&r, (size_t)m->len);
  m->sum = m->inl == 2 ? rd_u32(&r) : 0;
  int rc = rd_done(&r, "send");
  if (rc == 0 && !chunk_ok(m->chunk)) rc = tpx_err_quiet(TPX_EPROTO, "send: chunk size %u", m->chunk);
  if (rc == 0 && m->first_ch >= WIRE_MAX_CHANNELS)
    rc = tpx_err_quiet(TPX_EPROTO, "send: first channel %u", m->first_ch);
  return rc;
}

int tpx__wire_put_rw_plan(struct tpx__wbuf *b, int type, uint64_t id, uint16_t first_ch, uint32_t chunk,
                          const struct tpx__wire_entry *e, uint32_t n, const void *notif, uint32_t notif_len,
                          const struct iovec *iov, int niov, int pack_log2, int sum_on) {
  uint64_t inl = iov ? iov_total(iov, niov) : 0, sum = 0;
  for (uint32_t i = 0; iov && i < n; i++) sum += e[i].len;
  if (iov && (type != MSG_WRITE || inl != sum || inl > WIRE_MAX_INLINE))
    return tpx_err_quiet(TPX_EINVAL, "write: inline data of %llu bytes for %llu", (unsigned long long)inl,
                   (unsigned long long)sum);
  if (pack_log2 < 0 || pack_log2 > WIRE_MAX_PACK_LOG2)
    return tpx_err_quiet(TPX_EINVAL, "pieces up to 2^%d bytes", pack_log2);
  if (n > WIRE_MAX_ENTRIES || notif_len > TPX_NOTIF_MAX)
    return tpx_err_quiet(TPX_EINVAL, "%s: %u entries / %u notification bytes over the limits",
                   type == MSG_WRITE ? "write" : "read", n, notif_len);
  size_t s = frame_begin(b, (uint8_t)type);
  wb_u64(b, id);
  wb_u16(b, first_ch);
  wb_u32(b, chunk);
  wb_u32(b, n);
  uint8_t *p = wb_grow(b, (size_t)n * WIRE_ENTRY_BYTES);
  if (p) {
    for (uint32_t i = 0; i < n; i++, p += WIRE_ENTRY_BYTES) {
      tpx__put64(p, e[i].region);
      tpx__put64(p + 8, e[i].addr);
      tpx__put64(p + 16, e[i].len);
    }
  }
  wb_u8(b, notif != NULL);
  wb_u32(b, notif_len);
  wb_bytes(b, notif, notif_len);
  /* WRITE: the data follows; READ: an inline answer is welcome (no data) */
  uint8_t fl = (uint8_t)((iov || (type == MSG_READ && niov) ? WIRE_RW_INLINE : 0) | (pack_log2 << WIRE_RW_PACK_SHIFT));
  wb_u8(b, (uint8_t)(fl | (iov && sum_on ? WIRE_RW_SUM : 0)));
  if (iov) wb_iov(b, iov, niov);
  if (iov && sum_on) wb_u32(b, tpx__crc32c_pieces(NULL, 0, iov, niov));
  return frame_end(b, s);
}
int tpx__wire_get_rw(const struct tpx__wire_frame *f, struct tpx__wire_rw *m) {
  const char *what = f->type == MSG_WRITE ? "write" : "read";
  struct rd r = rd_of(f);
  m->id = rd_u64(&r);
  m->first_ch = rd_u16(&r);
  m->chunk = rd_u32(&r);
  m->n = rd_u32(&r);
  if (!r.bad && m->n > WIRE_MAX_ENTRIES)
    return tpx_err_quiet(TPX_EPROTO, "%s: %u entries exceeds %d", what, m->n, WIRE_MAX_ENTRIES);
  m->entries = rd_take(&r, (size_t)m->n * WIRE_ENTRY_BYTES);
  m->has_notif = rd_u8(&r);
  m->notif_len = rd_u32(&r);
  if (!r.bad && (m->has_notif > 1 || (!m->has_notif && m->notif_len)))
    return tpx_err_quiet(TPX_EPROTO, "%s: inconsistent notification fields", what);
  if (!r.bad && m->notif_len > TPX_NOTIF_MAX)
    return tpx_err_quiet(TPX_EPROTO, "%s: notification of %u bytes exceeds %d", what, m->notif_len,
                   TPX_NOTIF_MAX);
  m->notif = rd_take(&r, m->notif_len);
  uint8_t fl = rd_u8(&r);
  m->inl = fl & WIRE_RW_INLINE;
  m->sum_on = (fl & WIRE_RW_SUM) != 0;
  m->sum = 0;
  fl &= (uint8_t)~WIRE_RW_SUM;
  m->pack_log2 = (uint8_t)(fl >> WIRE_RW_PACK_SHIFT);
  m->inl_len = 0;
  m->data = NULL;
  if (!r.bad && m->pack_log2 > WIRE_MAX_PACK_LOG2) return tpx_err_quiet(TPX_EPROTO, "%s: bad flags 0x%x", what, fl);
  if (!r.bad && m->inl && f->type == MSG_WRITE) {
    for (uint32_t i = 0; i < m->n; i++) {
      uint64_t l = tpx__get64(m->entries + (size_t)i * WIRE_ENTRY_BYTES + 16);
      if (l > WIRE_MAX_INLINE || m->inl_len + l > WIRE_MAX_INLINE)
        return tpx_err_quiet(TPX_EPROTO, "%s: inline data over %d bytes", what, WIRE_MAX_INLINE);
      m->inl_len += l;
    }
    m->data = rd_take(&r, (size_t)m->inl_len);
  }
  if (!r.bad && m->sum_on && (!m->inl || f->type != MSG_WRITE))
    return tpx_err_quiet(TPX_EPROTO, "%s: a checksum flag without inline data", what);
  if (m->sum_on) m->sum = rd_u32(&r);
  int rc = rd_done(&r, what);
  if (rc == 0 && !chunk_ok(m->chunk)) rc = tpx_err_quiet(TPX_EPROTO, "%s: chunk size %u", what, m->chunk);
  if (rc == 0 && m->first_ch >= WIRE_MAX_CHANNELS)
    rc = tpx_err_quiet(TPX_EPROTO, "%s: first channel %u", what, m->first_ch);
  return rc;
}
void tpx__wire_entry_at(const uint8_t *entries, uint32_t i, struct tpx__wire_entry *e) {
  const uint8_t *p = entries + (size_t)i * WIRE_ENTRY_BYTES;
  e->region = tpx__get64(p);
  e->addr = tpx__get64(p + 8);
  e->len = tpx__get64(p + 16);
}

int tpx__wire_put_read_data(struct tpx__wbuf *b, const struct tpx__wire_read_data *m, const struct iovec *iov,
                            int niov) {
  if (m->inl && (m->inl_len > WIRE_MAX_INLINE || iov_total(iov, niov) != m->inl_len))
    return tpx_err_quiet(TPX_EINVAL, "read data: inline data of %llu bytes", (unsigned long long)m->inl_len);
  size_t s = frame_begin(b, MSG_READ_DATA);
  wb_u64(b, m->id);
  wb_u16(b, m->first_ch);
  wb_u8(b, m->inl > 2 ? 1 : m->inl);
  if (m->inl) {
    wb_u64(b, m->inl_len);
    wb_iov(b, iov, niov);
  }
  if (m->inl == 2) wb_u32(b, tpx__crc32c_pieces(NULL, 0, iov, niov));
  return frame_end(b, s);
}
int tpx__wire_get_read_data(const struct tpx__wire_frame *f, struct tpx__wire_read_data *m) {
  struct rd r = rd_of(f);
  m->id = rd_u64(&r);
  m->first_ch = rd_u16(&r);
  m->inl = rd_u8(&r);
  m->inl_len = 0;
  m->data = NULL;
  if (!r.bad && m->inl > 2) return tpx_err_quiet(TPX_EPROTO, "read data: bad inline flag %u", m->inl);
  if (m->inl) {
    m->inl_len = rd_u64(&r);
    if (!r.bad && m->inl_len > WIRE_MAX_INLINE)
      return tpx_err_quiet(TPX_EPROTO, "read data: inline data of %llu bytes", (unsigned long long)m->inl_len);
    m->data = rd_take(&r, (size_t)m->inl_len);
  }
  m->sum = m->inl == 2 ? rd_u32(&r) : 0;
  int rc = rd_done(&r, "read data");
  if (rc == 0 && m->first_ch >= WIRE_MAX_CHANNELS)
    rc = tpx_err_quiet(TPX_EPROTO, "read data: first channel %u", m->first_ch);
  return rc;
}

int tpx__wire_put_status(struct tpx__wbuf *b, const struct tpx__wire_status *m) {
  size_t s = frame_begin(b, MSG_STATUS);
  wb_u8(b, m->what);
  wb_u64(b, m->id);
  wb_u32(b, (uint32_t)m->status);
  return frame_end(b, s);
}
int tpx__wire_get_status(const struct tpx__wire_frame *f, struct tpx__wire_status *m) {
  struct rd r = rd_of(f);
  m->what = rd_u8(&r);
  m->id = rd_u64(&r);
  m->status = (int32_t)rd_u32(&r);
  int rc = rd_done(&r, "status");
  if (rc == 0 && (m->what < ST_WRITE || m->what > ST_SEND))
    rc = tpx_err_quiet(TPX_EPROTO, "status: unknown kind %u", m->what);
  if (rc == 0 && (m->status > 0 || m->status < TPX_EUNKNOWN))
    rc = tpx_err_quiet(TPX_EPROTO, "status: code %d out of range", m->status);
  return rc;
}

int tpx__wire_put_notif(struct tpx__wbuf *b, const void *msg, uint32_t len) {
  if (len > TPX_NOTIF_MAX) return tpx_err_quiet(TPX_EINVAL, "notification of %u bytes exceeds %d", len, TPX_NOTIF_MAX);
  size_t s = frame_begin(b, MSG_NOTIF);
  wb_u32(b, len);
  wb_bytes(b, msg, len);
  return frame_end(b, s);
}
int tpx__wire_get_notif(const struct tpx__wire_frame *f, struct tpx__wire_notif *m) {
  struct rd r = rd_of(f);
  m->len = rd_u32(&r);
  if (!r.bad && m->len > TPX_NOTIF_MAX)
    return tpx_err_quiet(TPX_EPROTO, "notification of %u bytes exceeds %d", m->len, TPX_NOTIF_MAX);
  m->msg = rd_take(&r, m->len);
  return rd_done(&r, "notification");
}

int tpx__wire_put_bye(struct tpx__wbuf *b) {
  size_t s = frame_begin(b, MSG_BYE);
  return frame_end(b, s);
}

int tpx__wire_put_auth(struct tpx__wbuf *b, const struct tpx__wire_auth *m) {
  if (m->step < AUTH_CHALLENGE || m->step > AUTH_PROOF) return tpx_err_quiet(TPX_EINVAL, "auth step %u", m->step);
  size_t s = frame_begin(b, MSG_AUTH);
  wb_u8(b, m->step);
  if (m->step != AUTH_PROOF) wb_bytes(b, m->nonce, WIRE_AUTH_NONCE);
  if (m->step != AUTH_CHALLENGE) wb_bytes(b, m->mac, WIRE_AUTH_MAC);
  return frame_end(b, s);
}

int tpx__wire_get_auth(const struct tpx__wire_frame *f, struct tpx__wire_auth *m) {
  struct rd r = rd_of(f);
  memset(m, 0, sizeof(*m));
  m->step = rd_u8(&r);
  if (!r.bad && (m->step < AUTH_CHALLENGE || m->step > AUTH_PROOF))
    return tpx_err_quiet(TPX_EPROTO, "authentication message: unknown step %u", m->step);
  const uint8_t *nonce = m->step != AUTH_PROOF ? rd_take(&r, WIRE_AUTH_NONCE) : NULL;
  const uint8_t *mac = m->step != AUTH_CHALLENGE ? rd_take(&r, WIRE_AUTH_MAC) : NULL;
  if (r.bad) return rd_done(&r, "authentication message");
  if (nonce) memcpy(m->nonce, nonce, WIRE_AUTH_NONCE);
  if (mac) memcpy(m->mac, mac, WIRE_AUTH_MAC);
  return rd_done(&r, "authentication message");
}

/* Bounds of a MSG_RELISTEN, the same for encoding and decoding. */
static int relisten_bad(const struct tpx__wire_relisten *m) {
  if (m->step < RELISTEN_ASK || m->step > RELISTEN_UP) return 1;
  if (m->ch >= WIRE_MAX_CHANNELS) return 1;
  if (m->step == RELISTEN_UP) return m->ch != 0 || m->code != 0;
  if (m->code > 0 || m->code <= TPX_EUNKNOWN) return 1;
  if (m->step == RELISTEN_ASK) return m->code == 0;
  return m->gen == 0; /* RELISTEN_HANDLE: generation 0 came in the HELLO */
}

int tpx__wire_put_relisten(struct tpx__wbuf *b, const struct tpx__wire_relisten *m) {
  if (relisten_bad(m) || (m->step == RELISTEN_HANDLE && !m->handle))
    return tpx_err_quiet(TPX_EINVAL, "relisten: step %u channel %u code %d", m->step, m->ch, (int)m->code);
  size_t s = frame_begin(b, MSG_RELISTEN);
  wb_u8(b, m->step);
  wb_u16(b, m->ch);
  wb_u32(b, m->gen);
  wb_u32(b, (uint32_t)m->code);
  if (m->step == RELISTEN_HANDLE) wb_bytes(b, m->handle, TPX_NET_HANDLE_BYTES);
  return frame_end(b, s);
}

int tpx__wire_get_relisten(const struct tpx__wire_frame *f, struct tpx__wire_relisten *m) {
  struct rd r = rd_of(f);
  memset(m, 0, sizeof(*m));
  m->step = rd_u8(&r);
  m->ch = rd_u16(&r);
  m->gen = rd_u32(&r);
  m->code = (int32_t)rd_u32(&r);
  if (!r.bad && relisten_bad(m))
    return tpx_err_quiet(TPX_EPROTO, "relisten: step %u channel %u generation %u code %d out of range", m->step,
                         m->ch, m->gen, (int)m->code);
  if (m->step == RELISTEN_HANDLE) m->handle = rd_take(&r, TPX_NET_HANDLE_BYTES);
  return rd_done(&r, "relisten");
}

static int sched_bad(const struct tpx__wire_sched *m) { return m->len < 1 || m->len > WIRE_MAX_CHANNELS; }

static void put_pat(struct tpx__wbuf *b, const struct tpx__wire_sched *m) {
  wb_u8(b, m->len);
  wb_bytes(b, m->ch, m->len);
}

static void get_pat(struct rd *r, struct tpx__wire_sched *m) {
  m->len = rd_u8(r);
  if (sched_bad(m)) {
    r->bad = 1;
    return;
  }
  const uint8_t *p = rd_take(r, m->len);
  if (p) memcpy(m->ch, p, m->len);
}

int tpx__wire_put_sched(struct tpx__wbuf *b, const struct tpx__wire_sched *m) {
  if (sched_bad(m)) return tpx_err_quiet(TPX_EINVAL, "schedule: %u channels", m->len);
  size_t s = frame_begin(b, MSG_SCHED);
  put_pat(b, m);
  return frame_end(b, s);
}

int tpx__wire_get_sched(const struct tpx__wire_frame *f, struct tpx__wire_sched *m) {
  struct rd r = rd_of(f);
  memset(m, 0, sizeof(*m));
  get_pat(&r, m);
  return rd_done(&r, "schedule");
}

static int chan_bad(const struct tpx__wire_chan *m) {
  if (m->step < CHAN_DOWN || m->step > CHAN_RATE || m->ch >= WIRE_MAX_CHANNELS) return 1;
  if (m->step == CHAN_DOWN) return m->code >= 0 || m->code < TPX_EUNKNOWN;
  if (m->step == CHAN_ASK || m->step == CHAN_VERDICT || m->step == CHAN_RESEND || m->step == CHAN_LANDED)
    return m->what < ST_WRITE || m->what > ST_SEND || (m->step == CHAN_VERDICT && m->need > 1) ||
           (m->step == CHAN_RESEND && sched_bad(&m->pat));
  return 0;
}

int tpx__wire_put_chan(struct tpx__wbuf *b, const struct tpx__wire_chan *m) {
  if (chan_bad(m) || (m->step == CHAN_REJOIN && !m->handle))
    return tpx_err_quiet(TPX_EINVAL, "channel message: step %u channel %u", m->step, m->ch);
  size_t s = frame_begin(b, MSG_CHAN);
  wb_u8(b, m->step);
  wb_u16(b, m->ch);
  switch (m->step) {
  case CHAN_DOWN: wb_u32(b, (uint32_t)m->code); break;
  case CHAN_ASK:
  case CHAN_LANDED:
    wb_u8(b, m->what);
    wb_u64(b, m->id);
    break;
  case CHAN_VERDICT:
    wb_u8(b, m->what);
    wb_u64(b, m->id);
    wb_u32(b, m->layers);
    wb_u8(b, m->need);
    break;
  case CHAN_RESEND:
    wb_u8(b, m->what);
    wb_u64(b, m->id);
    wb_u32(b, m->seed);
    put_pat(b, &m->pat);
    break;
  case CHAN_REJOIN:
    wb_u32(b, m->gen);
    wb_bytes(b, m->handle, TPX_NET_HANDLE_BYTES);
    break;
  default: wb_u32(b, m->gen); break;
  }
  return frame_end(b, s);
}

int tpx__wire_get_chan(const struct tpx__wire_frame *f, struct tpx__wire_chan *m) {
  struct rd r = rd_of(f);
  memset(m, 0, sizeof(*m));
  m->step = rd_u8(&r);
  m->ch = rd_u16(&r);
  switch (m->step) {
  case CHAN_DOWN: m->code = (int32_t)rd_u32(&r); break;
  case CHAN_ASK:
  case CHAN_LANDED:
    m->what = rd_u8(&r);
    m->id = rd_u64(&r);
    break;
  case CHAN_VERDICT:
    m->what = rd_u8(&r);
    m->id = rd_u64(&r);
    m->layers = rd_u32(&r);
    m->need = rd_u8(&r);
    break;
  case CHAN_RESEND:
    m->what = rd_u8(&r);
    m->id = rd_u64(&r);
    m->seed = rd_u32(&r);
    get_pat(&r, &m->pat);
    if (r.bad) m->pat.len = 1; /* reported by rd_done below, not as a bad pattern */
    break;
  case CHAN_REJOIN:
    m->gen = rd_u32(&r);
    m->handle = rd_take(&r, TPX_NET_HANDLE_BYTES);
    break;
  case CHAN_UP:
  case CHAN_RATE: m->gen = rd_u32(&r); break;
  default: return tpx_err_quiet(TPX_EPROTO, "channel message: step %u", m->step);
  }
  if (!r.bad && chan_bad(m))
    return tpx_err_quiet(TPX_EPROTO, "channel message: step %u channel %u out of range", m->step, m->ch);
  return rd_done(&r, "channel message");
}

/* MSG_PING: both kinds, seq from 1 (0 is "none sent"). */
static int ping_bad(const struct tpx__wire_ping *m) {
  return (m->kind != PING_ASK && m->kind != PING_ANSWER) || m->seq == 0;
}

int tpx__wire_put_ping(struct tpx__wbuf *b, const struct tpx__wire_ping *m) {
  if (ping_bad(m)) return tpx_err_quiet(TPX_EINVAL, "ping: kind %u seq %u", m->kind, m->seq);
  size_t s = frame_begin(b, MSG_PING);
  wb_u8(b, m->kind);
  wb_u32(b, m->seq);
  return frame_end(b, s);
}

int tpx__wire_get_ping(const struct tpx__wire_frame *f, struct tpx__wire_ping *m) {
  struct rd r = rd_of(f);
  m->kind = rd_u8(&r);
  m->seq = rd_u32(&r);
  int rc = rd_done(&r, "ping");
  if (rc == 0 && ping_bad(m)) rc = tpx_err_quiet(TPX_EPROTO, "ping: kind %u seq %u out of range", m->kind, m->seq);
  return rc;
}

static int sum_bad(const struct tpx__wire_sum *m) {
  return m->what < ST_WRITE || m->what > ST_SEND || m->n < 1 || m->n > WIRE_MAX_SUMS;
}

int tpx__wire_put_sum(struct tpx__wbuf *b, const struct tpx__wire_sum *m) {
  if (sum_bad(m)) return tpx_err_quiet(TPX_EINVAL, "checksums: what %u, %u of them", m->what, m->n);
  size_t s = frame_begin(b, MSG_SUM);
  wb_u8(b, m->what);
  wb_u64(b, m->id);
  wb_u16(b, m->n);
  for (uint16_t i = 0; i < m->n; i++) {
    wb_u32(b, m->chunk[i]);
    wb_u32(b, m->sum[i]);
  }
  return frame_end(b, s);
}

int tpx__wire_get_sum(const struct tpx__wire_frame *f, struct tpx__wire_sum *m) {
  struct rd r = rd_of(f);
  m->what = rd_u8(&r);
  m->id = rd_u64(&r);
  m->n = rd_u16(&r);
  if (!r.bad && sum_bad(m))
    return tpx_err_quiet(TPX_EPROTO, "checksums: what %u, %u of them, out of range", m->what, m->n);
  for (uint16_t i = 0; i < m->n && !r.bad; i++) {
    m->chunk[i] = rd_u32(&r);
    m->sum[i] = rd_u32(&r);
  }
  return rd_done(&r, "checksums");
}

/* ---- blobs ---- */
int tpx__conn_info_encode(const struct tpx__conn_info *c, uint8_t *buf, size_t cap, size_t *len) {
  struct tpx__wbuf b = {0};
  wb_u32(&b, BLOB_CONN_MAGIC);
  wb_u8(&b, BLOB_VERSION);
  wb_u64(&b, c->uuid);
  wb_u32(&b, (uint32_t)c->gpu);
  wb_u16(&b, c->port);
  wb_str(&b, c->name, TPX_NAME_MAX - 1);
  int naddr = c->naddr < 0 ? 0 : c->naddr > CONN_MAX_ADDRS ? CONN_MAX_ADDRS : c->naddr;
  wb_u8(&b, (uint8_t)naddr);
  for (int i = 0; i < naddr; i++) wb_str(&b, c->addr[i], CONN_ADDR_MAX - 1);
  int rc = 0;
  if (b.oom) rc = tpx_err_quiet(TPX_ENOMEM, "connection info: out of memory");
  else if (b.len > cap) rc = tpx_err_quiet(TPX_EINVAL, "connection info needs %zu bytes, buffer has %zu", b.len, cap);
  else {
    memcpy(buf, b.p, b.len);
    *len = b.len;
  }
  tpx__wbuf_free(&b);
  return rc;
}
int tpx__conn_info_decode(const uint8_t *buf, size_t len, struct tpx__conn_info *c) {
  struct rd r = {buf, len, 0, 0};
  memset(c, 0, sizeof(*c));
  if (rd_u32(&r) != BLOB_CONN_MAGIC) return tpx_err_quiet(TPX_EPROTO, "connection info: bad magic");
  uint8_t v = rd_u8(&r);
  if (v != BLOB_VERSION) return tpx_err_quiet(TPX_EVERSION, "connection info: version %u, we read %u", v, BLOB_VERSION);
  c->uuid = rd_u64(&r);
  c->gpu = (int32_t)rd_u32(&r);
  c->port = rd_u16(&r);
  rd_str(&r, c->name, sizeof(c->name));
  c->naddr = rd_u8(&r);
  if (c->naddr > CONN_MAX_ADDRS) return tpx_err_quiet(TPX_EPROTO, "connection info: %d addresses", c->naddr);
  for (int i = 0; i < c->naddr; i++) rd_str(&r, c->addr[i], CONN_ADDR_MAX);
  if (r.bad || r.pos != r.len) return tpx_err_quiet(TPX_EPROTO, "connection info: malformed (%zu bytes)", len);
  if (c->naddr == 0 || c->port == 0) return tpx_err_quiet(TPX_EPROTO, "connection info: no address or port");
  return 0;
}

int tpx__md_encode(const struct tpx__md_info *m, uint8_t *buf, size_t cap, size_t *len) {
  if (cap < MD_BLOB_BYTES) return tpx_err_quiet(TPX_EINVAL, "descriptor needs %d bytes, buffer has %zu", MD_BLOB_BYTES, cap);
  uint8_t *p = buf;
  tpx__put32(p, BLOB_MD_MAGIC);
  p[4] = BLOB_VERSION;
  p[5] = m->type;
  tpx__put32(p + 6, m->access);
  tpx__put32(p + 10, (uint32_t)m->device);
  tpx__put64(p + 14, m->owner);
  tpx__put64(p + 22, m->region);
  tpx__put64(p + 30, m->addr);
  tpx__put64(p + 38, m->len);
  *len = MD_BLOB_BYTES;
  return 0;
}
int tpx__md_decode(const uint8_t *p, size_t len, struct tpx__md_info *m) {
  if (len < 5 || tpx__get32(p) != BLOB_MD_MAGIC) return tpx_err_quiet(TPX_EPROTO, "memory descriptor: bad magic");
  if (p[4] != BLOB_VERSION) return tpx_err_quiet(TPX_EVERSION, "memory descriptor: version %u, we read %u", p[4], BLOB_VERSION);
  if (len != MD_BLOB_BYTES) return tpx_err_quiet(TPX_EPROTO, "memory descriptor: %zu bytes, expected %d", len, MD_BLOB_BYTES);
  m->type = p[5];
  m->access = tpx__get32(p + 6);
  m->device = (int32_t)tpx__get32(p + 10);
  m->owner = tpx__get64(p + 14);
  m->region = tpx__get64(p + 22);
  m->addr = tpx__get64(p + 30);
  m->len = tpx__get64(p + 38);
  if (m->type > 1 || (m->access & ~3u) != 0 || m->len == 0 || m->addr + m->len < m->addr)
    return tpx_err_quiet(TPX_EPROTO, "memory descriptor: invalid fields");
  return 0;
}
