/* Writes the generated seeds of tests/fuzz/corpus/<harness>/ (gen-*): small
 * valid inputs made by the library's own encoders, plus a few edge cases.
 * Regressions (inputs that once failed) live beside them, named for the
 * bug. Run: fuzz_gen_corpus tests/fuzz/corpus (the build's target of that
 * name; the seeds are checked in, so only a change of a wire format or of
 * a harness's input language needs a rerun). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "engine/wire.h"
#include "sock/wire.h"
#include "tpx/error.h"

static const char *root;

static void put(const char *harness, const char *name, const void *p, size_t n) {
  char path[512];
  snprintf(path, sizeof(path), "%s/%s", root, harness);
  if (mkdir(path, 0755) != 0 && errno != EEXIST) {
    perror(path);
    exit(1);
  }
  snprintf(path, sizeof(path), "%s/%s/gen-%s", root, harness, name);
  FILE *f = fopen(path, "wb");
  if (!f || fwrite(p, 1, n, f) != n || fclose(f) != 0) {
    perror(path);
    exit(1);
  }
}

/* ---- the engine's control frames ---- */
static void ctl_frames(void) {
  struct tpx__wbuf all = {0};
  uint8_t handles[2 * TPX_NET_HANDLE_BYTES];
  for (size_t i = 0; i < sizeof(handles); i++)
    handles[i] = (uint8_t)i;
  struct tpx__wire_hello h = {0x1122334455667788ull, 3, 2, HELLO_F_PACK, "node-a", handles};
  struct tpx__wire_entry e[3] = {{7, 0x1000, 5000}, {7, 0x9000, 100}, {9, 0x20000, 0}};
  uint8_t data[5100];
  for (size_t i = 0; i < sizeof(data); i++)
    data[i] = (uint8_t)(i * 7);
  struct iovec iov = {data, 5100};
  struct iovec small = {data, 100};
  struct tpx__wire_cts cts = {4, 99, 1 << 20, 1};
  struct tpx__wire_send snd = {4, 100, 1, 65536, 1, NULL, 0};
  struct tpx__wire_send snd_ch = {5, 1 << 20, 3, 1 << 20, 0, NULL, 0};
  struct tpx__wire_read_data rd = {8, 0, 1, 100, NULL, 0};
  struct tpx__wire_read_data rd_ch = {9, 2, 0, 0, NULL, 0};
  struct tpx__wire_status st = {ST_WRITE, 12, 0}, st_bad = {ST_READ, 13, TPX_EACCES};
  struct {
    const char *name;
    int rc;
    struct tpx__wbuf b;
  } f[40];
  int n = 0;
#define FRAME(nm, call)                                                                                                \
  do {                                                                                                                 \
    f[n].name = nm;                                                                                                    \
    memset(&f[n].b, 0, sizeof(f[n].b));                                                                                \
    struct tpx__wbuf *b = &f[n].b;                                                                                     \
    f[n].rc = call;                                                                                                    \
    n++;                                                                                                               \
  } while (0)
  FRAME("hello", tpx__wire_put_hello(b, 0, &h));
  FRAME("hello_ack", tpx__wire_put_hello(b, 1, &h));
  FRAME("error", tpx__wire_put_error(b, TPX_EPROTO, "you lied"));
  FRAME("error_setup", tpx__wire_put_error(b, TPX_EINTERNAL, "channel 0: accept on net device 0 failed: internal error"));
  FRAME("error_refused", tpx__wire_put_error(b, TPX_EAUTH, "refused"));
  FRAME("cts", tpx__wire_put_cts(b, &cts));
  FRAME("send_inline", tpx__wire_put_send(b, &snd, &small, 1));
  struct tpx__wire_send snd_sum = {4, 100, 1, 65536, 2, NULL, 0};
  FRAME("send_inline_sum", tpx__wire_put_send(b, &snd_sum, &small, 1));
  FRAME("send_chunks", tpx__wire_put_send(b, &snd_ch, NULL, 0));
  FRAME("write_inline", tpx__wire_put_rw_plan(b, MSG_WRITE, 21, 0, 4096, e, 3, "done", 4, &iov, 1, 0, 0));
  FRAME("write_inline_sum", tpx__wire_put_rw_plan(b, MSG_WRITE, 25, 0, 4096, e, 3, "done", 4, &iov, 1, 0, 1));
  FRAME("write_packed", tpx__wire_put_rw_plan(b, MSG_WRITE, 22, 5, 4096, e, 3, "", 0, NULL, 0, 12, 0));
  FRAME("read", tpx__wire_put_rw_plan(b, MSG_READ, 23, 0, 1024, e, 2, NULL, 0, NULL, 1, 0, 0));
  FRAME("read_packed", tpx__wire_put_rw_plan(b, MSG_READ, 24, 0, 8192, e, 3, "n", 1, NULL, 0, 13, 0));
  FRAME("read_data_inline", tpx__wire_put_read_data(b, &rd, &small, 1));
  FRAME("read_data_chunks", tpx__wire_put_read_data(b, &rd_ch, NULL, 0));
  FRAME("status", tpx__wire_put_status(b, &st));
  FRAME("status_refused", tpx__wire_put_status(b, &st_bad));
  FRAME("notif", tpx__wire_put_notif(b, "hello there", 11));
  FRAME("bye", tpx__wire_put_bye(b));
  struct tpx__wire_auth au = {AUTH_RESPONSE, {1, 2, 3}, {4, 5, 6}};
  FRAME("auth_response", tpx__wire_put_auth(b, &au));
  struct tpx__wire_relisten rl_handle = {RELISTEN_HANDLE, 1, 2, TPX_EINTERNAL, handles};
  struct tpx__wire_relisten rl_ask = {RELISTEN_ASK, 0, 0, TPX_ESYSTEM, NULL};
  struct tpx__wire_relisten rl_up = {RELISTEN_UP, 0, 3, 0, NULL};
  FRAME("relisten_handle", tpx__wire_put_relisten(b, &rl_handle));
  FRAME("relisten_ask", tpx__wire_put_relisten(b, &rl_ask));
  FRAME("relisten_up", tpx__wire_put_relisten(b, &rl_up));
  struct tpx__wire_sched sched = {5, {0, 1, 0, 2, 3}};
  FRAME("sched", tpx__wire_put_sched(b, &sched));
  struct tpx__wire_chan down = {.step = CHAN_DOWN, .ch = 2, .code = TPX_ETIMEDOUT};
  struct tpx__wire_chan ask = {.step = CHAN_ASK, .ch = 2, .what = ST_WRITE, .id = 77};
  struct tpx__wire_chan verdict = {.step = CHAN_VERDICT, .ch = 2, .what = ST_READ, .id = 78, .layers = 1, .need = 1};
  struct tpx__wire_chan resend = {
      .step = CHAN_RESEND, .ch = 2, .what = ST_SEND, .id = 79, .seed = 5, .pat = {3, {0, 1, 3}}};
  struct tpx__wire_chan rejoin = {.step = CHAN_REJOIN, .ch = 1, .gen = 2, .handle = handles};
  struct tpx__wire_chan up = {.step = CHAN_UP, .ch = 1, .gen = 2};
  FRAME("chan_down", tpx__wire_put_chan(b, &down));
  FRAME("chan_ask", tpx__wire_put_chan(b, &ask));
  FRAME("chan_verdict", tpx__wire_put_chan(b, &verdict));
  FRAME("chan_resend", tpx__wire_put_chan(b, &resend));
  FRAME("chan_rejoin", tpx__wire_put_chan(b, &rejoin));
  FRAME("chan_up", tpx__wire_put_chan(b, &up));
  struct tpx__wire_chan landed = {.step = CHAN_LANDED, .ch = 0, .what = ST_SEND, .id = 80};
  FRAME("chan_landed", tpx__wire_put_chan(b, &landed));
  struct tpx__wire_chan rate = {.step = CHAN_RATE, .ch = 3, .gen = 12345};
  FRAME("chan_rate", tpx__wire_put_chan(b, &rate));
  struct tpx__wire_ping ping_ask = {PING_ASK, 1}, ping_answer = {PING_ANSWER, 0x01020304u};
  FRAME("ping_ask", tpx__wire_put_ping(b, &ping_ask));
  FRAME("ping_answer", tpx__wire_put_ping(b, &ping_answer));
  struct tpx__wire_sum sum = {ST_WRITE, 0x0000000100000002ull, 2, {0, 5 | WIRE_SUM_NONE}, {0xe3069283u, 0}};
  FRAME("sum", tpx__wire_put_sum(b, &sum));
  for (int i = 0; i < n; i++) {
    if (f[i].rc != 0) {
      fprintf(stderr, "gen_corpus: frame %s: %d\n", f[i].name, f[i].rc);
      exit(1);
    }
    put("ctl_frames", f[i].name, f[i].b.p, f[i].b.len);
    for (size_t k = 0; k < f[i].b.len; k++) { /* the whole stream, one after the other */
      if (all.len == all.cap) {
        all.cap = all.cap ? all.cap * 2 : 4096;
        all.p = realloc(all.p, all.cap);
      }
      all.p[all.len++] = f[i].b.p[k];
    }
  }
  put("ctl_frames", "stream", all.p, all.len);
  put("ctl_frames", "truncated", all.p, 30);
  uint8_t v2[WIRE_HDR_BYTES];
  memcpy(v2, f[0].b.p, sizeof(v2));
  v2[4] = 2;
  put("ctl_frames", "version2", v2, sizeof(v2));
  /* notifications: the harness's steps, its frames inside */
  uint8_t nb[256];
  size_t k = 0;
  nb[k++] = 3;    /* TPX_MAX_NOTIFS 4 */
  nb[k++] = 0x00; /* TPX_MAX_NOTIF_BYTES 8192 */
  nb[k++] = 0x20;
  nb[k++] = 0;                            /* a standalone notification */
  nb[k++] = 11, nb[k++] = 0;              /* its length */
  memcpy(nb + k, f[14].b.p, f[14].b.len); /* the frame */
  k += f[14].b.len;
  nb[k++] = 1 | 8, nb[k++] = 3, nb[k++] = 0, nb[k++] = 'a', nb[k++] = 'b',
  nb[k++] = 'c';                          /* write + notif */
  nb[k++] = 1, nb[k++] = 0, nb[k++] = 0;  /* write, none */
  nb[k++] = 0, nb[k++] = 11, nb[k++] = 0; /* behind them */
  memcpy(nb + k, f[14].b.p, f[14].b.len);
  k += f[14].b.len;
  nb[k++] = 4; /* pop */
  nb[k++] = 2; /* the write lands: its notification, then the one behind */
  nb[k++] = 3; /* the next write fails */
  nb[k++] = 4, nb[k++] = 4, nb[k++] = 4;
  put("notif", "mixed", nb, k);
  nb[5] = 0xff, nb[6] = 0xff; /* a length the frame does not have */
  put("notif", "bad_length", nb, k);
  for (int i = 0; i < n; i++)
    free(f[i].b.p);
  free(all.p);
}

/* ---- connection info, listen handles, descriptors, part headers ---- */
static void blobs(void) {
  struct tpx__conn_info c = {0xabcdefull, 1, 7000, "node-b", 2, {"10.0.0.2", "fe80::1%eth0"}};
  uint8_t b[1024];
  size_t len;
  if (tpx__conn_info_encode(&c, b, sizeof(b), &len) != 0) exit(1);
  put("conn_info", "two_addrs", b, len);
  c.naddr = CONN_MAX_ADDRS;
  for (int i = 0; i < CONN_MAX_ADDRS; i++)
    snprintf(c.addr[i], CONN_ADDR_MAX, "192.168.1.%d", i);
  if (tpx__conn_info_encode(&c, b, sizeof(b), &len) != 0) exit(1);
  put("conn_info", "eight_addrs", b, len);
  uint8_t h[TPX_NET_HANDLE_BYTES] = {0};
  tpx__put32(h + TPX_WH_MAGIC, TPX_WIRE_HANDLE_MAGIC);
  tpx__put16(h + TPX_WH_VERSION, TPX_WIRE_VERSION);
  tpx__put16(h + TPX_WH_FAMILY, 4);
  h[TPX_WH_ADDR] = 127, h[TPX_WH_ADDR + 3] = 1;
  h[TPX_WH_PORT] = 0x1b, h[TPX_WH_PORT + 1] = 0x58;
  tpx__put16(h + TPX_WH_NSOCKS, 4);
  tpx__put64(h + TPX_WH_NONCE, 0x5eed);
  put("conn_info", "handle_v4", h, sizeof(h));
  tpx__put16(h + TPX_WH_FAMILY, 6);
  memset(h + TPX_WH_ADDR, 0, 16);
  h[TPX_WH_ADDR + 15] = 1;
  tpx__put32(h + TPX_WH_SCOPE, 2);
  put("conn_info", "handle_v6", h, sizeof(h));
  tpx__put64(h + TPX_WH_STATE, 77); /* connector state: refused */
  put("conn_info", "handle_state", h, sizeof(h));

  struct tpx__md_info m = {0x1234, 0x99, 0x7f0000001000ull, 1 << 20, 3, 0, -1};
  uint8_t d[MD_BLOB_BYTES];
  if (tpx__md_encode(&m, d, sizeof(d), &len) != 0) exit(1);
  put("mem_desc", "host_rw", d, len);
  m.type = 1, m.device = 3, m.access = 1;
  tpx__md_encode(&m, d, sizeof(d), &len);
  put("mem_desc", "cuda_r", d, len);
  m.addr = UINT64_MAX - 10, m.len = 100; /* wraps: refused */
  tpx__md_encode(&m, d, sizeof(d), &len);
  put("mem_desc", "wraps", d, len);

  uint8_t p[4 * TPX_WIRE_PART_BYTES];
  tpx__wire_part_encode(p, 0, 0, 0, 0);                   /* empty message */
  tpx__wire_part_encode(p + 32, 1, 200000, 65536, 65536); /* a middle part */
  tpx__wire_part_encode(p + 64, 2, 1ull << 40, (1ull << 40) - 4096, 4096);
  tpx__wire_part_encode(p + 96, 3, 100, 4096, 0); /* refused: beyond the size */
  put("sock_part", "four", p, sizeof(p));
}

/* ---- the transport's receive side: the harnesses' step languages ---- */
struct steps {
  uint8_t b[16384];
  size_t n;
};
static void u8(struct steps *s, unsigned v) {
  s->b[s->n++] = (uint8_t)v;
}
static void u16(struct steps *s, unsigned v) {
  u8(s, v & 0xff), u8(s, v >> 8);
}
static void u32(struct steps *s, uint32_t v) {
  u16(s, v & 0xffff), u16(s, v >> 16);
}

/* fuzz_sock_recv: a part with explicit seq, size, page offset, the rest of
 * the message (or a page less: prefix), and pay payload bytes (pattern). */
static void recv_part(struct steps *s, int sock, int settle, uint32_t seq, unsigned size,
                      unsigned page, int prefix, unsigned pay) {
  u8(s, (unsigned)sock << 4 | (settle ? 7 : 2));
  u8(s, 1 | (prefix ? 64 : 0));
  u32(s, seq);
  u16(s, size);
  u8(s, page);
  u16(s, pay);
  for (unsigned k = 0; k < pay && k < 256; k++)
    u8(s, k * 13);
}
/* shape (default mode only; strict and unpack read none): bit 0 a list of
 * 1 + (shape >> 1) % 4 pieces (irecvv), bit 5 an empty piece among them. */
static void recv_post(struct steps *s, unsigned cap, int strict, unsigned shape) {
  u8(s, 0), u16(s, cap);
  if (!strict) u8(s, shape);
}
static void recv_test(struct steps *s, unsigned k) {
  u8(s, 6), u8(s, k);
}

static void sock_seeds(void) {
  static const char *const modes[] = {"four", "strict_four", "unpack_four"};
  for (int mode = 0; mode < 3; mode++) {
    struct steps s = {.n = 0};
    u8(&s, (mode == 1) | 1 << 1 | (mode == 2) << 3); /* two data sockets */
    int st = mode != 0;
    recv_post(&s, 8192, st, 0), recv_post(&s, 100, st, 0), recv_post(&s, 0, st, 0),
        recv_post(&s, 50, st, 0);
    recv_part(&s, 1, 0, 0, 8192, 0, 1, 4096); /* message 0: [0, 4096) on socket 1 */
    recv_part(&s, 2, 1, 0, 8192, 1, 0, 4096); /* and [4096, 8192) on socket 2 */
    recv_part(&s, 0, 1, 1, 100, 0, 0, 100);   /* message 1 whole on socket 0 */
    recv_part(&s, 0, 1, 2, 0, 0, 0, 0);       /* message 2: empty */
    recv_part(&s, 1, 1, 3, 200, 0, 0, 200);   /* message 3: truncated into 50 */
    recv_test(&s, 0), recv_test(&s, 1), recv_test(&s, 2), recv_test(&s, 3);
    put("sock_recv", modes[mode], s.b, s.n);
  }
  /* The same messages into lists of pieces (default mode). */
  struct steps s = {.n = 0};
  u8(&s, 1 << 1);
  recv_post(&s, 8192, 0, 1 | 3 << 1 | 0x20), recv_post(&s, 100, 0, 1 | 1 << 1),
      recv_post(&s, 0, 0, 1);
  recv_post(&s, 50, 0, 1 | 2 << 1 | 1 << 3);
  recv_part(&s, 1, 0, 0, 8192, 0, 1, 4096);
  recv_part(&s, 2, 1, 0, 8192, 1, 0, 4096);
  recv_part(&s, 0, 1, 1, 100, 0, 0, 100);
  recv_part(&s, 0, 1, 2, 0, 0, 0, 0);
  recv_part(&s, 1, 1, 3, 200, 0, 0, 200);
  recv_test(&s, 0), recv_test(&s, 1), recv_test(&s, 2), recv_test(&s, 3);
  put("sock_recv", "pieces", s.b, s.n);
  s.n = 0;
  u8(&s, 1 << 1);
  recv_post(&s, 16384, 0, 0);
  recv_part(&s, 1, 1, 0, 16384, 0, 0, 16384);
  recv_part(&s, 2, 1, 0, 16384, 1, 0, 12288); /* overlaps: the comm fails */
  recv_test(&s, 0);
  put("sock_recv", "overlap", s.b, s.n);
  s.n = 0;
  u8(&s, 0);
  recv_post(&s, 9000, 0, 0);
  recv_part(&s, 0, 0, 0, 9000, 0, 0, 5000); /* cut short, then EOF */
  u8(&s, 5), u8(&s, 4);
  recv_test(&s, 0);
  put("sock_recv", "short", s.b, s.n);
  s.n = 0;
  u8(&s, 2 << 1);
  recv_post(&s, 4096, 0, 0);
  u8(&s, 1 << 4 | 1), u8(&s, 12);
  for (int k = 0; k < 12; k++)
    u8(&s, 0x50 + k); /* garbage on socket 1 */
  u8(&s, 4);
  recv_test(&s, 0);
  put("sock_recv", "garbage", s.b, s.n);

  /* fuzz_sock_bytes: sockets, messages (kind, size, [cap], cut), then the
   * interleaving (round robin when the input ends). */
  s.n = 0;
  u8(&s, 2); /* three data sockets */
  u8(&s, 3); /* four messages */
  u8(&s, 0), u16(&s, 40000), u8(&s, 3), u8(&s, 0), u8(&s, 1), u8(&s, 2), u8(&s, 2), u8(&s, 3),
      u8(&s, 1);
  u8(&s, 8), u16(&s, 20000), u16(&s, 5000), u8(&s, 1), u8(&s, 1), u8(&s, 0), u8(&s, 0), u8(&s, 2);
  u8(&s, 16), u16(&s, 0), u8(&s, 10), u8(&s, 0), u8(&s, 0), u8(&s, 0), u8(&s, 0);
  u8(&s, 0), u16(&s, 100), u8(&s, 0), u8(&s, 1), u8(&s, 2), u8(&s, 0);
  put("sock_bytes", "clean_four", s.b, s.n);
  s.n = 0;
  u8(&s, 1), u8(&s, 1);
  u8(&s, 3), u16(&s, 12288), u8(&s, 2), u8(&s, 0), u8(&s, 1), u8(&s, 0),
      u8(&s, 0); /* a liar: a copy */
  u8(&s, 8), u8(&s, 1), u8(&s, 0), u8(&s, 0);
  u8(&s, 0), u16(&s, 8192), u8(&s, 1), u8(&s, 0), u8(&s, 0), u8(&s, 1), u8(&s, 0);
  put("sock_bytes", "lie_copy", s.b, s.n);
}

/* fuzz_base64: a capacity byte, then the text. */
static void base64_seeds(void) {
  static const char *const text[][2] = {{"hello", "\x01aGVsbG8gd29ybGQ="},
                                        {"one", "\x01"
                                                "AA=="},
                                        {"two", "\x01QUI="},
                                        {"nofit", "\x00QUJD"},
                                        {"noncanonical", "\x01QUJ="}};
  for (size_t i = 0; i < sizeof(text) / sizeof(text[0]); i++)
    put("base64", text[i][0], text[i][1], strlen(text[i][1] + 1) + 1);
}

int main(int argc, char **argv) {
  if (argc != 2) {
    fprintf(stderr, "usage: %s CORPUS_DIR (tests/fuzz/corpus)\n", argv[0]);
    return 2;
  }
  root = argv[1];
  ctl_frames();
  blobs();
  sock_seeds();
  base64_seeds();
  return 0;
}
