/* Hand-written proto2 wire format for rxdm_proto.h's few messages. */
#include "rxdm_proto.h"

#include <errno.h>
#include <string.h>

struct rd {
  const uint8_t *p, *end;
};

static int varint(struct rd *r, uint64_t *v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    if (r->p >= r->end) return -EBADMSG;
    uint8_t b = *r->p++;
    *v |= (uint64_t)(b & 0x7f) << shift;
    if (!(b & 0x80)) return 0;
  }
  return -EBADMSG;
}

/* The next field: its number, wire type, and for LEN fields the bytes. */
static int field(struct rd *r, uint32_t *num, int *wt, uint64_t *v, struct rd *sub) {
  uint64_t key;
  int rc = varint(r, &key);
  if (rc) return rc;
  *num = (uint32_t)(key >> 3);
  *wt = (int)(key & 7);
  if (*num == 0 || key >> 32) return -EBADMSG;
  switch (*wt) {
    case 0: return varint(r, v);
    case 1:
    case 5: {
      size_t w = *wt == 1 ? 8 : 4;
      if ((size_t)(r->end - r->p) < w) return -EBADMSG;
      r->p += w;
      return 0;
    }
    case 2:
      if ((rc = varint(r, v))) return rc;
      if (*v > (uint64_t)(r->end - r->p)) return -EBADMSG;
      sub->p = r->p;
      sub->end = r->p + *v;
      r->p += *v;
      return 0;
    default: return -EBADMSG; /* groups: neither side uses them */
  }
}

static int str(const struct rd *s, char *out, size_t *len) {
  size_t n = (size_t)(s->end - s->p);
  if (n >= RXDM_STR_MAX) return -EMSGSIZE;
  memcpy(out, s->p, n);
  out[n] = '\0';
  if (len) *len = n;
  return 0;
}

#define NEXT_FIELD(r)                                                    \
  uint32_t num;                                                          \
  int wt, rc;                                                            \
  uint64_t v = 0;                                                        \
  struct rd sub = {0, 0};                                                \
  if ((rc = field((r), &num, &wt, &v, &sub))) return rc

static int addr(struct rd r, struct rxdm_addr *a) {
  while (r.p < r.end) {
    NEXT_FIELD(&r);
    if (num == 1 && wt == 2) {
      if ((rc = str(&sub, a->ip, NULL))) return rc;
      a->has_ip = 1;
    } else if (num == 2 && wt == 0) {
      a->port = (int32_t)v;
      a->has_port = 1;
    }
  }
  return 0;
}

static int ntuple(struct rd r, struct rxdm_msg *m) {
  while (r.p < r.end) {
    NEXT_FIELD(&r);
    if (num == 1 && wt == 0) m->flow_type = (int32_t)v, m->has_flow_type = 1;
    else if (num == 2 && wt == 2 && (rc = addr(sub, &m->src))) return rc;
    else if (num == 3 && wt == 2 && (rc = addr(sub, &m->dst))) return rc;
  }
  return 0;
}

static int rule(struct rd r, struct rxdm_msg *m) {
  while (r.p < r.end) {
    NEXT_FIELD(&r);
    if (num == 1 && wt == 2) {
      if ((rc = ntuple(sub, m))) return rc;
    } else if (num == 2 && wt == 0) {
      m->queue_id = (int32_t)v, m->has_queue_id = 1;
    } else if (num == 3 && wt == 2) {
      if ((rc = str(&sub, m->gpu, NULL))) return rc;
      m->has_gpu = 1;
    }
  }
  return 0;
}

int rxdm_decode(const uint8_t *buf, size_t n, struct rxdm_msg *m) {
  memset(m, 0, sizeof(*m));
  struct rd r = {buf, buf + n};
  while (r.p < r.end) {
    NEXT_FIELD(&r);
    if (wt != 2 || num == 5 || num > 6) continue; /* not a payload field of ours */
    /* A oneof: the last payload field wins, as in protobuf. */
    struct rxdm_msg fresh = {0};
    fresh.kind = (enum rxdm_kind)num;
    switch (num) {
      case RXDM_RAW: rc = str(&sub, fresh.raw, &fresh.raw_len); break;
      case RXDM_RULE: rc = rule(sub, &fresh); break;
      case RXDM_QUEUE_QUERY:
        while (sub.p < sub.end && rc == 0) {
          uint32_t n2;
          int wt2;
          uint64_t v2;
          struct rd s2;
          rc = field(&sub, &n2, &wt2, &v2, &s2);
          if (rc == 0 && n2 == 1 && wt2 == 2) rc = str(&s2, fresh.gpu, NULL), fresh.has_gpu = 1;
        }
        break;
      case RXDM_REGISTER:
        while (sub.p < sub.end && rc == 0) {
          uint32_t n2;
          int wt2;
          uint64_t v2 = 0;
          struct rd s2;
          rc = field(&sub, &n2, &wt2, &v2, &s2);
          if (rc == 0 && n2 == 1 && wt2 == 0) fresh.register_client = v2 != 0, fresh.has_register = 1;
        }
        break;
      default: break; /* a QueueIdResponse sent to us: kind only */
    }
    if (rc) return rc;
    *m = fresh;
  }
  return 0;
}

/* --- encoding --- */

struct wr {
  uint8_t *p, *end;
  int err;
};

static void put(struct wr *w, const void *b, size_t n) {
  if (w->err || (size_t)(w->end - w->p) < n) {
    w->err = 1;
    return;
  }
  memcpy(w->p, b, n);
  w->p += n;
}

static void put_varint(struct wr *w, uint64_t v) {
  uint8_t b[10];
  size_t n = 0;
  do {
    b[n++] = (uint8_t)((v & 0x7f) | (v > 0x7f ? 0x80 : 0));
    v >>= 7;
  } while (v);
  put(w, b, n);
}

static void put_key(struct wr *w, uint32_t num, int wt) { put_varint(w, (uint64_t)num << 3 | (uint64_t)wt); }

static void put_bytes(struct wr *w, uint32_t num, const void *b, size_t n) {
  put_key(w, num, 2);
  put_varint(w, n);
  put(w, b, n);
}

static void put_int(struct wr *w, uint32_t num, int64_t v) {
  put_key(w, num, 0);
  put_varint(w, (uint64_t)v); /* negative int32: ten bytes, as protobuf does */
}

/* Writes a nested message built by fn into w as field num. */
typedef void (*body_fn)(struct wr *w, const void *arg);
static void put_msg(struct wr *w, uint32_t num, body_fn fn, const void *arg) {
  uint8_t tmp[1024];
  struct wr inner = {tmp, tmp + sizeof(tmp), 0};
  fn(&inner, arg);
  if (inner.err) w->err = 1;
  put_bytes(w, num, tmp, (size_t)(inner.p - tmp));
}

static int frame(uint8_t *out, size_t cap, body_fn fn, const void *arg) {
  if (cap < 2) return -EMSGSIZE;
  struct wr w = {out + 2, out + (cap - 2 > RXDM_FRAME_MAX ? RXDM_FRAME_MAX + 2 : cap), 0};
  fn(&w, arg);
  if (w.err) return -EMSGSIZE;
  size_t n = (size_t)(w.p - (out + 2));
  out[0] = (uint8_t)(n >> 8);
  out[1] = (uint8_t)n;
  return (int)(n + 2);
}

struct raw_arg {
  const char *text;
  int code;
};

static void status_body(struct wr *w, const void *a) {
  const struct raw_arg *r = a;
  put_int(w, 1, r->code);
  put_bytes(w, 2, r->text, strlen(r->text));
}

static void raw_body(struct wr *w, const void *a) {
  const struct raw_arg *r = a;
  put_bytes(w, RXDM_RAW, r->text, strlen(r->text));
  if (r->code) put_msg(w, 5, status_body, r);
}

int rxdm_encode_raw(uint8_t *out, size_t cap, const char *text, int code) {
  struct raw_arg a = {text, code};
  return frame(out, cap, raw_body, &a);
}

int rxdm_encode_request_raw(uint8_t *out, size_t cap, const char *text) { return rxdm_encode_raw(out, cap, text, 0); }

struct queues_arg {
  const int *ids;
  int n;
};

static void queues_inner(struct wr *w, const void *a) {
  const struct queues_arg *q = a;
  for (int i = 0; i < q->n; i++) put_int(w, 1, q->ids[i]);
}

static void queues_body(struct wr *w, const void *a) { put_msg(w, RXDM_QUEUE_RESPONSE, queues_inner, a); }

int rxdm_encode_queues(uint8_t *out, size_t cap, const int *ids, int n) {
  struct queues_arg q = {ids, n};
  return frame(out, cap, queues_body, &q);
}

static void addr_body(struct wr *w, const void *a) {
  const struct rxdm_addr *s = a;
  if (s->has_ip) put_bytes(w, 1, s->ip, strlen(s->ip));
  if (s->has_port) put_int(w, 2, s->port);
}

static void ntuple_body(struct wr *w, const void *a) {
  const struct rxdm_msg *m = a;
  if (m->has_flow_type) put_int(w, 1, m->flow_type);
  put_msg(w, 2, addr_body, &m->src);
  put_msg(w, 3, addr_body, &m->dst);
}

static void rule_inner(struct wr *w, const void *a) {
  const struct rxdm_msg *m = a;
  put_msg(w, 1, ntuple_body, m);
  if (m->has_queue_id) put_int(w, 2, m->queue_id);
  if (m->has_gpu) put_bytes(w, 3, m->gpu, strlen(m->gpu));
}

static void rule_body(struct wr *w, const void *a) { put_msg(w, RXDM_RULE, rule_inner, a); }

int rxdm_encode_rule(uint8_t *out, size_t cap, const struct rxdm_msg *m) { return frame(out, cap, rule_body, m); }

static void register_inner(struct wr *w, const void *a) { put_int(w, 1, *(const int *)a); }
static void register_body(struct wr *w, const void *a) { put_msg(w, RXDM_REGISTER, register_inner, a); }

int rxdm_encode_register(uint8_t *out, size_t cap, int register_client) {
  return frame(out, cap, register_body, &register_client);
}
