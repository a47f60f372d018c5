/* Control-plane wire format and chunk arithmetic: no transport needed. */
#include <stdlib.h>
#include <string.h>

#include "engine/plan.h"
#include "engine/wire.h"
#include "testutil.h"
#include "tpx/mem.h"

static void test_frame_roundtrip(void **state) {
  (void)state;
  struct tpx__wbuf b = {0};
  struct tpx__wire_cts c = {0x0102030405060708ull, 42, 4096, 1};
  assert_int_equal(tpx__wire_put_cts(&b, &c), 0);
  /* little-endian everywhere: magic bytes, then the id's low byte first */
  assert_int_equal(b.len, WIRE_HDR_BYTES + 25);
  assert_memory_equal(b.p, "TPXC", 4);
  assert_int_equal(b.p[4], WIRE_VERSION);
  assert_int_equal(b.p[5], MSG_CTS);
  assert_int_equal(b.p[8], 25);
  assert_int_equal(b.p[WIRE_HDR_BYTES], 0x08);
  assert_int_equal(b.p[WIRE_HDR_BYTES + 7], 0x01);
  struct tpx__wire_frame f;
  for (size_t i = 0; i < b.len; i++) assert_int_equal(tpx__wire_frame_parse(b.p, i, &f), 0); /* partial: need more */
  assert_int_equal(tpx__wire_frame_parse(b.p, b.len, &f), (long)b.len);
  struct tpx__wire_cts d;
  assert_int_equal(tpx__wire_get_cts(&f, &d), 0);
  assert_true(d.recv_id == c.recv_id && d.tag == 42 && d.cap == 4096 && d.inl_ok == 1);
  tpx__wbuf_free(&b);
}

static void test_frame_rejects(void **state) {
  (void)state;
  struct tpx__wire_frame f;
  uint8_t junk[16] = "GET / HTTP/1.1\r\n";
  assert_int_equal(tpx__wire_frame_parse(junk, 1, &f), TPX_EPROTO); /* first byte already wrong */
  struct tpx__wbuf b = {0};
  assert_int_equal(tpx__wire_put_bye(&b), 0);
  b.p[4] = WIRE_VERSION + 1;
  assert_int_equal(tpx__wire_frame_parse(b.p, b.len, &f), TPX_EVERSION);
  b.p[4] = WIRE_VERSION;
  b.p[6] = 1; /* flags */
  assert_int_equal(tpx__wire_frame_parse(b.p, b.len, &f), TPX_EPROTO);
  b.p[6] = 0;
  b.p[5] = 0; /* type */
  assert_int_equal(tpx__wire_frame_parse(b.p, b.len, &f), TPX_EPROTO);
  b.p[5] = MSG_TYPE_MAX + 1;
  assert_int_equal(tpx__wire_frame_parse(b.p, b.len, &f), TPX_EPROTO);
  b.p[5] = MSG_BYE;
  tpx__put32(b.p + 8, WIRE_MAX_PAYLOAD + 1); /* oversize: refused before waiting for it */
  assert_int_equal(tpx__wire_frame_parse(b.p, b.len, &f), TPX_EPROTO);
  tpx__wbuf_free(&b);
}

static void test_hello(void **state) {
  (void)state;
  uint8_t handles[3 * TPX_NET_HANDLE_BYTES];
  for (size_t i = 0; i < sizeof(handles); i++) handles[i] = (uint8_t)(i * 7);
  struct tpx__wire_hello h = {0xabcdef, 5, 3, 0, "node-1:gpu5", handles};
  struct tpx__wbuf b = {0};
  assert_int_equal(tpx__wire_put_hello(&b, 1, &h), 0);
  struct tpx__wire_frame f;
  assert_true(tpx__wire_frame_parse(b.p, b.len, &f) > 0);
  assert_int_equal(f.type, MSG_HELLO_ACK);
  struct tpx__wire_hello g;
  assert_int_equal(tpx__wire_get_hello(&f, &g), 0);
  assert_true(g.uuid == 0xabcdef && g.gpu == 5 && g.nch == 3);
  assert_string_equal(g.name, "node-1:gpu5");
  assert_memory_equal(g.handles, handles, sizeof(handles));
  /* truncated payload, trailing byte, channel count out of range */
  struct tpx__wire_frame t = f;
  t.len--;
  assert_int_equal(tpx__wire_get_hello(&t, &g), TPX_EPROTO);
  uint8_t *copy = malloc(f.len + 1);
  memcpy(copy, f.payload, f.len);
  copy[f.len] = 0;
  t.payload = copy;
  t.len = f.len + 1;
  assert_int_equal(tpx__wire_get_hello(&t, &g), TPX_EPROTO);
  t.len = f.len;
  tpx__put16(copy + 12, 0);
  assert_int_equal(tpx__wire_get_hello(&t, &g), TPX_EPROTO);
  tpx__put16(copy + 12, WIRE_MAX_CHANNELS + 1);
  assert_int_equal(tpx__wire_get_hello(&t, &g), TPX_EPROTO);
  free(copy);
  h.nch = 0;
  assert_int_equal(tpx__wire_put_hello(&b, 0, &h), TPX_EINVAL);
  tpx__wbuf_free(&b);
}

static void test_rw(void **state) {
  (void)state;
  struct tpx__wire_entry e[3] = {{1, 0x1000, 10}, {2, 0x2000, 0}, {3, 0xffff000000000000ull, 1ull << 40}};
  struct tpx__wbuf b = {0};
  assert_int_equal(tpx__wire_put_rw_plan(&b, MSG_WRITE, 99, 2, 524288, e, 3, "note", 4, NULL, 0, 0, 0), 0);
  assert_int_equal(tpx__wire_put_rw_plan(&b, MSG_READ, 100, 0, 4096, e, 1, NULL, 0, NULL, 0, 0, 0), 0);
  assert_int_equal(tpx__wire_put_rw_plan(&b, MSG_WRITE, 101, 0, 4096, e, 0, "", 0, NULL, 0, 0, 0), 0); /* empty notif */
  struct tpx__wire_frame f;
  long n = tpx__wire_frame_parse(b.p, b.len, &f);
  assert_true(n > 0);
  struct tpx__wire_rw m;
  assert_int_equal(tpx__wire_get_rw(&f, &m), 0);
  assert_true(m.id == 99 && m.first_ch == 2 && m.chunk == 524288 && m.n == 3 && m.has_notif && m.notif_len == 4);
  assert_memory_equal(m.notif, "note", 4);
  for (uint32_t i = 0; i < 3; i++) {
    struct tpx__wire_entry x;
    tpx__wire_entry_at(m.entries, i, &x);
    assert_true(x.region == e[i].region && x.addr == e[i].addr && x.len == e[i].len);
  }
  long n2 = tpx__wire_frame_parse(b.p + n, b.len - (size_t)n, &f);
  assert_int_equal(tpx__wire_get_rw(&f, &m), 0);
  assert_true(m.id == 100 && m.n == 1 && !m.has_notif);
  assert_true(tpx__wire_frame_parse(b.p + n + n2, b.len - (size_t)(n + n2), &f) > 0);
  assert_int_equal(tpx__wire_get_rw(&f, &m), 0);
  assert_true(m.has_notif && m.notif_len == 0 && m.n == 0);
  /* bounds: too many entries / chunk size / notification size */
  assert_int_equal(tpx__wire_put_rw_plan(&b, MSG_WRITE, 1, 0, 4096, e, WIRE_MAX_ENTRIES + 1, NULL, 0,
                                         NULL, 0, 0, 0),
                   TPX_EINVAL);
  assert_int_equal(tpx__wire_put_rw_plan(&b, MSG_WRITE, 1, 0, 4096, e, 1, "x", TPX_NOTIF_MAX + 1,
                                         NULL, 0, 0, 0),
                   TPX_EINVAL);
  struct tpx__wbuf c = {0};
  assert_int_equal(tpx__wire_put_rw_plan(&c, MSG_WRITE, 1, 0, WIRE_MAX_CHUNK + 1, e, 1, NULL, 0, NULL, 0, 0, 0), 0);
  assert_true(tpx__wire_frame_parse(c.p, c.len, &f) > 0);
  assert_int_equal(tpx__wire_get_rw(&f, &m), TPX_EPROTO);
  c.len = 0;
  assert_int_equal(tpx__wire_put_rw_plan(&c, MSG_WRITE, 1, 0, 4096, e, 1, NULL, 0, NULL, 0, 0, 0), 0);
  tpx__put32(c.p + WIRE_HDR_BYTES + 14, 1000); /* claims 1000 entries, carries 1 */
  assert_true(tpx__wire_frame_parse(c.p, c.len, &f) > 0);
  assert_int_equal(tpx__wire_get_rw(&f, &m), TPX_EPROTO);
  tpx__put32(c.p + WIRE_HDR_BYTES + 14, 0xffffffffu);
  assert_int_equal(tpx__wire_get_rw(&f, &m), TPX_EPROTO);
  tpx__wbuf_free(&b);
  tpx__wbuf_free(&c);
}

static void test_small_msgs(void **state) {
  (void)state;
  struct tpx__wbuf b = {0};
  struct tpx__wire_status st = {ST_WRITE, 7, TPX_EACCES};
  struct tpx__wire_send s = {5, 12345, 3, 65536, 0, NULL, 0};
  struct tpx__wire_read_data rd = {9, 1, 0, 0, NULL, 0};
  assert_int_equal(tpx__wire_put_status(&b, &st), 0);
  assert_int_equal(tpx__wire_put_send(&b, &s, NULL, 0), 0);
  assert_int_equal(tpx__wire_put_read_data(&b, &rd, NULL, 0), 0);
  assert_int_equal(tpx__wire_put_notif(&b, "abc", 3), 0);
  assert_int_equal(tpx__wire_put_error(&b, TPX_EVERSION, "nope"), 0);
  assert_int_equal(tpx__wire_put_notif(&b, "x", TPX_NOTIF_MAX + 1), TPX_EINVAL);
  size_t off = 0;
  struct tpx__wire_frame f;
  long n;
  n = tpx__wire_frame_parse(b.p + off, b.len - off, &f);
  struct tpx__wire_status st2;
  assert_int_equal(tpx__wire_get_status(&f, &st2), 0);
  assert_true(st2.what == ST_WRITE && st2.id == 7 && st2.status == TPX_EACCES);
  off += (size_t)n;
  n = tpx__wire_frame_parse(b.p + off, b.len - off, &f);
  struct tpx__wire_send s2;
  assert_int_equal(tpx__wire_get_send(&f, &s2), 0);
  assert_true(s2.recv_id == 5 && s2.len == 12345 && s2.first_ch == 3 && s2.chunk == 65536);
  off += (size_t)n;
  n = tpx__wire_frame_parse(b.p + off, b.len - off, &f);
  struct tpx__wire_read_data rd2;
  assert_int_equal(tpx__wire_get_read_data(&f, &rd2), 0);
  assert_true(rd2.id == 9 && rd2.first_ch == 1);
  off += (size_t)n;
  n = tpx__wire_frame_parse(b.p + off, b.len - off, &f);
  struct tpx__wire_notif nt;
  assert_int_equal(tpx__wire_get_notif(&f, &nt), 0);
  assert_true(nt.len == 3 && memcmp(nt.msg, "abc", 3) == 0);
  off += (size_t)n;
  n = tpx__wire_frame_parse(b.p + off, b.len - off, &f);
  struct tpx__wire_error er;
  assert_int_equal(tpx__wire_get_error(&f, &er), 0);
  assert_int_equal(er.code, TPX_EVERSION);
  assert_string_equal(er.msg, "nope");
  off += (size_t)n;
  assert_int_equal(off, b.len);
  /* a status with a positive code or unknown kind is refused */
  b.len = 0;
  struct tpx__wire_status bad = {9, 1, 0};
  assert_int_equal(tpx__wire_put_status(&b, &bad), 0);
  assert_true(tpx__wire_frame_parse(b.p, b.len, &f) > 0);
  assert_int_equal(tpx__wire_get_status(&f, &st2), TPX_EPROTO);
  b.len = 0;
  struct tpx__wire_status bad2 = {ST_READ, 1, 5};
  assert_int_equal(tpx__wire_put_status(&b, &bad2), 0);
  assert_true(tpx__wire_frame_parse(b.p, b.len, &f) > 0);
  assert_int_equal(tpx__wire_get_status(&f, &st2), TPX_EPROTO);
  tpx__wbuf_free(&b);
}

/* MSG_SUM: what u8 | id u64 | n u16 | n (chunk u32 | sum u32), exactly. */
static void test_sum(void **state) {
  (void)state;
  struct tpx__wbuf b = {0};
  struct tpx__wire_sum s = {ST_READ, 0x0102030405060708ull, 2, {7, 9 | WIRE_SUM_NONE}, {0xe3069283u, 0}};
  assert_int_equal(tpx__wire_put_sum(&b, &s), 0);
  assert_int_equal(b.len, WIRE_HDR_BYTES + 11 + 16);
  assert_int_equal(b.p[5], MSG_SUM);
  assert_int_equal(b.p[WIRE_HDR_BYTES + 11 + 4], 0x83); /* the first sum, little-endian */
  struct tpx__wire_frame f;
  assert_int_equal(tpx__wire_frame_parse(b.p, b.len, &f), (long)b.len);
  struct tpx__wire_sum m;
  assert_int_equal(tpx__wire_get_sum(&f, &m), 0);
  assert_true(m.what == ST_READ && m.id == s.id && m.n == 2 && m.chunk[0] == 7 && m.sum[0] == 0xe3069283u &&
              m.chunk[1] == (9 | WIRE_SUM_NONE));
  uint8_t pl[11 + 8 * WIRE_MAX_SUMS + 8];
  memcpy(pl, f.payload, f.len);
  struct tpx__wire_frame t = {WIRE_VERSION, MSG_SUM, f.len - 1, pl}; /* truncated */
  assert_int_equal(tpx__wire_get_sum(&t, &m), TPX_EPROTO);
  t.len = f.len + 1; /* a trailing byte */
  assert_int_equal(tpx__wire_get_sum(&t, &m), TPX_EPROTO);
  t.len = f.len;
  pl[9] = 0; /* n = 0 */
  pl[10] = 0;
  assert_int_equal(tpx__wire_get_sum(&t, &m), TPX_EPROTO);
  pl[9] = (uint8_t)(WIRE_MAX_SUMS + 1); /* n over the bound: refused before it is read */
  assert_int_equal(tpx__wire_get_sum(&t, &m), TPX_EPROTO);
  pl[9] = 2;
  pl[0] = 4; /* no such id space */
  assert_int_equal(tpx__wire_get_sum(&t, &m), TPX_EPROTO);
  b.len = 0;
  struct tpx__wire_sum none = {ST_WRITE, 1, 0, {0}, {0}};
  assert_int_equal(tpx__wire_put_sum(&b, &none), TPX_EINVAL);
  assert_int_equal(b.len, 0);
  tpx__wbuf_free(&b);
}

/* MSG_PING: exactly kind u8 | seq u32, both kinds, seq from 1. */
static void test_ping(void **state) {
  (void)state;
  struct tpx__wbuf b = {0};
  struct tpx__wire_ping ask = {PING_ASK, 0x01020304u};
  assert_int_equal(tpx__wire_put_ping(&b, &ask), 0);
  assert_int_equal(b.len, WIRE_HDR_BYTES + WIRE_PING_BYTES);
  assert_int_equal(b.p[5], MSG_PING);
  assert_int_equal(b.p[WIRE_HDR_BYTES], PING_ASK);
  assert_int_equal(b.p[WIRE_HDR_BYTES + 1], 0x04); /* little-endian */
  struct tpx__wire_frame f;
  assert_int_equal(tpx__wire_frame_parse(b.p, b.len, &f), (long)b.len);
  struct tpx__wire_ping m;
  assert_int_equal(tpx__wire_get_ping(&f, &m), 0);
  assert_true(m.kind == PING_ASK && m.seq == 0x01020304u);
  /* truncated, trailing byte */
  uint8_t pl[WIRE_PING_BYTES + 1];
  memcpy(pl, f.payload, WIRE_PING_BYTES);
  pl[WIRE_PING_BYTES] = 0;
  struct tpx__wire_frame t = {WIRE_VERSION, MSG_PING, WIRE_PING_BYTES - 1, pl};
  assert_int_equal(tpx__wire_get_ping(&t, &m), TPX_EPROTO);
  t.len = WIRE_PING_BYTES + 1;
  assert_int_equal(tpx__wire_get_ping(&t, &m), TPX_EPROTO);
  t.len = 0;
  assert_int_equal(tpx__wire_get_ping(&t, &m), TPX_EPROTO);
  /* unknown kind, seq 0: refused both ways */
  t.len = WIRE_PING_BYTES;
  pl[0] = 3;
  assert_int_equal(tpx__wire_get_ping(&t, &m), TPX_EPROTO);
  pl[0] = PING_ANSWER;
  memset(pl + 1, 0, 4);
  assert_int_equal(tpx__wire_get_ping(&t, &m), TPX_EPROTO);
  pl[1] = 9;
  assert_int_equal(tpx__wire_get_ping(&t, &m), 0);
  assert_true(m.kind == PING_ANSWER && m.seq == 9);
  b.len = 0;
  struct tpx__wire_ping bad = {0, 1}, zero = {PING_ASK, 0};
  assert_int_equal(tpx__wire_put_ping(&b, &bad), TPX_EINVAL);
  assert_int_equal(tpx__wire_put_ping(&b, &zero), TPX_EINVAL);
  assert_int_equal(b.len, 0);
  /* the framer knows the type; one past the last is refused */
  assert_int_equal(tpx__wire_put_ping(&b, &ask), 0);
  b.p[5] = MSG_TYPE_MAX + 1;
  assert_int_equal(tpx__wire_frame_parse(b.p, b.len, &f), TPX_EPROTO);
  tpx__wbuf_free(&b);
}

static void test_inline(void **state) {
  (void)state;
  struct tpx__wbuf b = {0};
  char d1[] = "hello ", d2[] = "world";
  struct iovec iov[2] = {{d1, 6}, {d2, 5}};
  struct tpx__wire_send s = {1, 11, 0, 4096, 1, NULL, 0};
  assert_int_equal(tpx__wire_put_send(&b, &s, iov, 2), 0);
  struct tpx__wire_entry e[2] = {{1, 100, 6}, {1, 200, 5}};
  assert_int_equal(tpx__wire_put_rw_plan(&b, MSG_WRITE, 2, 0, 4096, e, 2, NULL, 0, iov, 2, 0, 0), 0);
  struct tpx__wire_read_data rd = {3, 0, 1, 11, NULL, 0};
  assert_int_equal(tpx__wire_put_read_data(&b, &rd, iov, 2), 0);
  size_t off = 0;
  struct tpx__wire_frame f;
  long n = tpx__wire_frame_parse(b.p, b.len, &f);
  struct tpx__wire_send s2;
  assert_int_equal(tpx__wire_get_send(&f, &s2), 0);
  assert_true(s2.inl && s2.len == 11 && memcmp(s2.data, "hello world", 11) == 0);
  off += (size_t)n;
  n = tpx__wire_frame_parse(b.p + off, b.len - off, &f);
  struct tpx__wire_rw m;
  assert_int_equal(tpx__wire_get_rw(&f, &m), 0);
  assert_true(m.inl && m.inl_len == 11 && memcmp(m.data, "hello world", 11) == 0);
  off += (size_t)n;
  n = tpx__wire_frame_parse(b.p + off, b.len - off, &f);
  struct tpx__wire_read_data rd2;
  assert_int_equal(tpx__wire_get_read_data(&f, &rd2), 0);
  assert_true(rd2.inl && rd2.inl_len == 11 && memcmp(rd2.data, "hello world", 11) == 0);
  /* lengths that do not add up are refused on both ends */
  s.len = 12;
  assert_int_equal(tpx__wire_put_send(&b, &s, iov, 2), TPX_EINVAL);
  e[1].len = 6;
  assert_int_equal(tpx__wire_put_rw_plan(&b, MSG_WRITE, 2, 0, 4096, e, 2, NULL, 0, iov, 2, 0, 0), TPX_EINVAL);
  assert_int_equal(tpx__wire_put_rw_plan(&b, MSG_READ, 2, 0, 4096, e, 1, NULL, 0, iov, 1, 0, 0), TPX_EINVAL);
  b.len = 0;
  s.len = 11;
  assert_int_equal(tpx__wire_put_send(&b, &s, iov, 2), 0);
  tpx__put64(b.p + WIRE_HDR_BYTES + 8, 10); /* says 10, carries 11 */
  assert_true(tpx__wire_frame_parse(b.p, b.len, &f) > 0);
  assert_int_equal(tpx__wire_get_send(&f, &s2), TPX_EPROTO);
  tpx__put64(b.p + WIRE_HDR_BYTES + 8, 1u << 20); /* over the inline limit */
  assert_int_equal(tpx__wire_get_send(&f, &s2), TPX_EPROTO);
  tpx__wbuf_free(&b);
}

static void test_blobs(void **state) {
  (void)state;
  struct tpx__conn_info ci = {0x1122334455667788ull, 3, 20003, "gpu-host:3", 2, {"10.0.0.1", "::1"}};
  uint8_t buf[TPX_CONN_INFO_MAX];
  size_t len = 0;
  assert_int_equal(tpx__conn_info_encode(&ci, buf, sizeof(buf), &len), 0);
  struct tpx__conn_info d;
  assert_int_equal(tpx__conn_info_decode(buf, len, &d), 0);
  assert_true(d.uuid == ci.uuid && d.gpu == 3 && d.port == 20003 && d.naddr == 2);
  assert_string_equal(d.addr[1], "::1");
  assert_string_equal(d.name, "gpu-host:3");
  assert_int_equal(tpx__conn_info_decode(buf, len - 1, &d), TPX_EPROTO);
  buf[4] = 9;
  assert_int_equal(tpx__conn_info_decode(buf, len, &d), TPX_EVERSION);
  assert_int_equal(tpx__conn_info_encode(&ci, buf, 10, &len), TPX_EINVAL);

  struct tpx__md_info m = {1, 2, 0x7f0000001000ull, 1ull << 33, TPX_ACCESS_READ, 0, 0};
  assert_int_equal(tpx__md_encode(&m, buf, sizeof(buf), &len), 0);
  assert_int_equal(len, MD_BLOB_BYTES);
  struct tpx__md_info n;
  assert_int_equal(tpx__md_decode(buf, len, &n), 0);
  assert_true(n.owner == 1 && n.region == 2 && n.addr == m.addr && n.len == m.len && n.access == TPX_ACCESS_READ);
  assert_int_equal(tpx__md_decode(buf, len + 1, &n), TPX_EPROTO);
  tpx__put64(buf + 38, 0); /* zero length */
  assert_int_equal(tpx__md_decode(buf, len, &n), TPX_EPROTO);
  buf[0] ^= 1;
  assert_int_equal(tpx__md_decode(buf, len, &n), TPX_EPROTO);
}

/* Brute force: chunk sequence from a plain loop over entries. */
static void test_plan(void **state) {
  (void)state;
  srand(7);
  for (int iter = 0; iter < 300; iter++) {
    uint32_t n = 1 + (uint32_t)(rand() % 12);
    uint32_t chunk = 1 + (uint32_t)(rand() % 50);
    struct tpx__xent e[12];
    uint64_t expect_off[2000];
    uint32_t expect_ent[2000];
    uint64_t k = 0;
    for (uint32_t i = 0; i < n; i++) {
      e[i].mem = NULL;
      e[i].off = 0;
      e[i].len = (rand() % 4 == 0) ? 0 : (uint64_t)(rand() % 120);
      for (uint64_t o = 0; o < e[i].len; o += chunk) {
        expect_ent[k] = i;
        expect_off[k] = o;
        k++;
      }
    }
    assert_int_equal(tpx__plan_nchunks(e, n, chunk), k);
    uint32_t nch = 1 + (uint32_t)(rand() % 8), first = (uint32_t)(rand() % 64);
    uint64_t seen = 0;
    for (uint32_t c = 0; c < nch; c++) {
      uint64_t idx = tpx__plan_first_idx(c, first, nch);
      if (idx >= k) continue;
      struct tpx__cursor cur;
      tpx__plan_seek_packed(e, n, chunk, 0, idx, &cur);
      for (;;) {
        assert_true(cur.idx < k);
        assert_int_equal((first + cur.idx) % nch, c); /* round robin from first */
        assert_int_equal(cur.e, expect_ent[cur.idx]);
        assert_int_equal(cur.off, expect_off[cur.idx]);
        uint64_t len = tpx__plan_len(e, chunk, &cur);
        assert_true(len >= 1 && len <= chunk);
        seen++;
        if (!tpx__plan_advance(e, n, chunk, &cur, nch)) break;
      }
    }
    assert_int_equal(seen, k); /* every chunk exactly once over all channels */
  }
  struct tpx__xent big = {NULL, 0, UINT64_MAX};
  assert_int_equal(tpx__plan_nchunks(&big, 1, 1), UINT64_MAX);
  struct tpx__xent two[2] = {{NULL, 0, UINT64_MAX}, {NULL, 0, UINT64_MAX}};
  assert_int_equal(tpx__plan_nchunks(two, 2, 1), UINT64_MAX);
}

/* The packed plan against a plain reference: the rule of plan.h written as
 * a loop over entries, byte by byte of the rule, without plan.c's skipping
 * arithmetic. Every byte lies in exactly one chunk, in order. */
struct pchunk {
  uint32_t e, end;
  uint64_t off, len;
};

static uint64_t packed_reference(const struct tpx__xent *e, uint32_t n, uint32_t chunk, uint64_t pmax,
                                 struct pchunk *out) {
  uint64_t k = 0, off = 0;
  uint32_t i = 0;
  while (i < n) {
    if (e[i].len == 0) {
      i++;
      continue;
    }
    uint64_t rem = e[i].len - off;
    if (rem >= chunk || rem > pmax) { /* a piece of one entry */
      uint64_t l = rem < chunk ? rem : chunk;
      out[k++] = (struct pchunk){i, i + 1, off, l};
      off += l;
      if (off == e[i].len) {
        i++;
        off = 0;
      }
      continue;
    }
    struct pchunk c = {i, i + 1, off, rem};
    for (uint32_t j = i + 1; j < n && e[j].len <= pmax && c.len + e[j].len <= chunk; j++) {
      c.len += e[j].len;
      c.end = j + 1;
    }
    out[k++] = c;
    i = c.end;
    off = 0;
  }
  return k;
}

static void test_plan_packed(void **state) {
  (void)state;
  srand(11);
  static struct pchunk ref[4000];
  for (int iter = 0; iter < 2000; iter++) {
    uint32_t n = 1 + (uint32_t)(rand() % 40);
    uint32_t chunk = 1 + (uint32_t)(rand() % 64);
    uint64_t pmax = 1 + (uint64_t)(rand() % 80);
    struct tpx__xent e[40];
    for (uint32_t i = 0; i < n; i++) {
      e[i].mem = NULL;
      e[i].off = 0;
      int r = rand() % 8;
      e[i].len = r == 0 ? 0 : r < 5 ? (uint64_t)(1 + rand() % 12) : (uint64_t)(rand() % 150);
    }
    uint64_t k = packed_reference(e, n, chunk, pmax, ref);
    assert_true(k <= tpx__plan_nchunks(e, n, chunk));
    assert_int_equal(tpx__plan_nchunks_packed(e, n, chunk, pmax), k);
    assert_int_equal(tpx__plan_nchunks_packed(e, n, chunk, 0), tpx__plan_nchunks(e, n, chunk));
    uint32_t nch = 1 + (uint32_t)(rand() % 8), first = (uint32_t)(rand() % 64);
    uint64_t seen = 0, bytes = 0;
    for (uint32_t c = 0; c < nch; c++) {
      uint64_t idx = tpx__plan_first_idx(c, first, nch);
      if (idx >= k) continue;
      struct tpx__cursor cur;
      tpx__plan_seek_packed(e, n, chunk, pmax, idx, &cur);
      for (;;) {
        assert_true(cur.idx < k);
        const struct pchunk *r = &ref[cur.idx];
        assert_int_equal(cur.e, r->e);
        assert_int_equal(cur.off, r->off);
        assert_int_equal(cur.len, r->len);
        assert_true(cur.len >= 1 && cur.len <= chunk);
        if (tpx__plan_gathered(e, &cur)) assert_int_equal(cur.end, r->end); /* where the scatter stops */
        seen++;
        bytes += cur.len;
        if (!tpx__plan_advance(e, n, chunk, &cur, nch)) break;
      }
    }
    assert_int_equal(seen, k);
    uint64_t total = 0;
    for (uint32_t i = 0; i < n; i++) total += e[i].len;
    assert_int_equal(bytes, total);
  }
  /* 1000 x 64 KiB in 512 KiB chunks, pieces up to 64 KiB: 8 blocks a chunk. */
  static struct tpx__xent kv[1000];
  for (int i = 0; i < 1000; i++)
    kv[i] = (struct tpx__xent){NULL, 0, 65536};
  assert_int_equal(tpx__plan_nchunks_packed(kv, 1000, 524288, 65536), 125);
  assert_int_equal(tpx__plan_nchunks_packed(kv, 1000, 524288, 32768), 1000); /* blocks over the limit: alone */
  struct tpx__xent big = {NULL, 0, UINT64_MAX};
  assert_int_equal(tpx__plan_nchunks_packed(&big, 1, 1, 1), UINT64_MAX);
}

/* WRITE / READ flags byte: the piece limit's log2 round-trips; values past
 * WIRE_MAX_PACK_LOG2 and unknown bits are refused. */
static void test_rw_pack_flags(void **state) {
  (void)state;
  struct tpx__wire_entry e[2] = {{1, 0x1000, 10}, {1, 0x2000, 20}};
  struct tpx__wbuf b = {0};
  assert_int_equal(tpx__wire_put_rw_plan(&b, MSG_WRITE, 7, 1, 65536, e, 2, NULL, 0, NULL, 0, 13, 0), 0);
  struct tpx__wire_frame f;
  assert_true(tpx__wire_frame_parse(b.p, b.len, &f) > 0);
  struct tpx__wire_rw m;
  assert_int_equal(tpx__wire_get_rw(&f, &m), 0);
  assert_int_equal(m.pack_log2, 13);
  assert_int_equal(m.inl, 0);
  /* READ with an inline answer welcome and packing */
  struct tpx__wbuf c = {0};
  assert_int_equal(tpx__wire_put_rw_plan(&c, MSG_READ, 8, 0, 65536, e, 2, NULL, 0, NULL, 1, WIRE_MAX_PACK_LOG2, 0), 0);
  assert_true(tpx__wire_frame_parse(c.p, c.len, &f) > 0);
  assert_int_equal(tpx__wire_get_rw(&f, &m), 0);
  assert_int_equal(m.pack_log2, WIRE_MAX_PACK_LOG2);
  assert_int_equal(m.inl, 1);
  assert_int_equal(tpx__wire_put_rw_plan(&c, MSG_WRITE, 9, 0, 65536, e, 2, NULL, 0, NULL, 0, WIRE_MAX_PACK_LOG2 + 1, 0),
                   TPX_EINVAL);
  /* the flags byte is the frame's last: k = 23, then bit 7 */
  assert_true(tpx__wire_frame_parse(b.p, b.len, &f) > 0);
  b.p[b.len - 1] = (uint8_t)(23 << WIRE_RW_PACK_SHIFT);
  assert_int_equal(tpx__wire_get_rw(&f, &m), TPX_EPROTO);
  b.p[b.len - 1] = 0x80;
  assert_int_equal(tpx__wire_get_rw(&f, &m), TPX_EPROTO);
  tpx__wbuf_free(&b);
  tpx__wbuf_free(&c);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_plan_packed),     cmocka_unit_test(test_rw_pack_flags),
      cmocka_unit_test(test_frame_roundtrip), cmocka_unit_test(test_frame_rejects),
      cmocka_unit_test(test_hello),           cmocka_unit_test(test_rw),
      cmocka_unit_test(test_small_msgs),      cmocka_unit_test(test_blobs),
      cmocka_unit_test(test_plan),            cmocka_unit_test(test_inline),
      cmocka_unit_test(test_ping),
      cmocka_unit_test(test_sum),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
