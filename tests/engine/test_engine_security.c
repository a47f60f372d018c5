/* One-sided accesses outside registrations are refused by the target; garbage
 * and version mismatches on the control port drop that connection only;
 * ports, connection info, argument validation. */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "eng.h"
#include "engine/wire.h"

/* Forge a descriptor for b's region with other fields (what a buggy or
 * malicious peer could send), bypassing the initiator's own checks. */
static tpx_rmem_t *forge(const eng_buf_t *b, int64_t addr_delta, uint64_t len, unsigned access, uint64_t region_delta) {
  uint8_t blob[TPX_MD_MAX];
  size_t bl;
  assert_int_equal(tpx_mem_get_public_data(b->mem, blob, sizeof(blob), &bl), 0);
  struct tpx__md_info md;
  assert_int_equal(tpx__md_decode(blob, bl, &md), 0);
  md.addr += (uint64_t)addr_delta;
  md.len = len;
  md.access = access;
  md.region += region_delta;
  assert_int_equal(tpx__md_encode(&md, blob, sizeof(blob), &bl), 0);
  tpx_rmem_t *r;
  assert_int_equal(tpx_load_remote_md(blob, bl, &r), 0);
  return r;
}

static void test_outside_rejected(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  cfg.chunk_bytes = 64 * 1024;
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  /* B's buffer: guard | registered middle | guard */
  size_t g = 1 << 20, n = 1 << 20;
  uint8_t *whole = aligned_alloc(4096, g + n + g);
  tu_fill(whole, g + n + g, 50, 0);
  tpx_mem_desc_t d = {whole + g, n, TPX_MEM_HOST, 0, TPX_ACCESS_WRITE | TPX_ACCESS_READ};
  eng_buf_t b = {0};
  b.p = whole + g;
  b.len = n;
  assert_int_equal(tpx_mem_register(P.b, &d, &b.mem), 0);
  tpx_mem_desc_t dro = {whole, 4096, TPX_MEM_HOST, 0, TPX_ACCESS_READ}; /* read-only bit of the guard */
  tpx_mem_t *ro;
  assert_int_equal(tpx_mem_register(P.b, &dro, &ro), 0);
  eng_buf_t a;
  eng_buf(P.a, 3 * n, 0, &a);
  tu_fill(a.p, a.len, 51, 0);

  struct {
    const char *what;
    int64_t delta;
    uint64_t len;
    unsigned access;
    uint64_t region_delta;
    uint64_t off, xlen;
    tpx_mem_t *region_of; /* forge from this registration instead of b */
  } cases[] = {
      {"past the end", 0, 2 * n, 3, 0, n - 4096, 2 * 4096, NULL},
      {"before the start", -(int64_t)g, g + n, 3, 0, 0, 4096, NULL},
      {"spanning all", -(int64_t)g, g + n + g, 3, 0, 0, g + n + g, NULL},
      {"unknown region", 0, n, 3, 12345, 0, 4096, NULL},
      {"read-only region", 0, 4096, 3, 0, 0, 4096, ro},
      {"huge length", 0, UINT64_MAX / 2, 3, 0, 0, 2 * n, NULL},
  };
  for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
    eng_buf_t src = b;
    if (cases[i].region_of) {
      src.mem = cases[i].region_of;
    }
    tpx_rmem_t *fake = forge(&src, cases[i].delta, cases[i].len, cases[i].access, cases[i].region_delta);
    tpx_xfer_t *x;
    size_t xlen = cases[i].xlen > a.len ? a.len : cases[i].xlen;
    int rc = tpx_write(P.ab, a.mem, 0, fake, cases[i].off, xlen, "never", 5, &x);
    if (rc == 0) {
      eng_wait(x, TPX_EACCES);
      tpx_xfer_free(x);
    } else {
      fail_msg("case %s: post failed: %d %s", cases[i].what, rc, tpx_last_error());
    }
    /* nothing in B's memory changed, registered or not */
    assert_int_equal(tu_check(whole, g + n + g, 50, 0), SIZE_MAX);
    if (cases[i].region_of != ro) {
      rc = tpx_read(P.ab, a.mem, 0, fake, cases[i].off, xlen, &x);
      assert_int_equal(rc, 0);
      eng_wait(x, TPX_EACCES);
      tpx_xfer_free(x);
      assert_int_equal(tu_check(a.p, a.len, 51, 0), SIZE_MAX); /* nothing landed locally either */
    }
    tpx_rmem_free(fake);
  }
  /* write refused by access flags: the region is registered read-only */
  tpx_rmem_t *rofake = forge(&(eng_buf_t){.mem = ro}, 0, 4096, TPX_ACCESS_WRITE, 0);
  tpx_xfer_t *x;
  assert_int_equal(tpx_write(P.ab, a.mem, 0, rofake, 0, 4096, NULL, 0, &x), 0);
  eng_wait(x, TPX_EACCES);
  tpx_xfer_free(x);
  tpx_rmem_free(rofake);
  /* no notification from refused writes */
  tpx_notif_t nt;
  assert_int_equal(tpx_get_notif(P.b, &nt), 0);
  /* the peer is still fine: streams stayed in step after the drained data */
  uint8_t blob[TPX_MD_MAX];
  size_t bl;
  assert_int_equal(tpx_mem_get_public_data(b.mem, blob, sizeof(blob), &bl), 0);
  assert_int_equal(tpx_load_remote_md(blob, bl, &b.rmem), 0);
  assert_int_equal(tpx_write(P.ab, a.mem, 0, b.rmem, 0, n, NULL, 0, &x), 0);
  eng_wait(x, 0);
  tpx_xfer_free(x);
  assert_int_equal(tu_check(b.p, n, 51, 0), SIZE_MAX);
  assert_int_equal(tu_check(whole, g, 50, 0), SIZE_MAX);
  assert_int_equal(tu_check(whole + g + n, g, 50, g + n), SIZE_MAX);
  assert_int_equal(tpx_peer_status(P.ab), 0);

  /* the initiator's own checks (its descriptor says the range is outside) */
  assert_int_equal(tpx_write(P.ab, a.mem, 0, b.rmem, 1, n, NULL, 0, &x), TPX_EACCES);
  assert_null(x);
  tpx_rmem_t *rofake2 = forge(&b, 0, n, TPX_ACCESS_READ, 0);
  assert_int_equal(tpx_write(P.ab, a.mem, 0, rofake2, 0, 10, NULL, 0, &x), TPX_EACCES);
  tpx_rmem_free(rofake2);
  assert_int_equal(tpx_write(P.ab, a.mem, a.len, b.rmem, 0, 1, NULL, 0, &x), TPX_EINVAL); /* local range */
  /* a descriptor of A's own memory used towards B: wrong owner */
  assert_int_equal(tpx_write(P.ab, a.mem, 0, a.rmem, 0, 1, NULL, 0, &x), TPX_EINVAL);
  tpx_rmem_free(b.rmem);
  assert_int_equal(tpx_mem_deregister(b.mem), 0);
  assert_int_equal(tpx_mem_deregister(ro), 0);
  free(whole);
  eng_buf_free(&a);
  eng_pair_close(&P);
}

/* Region ids are capabilities: random, so one descriptor tells nothing about
 * the ids of the others (sequential ids would let a peer that saw one guess
 * its neighbours). */
static void test_region_ids_random(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.no_listen = 1;
  tpx_endpoint_t *ep;
  assert_int_equal(tpx_endpoint_create(&p, &ep), 0);
  enum { N = 64 };
  static uint8_t bufs[N][4096] __attribute__((aligned(4096)));
  tpx_mem_t *m[N];
  uint64_t ids[N];
  for (int i = 0; i < N; i++) {
    tpx_mem_desc_t d = {bufs[i], sizeof(bufs[i]), TPX_MEM_HOST, 0, TPX_ACCESS_WRITE};
    assert_int_equal(tpx_mem_register(ep, &d, &m[i]), 0);
    uint8_t blob[TPX_MD_MAX];
    size_t bl;
    assert_int_equal(tpx_mem_get_public_data(m[i], blob, sizeof(blob), &bl), 0);
    struct tpx__md_info md;
    assert_int_equal(tpx__md_decode(blob, bl, &md), 0);
    ids[i] = md.region;
    assert_true(ids[i] != 0);
    for (int j = 0; j < i; j++) {
      uint64_t diff = ids[i] > ids[j] ? ids[i] - ids[j] : ids[j] - ids[i];
      assert_true(diff >= (1ull << 32)); /* a false alarm: ~2^-20 per run */
    }
  }
  for (int i = 0; i < N; i++)
    assert_int_equal(tpx_mem_deregister(m[i]), 0);
  tpx_endpoint_destroy(ep);
}

static void test_garbage_control(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  cfg.connect_timeout_ms = 800;
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  int port = tpx_endpoint_port(P.b);
  uint8_t buf[4096];
  /* 1. not our protocol at all */
  int fd = eng_raw_connect(port);
  const char *http = "GET / HTTP/1.1\r\nHost: x\r\n\r\n";
  assert_true(send(fd, http, strlen(http), 0) > 0);
  eng_read_to_eof(fd, buf, sizeof(buf));
  close(fd);
  /* 2. another protocol version: an error frame comes back, then EOF */
  fd = eng_raw_connect(port);
  struct tpx__wbuf w = {0};
  uint8_t handles[TPX_NET_HANDLE_BYTES] = {0};
  struct tpx__wire_hello h = {1, 0, 1, 0, "future", handles};
  assert_int_equal(tpx__wire_put_hello(&w, 0, &h), 0);
  w.p[4] = WIRE_VERSION + 1;
  assert_true(send(fd, w.p, w.len, 0) == (ssize_t)w.len);
  size_t got = eng_read_to_eof(fd, buf, sizeof(buf));
  struct tpx__wire_frame f;
  assert_true(tpx__wire_frame_parse(buf, got, &f) > 0);
  assert_int_equal(f.type, MSG_ERROR);
  struct tpx__wire_error e;
  assert_int_equal(tpx__wire_get_error(&f, &e), 0);
  assert_int_equal(e.code, TPX_EVERSION);
  close(fd);
  /* 3. oversize frame length */
  fd = eng_raw_connect(port);
  w.p[4] = WIRE_VERSION;
  tpx__put32(w.p + 8, WIRE_MAX_PAYLOAD + 1);
  assert_true(send(fd, w.p, WIRE_HDR_BYTES, 0) == WIRE_HDR_BYTES);
  eng_read_to_eof(fd, buf, sizeof(buf));
  close(fd);
  /* 4. a hello with a bad channel count */
  fd = eng_raw_connect(port);
  w.len = 0;
  h.nch = 1;
  assert_int_equal(tpx__wire_put_hello(&w, 0, &h), 0);
  tpx__put16(w.p + WIRE_HDR_BYTES + 12, 0);
  assert_true(send(fd, w.p, w.len, 0) == (ssize_t)w.len);
  eng_read_to_eof(fd, buf, sizeof(buf));
  close(fd);
  /* 5. a data message before any hello */
  fd = eng_raw_connect(port);
  w.len = 0;
  assert_int_equal(tpx__wire_put_bye(&w), 0);
  assert_true(send(fd, w.p, w.len, 0) == (ssize_t)w.len);
  eng_read_to_eof(fd, buf, sizeof(buf));
  close(fd);
  /* 6. silence: dropped after the connect timeout */
  fd = eng_raw_connect(port);
  eng_read_to_eof(fd, buf, sizeof(buf));
  close(fd);
  /* 7. garbage inside an established peer's control stream drops that peer only */
  tpx__wbuf_free(&w);
  tpx_peer_t *junk_a = NULL, *junk_b = NULL;
  eng_connect(P.a, P.b, &junk_a, &junk_b);
  assert_int_equal(tpx_peer_status(junk_b), 0);
  /* the existing peer keeps working, before and after */
  eng_buf_t x, y;
  eng_buf(P.a, 1 << 20, 0, &x);
  eng_buf(P.b, 1 << 20, TPX_ACCESS_WRITE, &y);
  eng_write_check(P.ab, &x, &y, 60);
  /* no peer got through from the junk connections */
  tpx_peer_t *none = NULL;
  assert_int_equal(tpx_accept(P.b, 0, &none), TPX_ETIMEDOUT);
  tpx_peer_close(junk_a);
  tpx_peer_close(junk_b);
  eng_buf_free(&x);
  eng_buf_free(&y);
  eng_pair_close(&P);
}

static void test_ports(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  /* A base below the ephemeral range; other tests may hold ports there for
   * a moment, so try a few random bases until two neighbours are free. */
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.listen_host = "127.0.0.1";
  p.gpu = 1;
  tpx_endpoint_t *e1 = NULL, *e2 = NULL, *e3 = NULL;
  int base = 0;
  srand((unsigned)getpid());
  for (int attempt = 0; attempt < 20 && !e2; attempt++) {
    base = 21000 + rand() % 11000;
    cfg.port_base = base;
    cfg.port_span = 4;
    tpx_endpoint_destroy(e1);
    e1 = NULL;
    if (tpx_endpoint_create(&p, &e1) != 0) continue;
    assert_true(tpx_endpoint_port(e1) >= base + 1 && tpx_endpoint_port(e1) < base + 5);
    if (tpx_endpoint_create(&p, &e2) != 0) e2 = NULL; /* EADDRINUSE -> next port */
  }
  assert_non_null(e2);
  assert_true(tpx_endpoint_port(e2) > tpx_endpoint_port(e1));
  cfg.port_span = 1;
  p.gpu = tpx_endpoint_port(e1) - base;
  assert_int_equal(tpx_endpoint_create(&p, &e3), TPX_EADDRINUSE);
  assert_non_null(strstr(tpx_last_error(), "in use"));
  /* connection info carries name and port; loading it connects */
  uint8_t blob[TPX_CONN_INFO_MAX];
  size_t bl = 0;
  assert_int_equal(tpx_get_conn_info(e1, blob, sizeof(blob), &bl), 0);
  cfg.port_span = 4;
  tpx_endpoint_params_t q;
  tpx_endpoint_params_init(&q);
  q.cfg = &cfg;
  q.no_listen = 1;
  tpx_endpoint_t *c;
  assert_int_equal(tpx_endpoint_create(&q, &c), 0);
  assert_int_equal(tpx_get_conn_info(c, blob, sizeof(blob), &bl), TPX_EUSAGE); /* not listening */
  assert_int_equal(tpx_get_conn_info(e1, blob, sizeof(blob), &bl), 0);
  tpx_peer_t *pc, *pe;
  assert_int_equal(tpx_load_remote_conn_info(c, blob, bl, &pc), 0);
  assert_int_equal(tpx_accept(e1, 5000, &pe), 0);
  assert_string_equal(tpx_peer_name(pc), tpx_endpoint_name(e1));
  assert_int_equal(tpx_peer_gpu(pc), 1);
  blob[0] ^= 0xff;
  tpx_peer_t *bad;
  assert_int_equal(tpx_load_remote_conn_info(c, blob, bl, &bad), TPX_EPROTO);
  tpx_peer_close(pc);
  tpx_peer_close(pe);
  tpx_endpoint_destroy(c);
  /* Nobody listening: a port held by a socket that does not listen (any
   * free port could be taken by another test meanwhile). Retries off:
   * test_sock_retry and test_engine_retry cover them. */
  int held = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  struct sockaddr_in hs = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
  socklen_t hl = sizeof(hs);
  assert_int_equal(bind(held, (struct sockaddr *)&hs, sizeof(hs)), 0);
  assert_int_equal(getsockname(held, (struct sockaddr *)&hs, &hl), 0);
  cfg.socket_retry_cnt = 0;
  assert_int_equal(tpx_endpoint_create(&q, &c), 0);
  assert_int_equal(tpx_connect(c, "127.0.0.1", ntohs(hs.sin_port), &bad), TPX_ECLOSED);
  if (!strstr(tpx_last_error(), "Connection refused")) fail_msg("'%s'", tpx_last_error());
  tpx_endpoint_destroy(c);
  close(held);
  tpx_endpoint_destroy(e1);
  tpx_endpoint_destroy(e2);
}

static void test_args(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  cfg.chunk_bytes = 8u << 20;
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.no_listen = 1;
  tpx_endpoint_t *ep;
  assert_int_equal(tpx_endpoint_create(&p, &ep), TPX_EINVAL);
  eng_cfg(&cfg);
  p.plugin = "/nonexistent/libnccl-net-nothing.so";
  assert_true(tpx_endpoint_create(&p, &ep) < 0);
  p.plugin = NULL;
  assert_int_equal(tpx_endpoint_create(&p, &ep), 0);
  char buf[64];
  tpx_mem_t *m;
  tpx_mem_desc_t d = {buf, sizeof(buf), TPX_MEM_CUDA, 0, 0};
  int rc = tpx_mem_register(ep, &d, &m); /* a host buffer claimed as CUDA memory */
  assert_true(rc == TPX_ENOTSUP || rc == TPX_EINVAL); /* no CUDA in this build / not device memory */
  d.type = TPX_MEM_HOST;
  d.len = 0;
  assert_int_equal(tpx_mem_register(ep, &d, &m), TPX_EINVAL);
  d.len = sizeof(buf);
  d.access = 8;
  assert_int_equal(tpx_mem_register(ep, &d, &m), TPX_EINVAL);
  uint8_t junk[MD_BLOB_BYTES] = {0};
  tpx_rmem_t *r;
  assert_int_equal(tpx_load_remote_md(junk, sizeof(junk), &r), TPX_EPROTO);
  tpx_peer_t *peer;
  assert_int_equal(tpx_accept(ep, 0, &peer), TPX_EUSAGE);
  assert_int_equal(tpx_connect(ep, "127.0.0.1", 0, &peer), TPX_EINVAL);
  assert_true(strlen(tpx_endpoint_transport(ep)) > 0);
  tpx_endpoint_destroy(ep);
#ifdef TPX_FAKE_UNPACK_PLUGIN
  /* receives of an UNPACK transport land in bounce pages: the engine's
   * unpack stage (src/engine/unpack_stage.c) takes them */
  p.plugin = TPX_FAKE_UNPACK_PLUGIN;
  assert_int_equal(tpx_endpoint_create(&p, &ep), 0);
  tpx_endpoint_destroy(ep);
#endif
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_outside_rejected), cmocka_unit_test(test_region_ids_random),
      cmocka_unit_test(test_garbage_control),
      cmocka_unit_test(test_ports),            cmocka_unit_test(test_args),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
