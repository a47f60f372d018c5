/* Many transfers at once: 64 concurrent transfers of mixed kinds on one peer
 * (they share every comm, so progress must be per comm); 16 peers on one
 * endpoint; vectored writes of 1000 small blocks with one notification. */
#include <stdlib.h>
#include <string.h>

#include "eng.h"

#define NCONC 64

static void test_64_concurrent(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  cfg.chunk_bytes = 64 * 1024; /* many chunks per transfer: windows fill */
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  size_t slot = 700 * 1024 + 13;
  eng_buf_t a, b;
  eng_buf(P.a, slot * NCONC, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &a);
  eng_buf(P.b, slot * NCONC, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &b);
  for (int round = 0; round < 3; round++) {
    tpx_xfer_t *x[NCONC], *r[NCONC];
    memset(r, 0, sizeof(r));
    for (int i = 0; i < NCONC; i++) {
      size_t off = (size_t)i * slot;
      size_t len = slot - (size_t)(i * 97 % 1000);
      uint32_t seed = (uint32_t)(round * 1000 + i);
      switch (i % 4) {
      case 0: /* write A -> B */
        tu_fill(a.p + off, len, seed, 0);
        assert_int_equal(tpx_write(P.ab, a.mem, off, b.rmem, off, len, NULL, 0, &x[i]), 0);
        break;
      case 1: /* read A <- B */
        tu_fill(b.p + off, len, seed, 0);
        assert_int_equal(tpx_read(P.ab, a.mem, off, b.rmem, off, len, &x[i]), 0);
        break;
      case 2: /* send A -> B, recv posted after the send */
        tu_fill(a.p + off, len, seed, 0);
        assert_int_equal(tpx_send(P.ab, a.mem, off, len, (uint64_t)i, &x[i]), 0);
        assert_int_equal(tpx_recv(P.ba, b.mem, off, len, (uint64_t)i, &r[i]), 0);
        break;
      default: /* send B -> A, recv posted first */
        tu_fill(b.p + off, len, seed, 0);
        assert_int_equal(tpx_recv(P.ab, a.mem, off, len, (uint64_t)i, &r[i]), 0);
        assert_int_equal(tpx_send(P.ba, b.mem, off, len, (uint64_t)i, &x[i]), 0);
        break;
      }
    }
    /* wait in reverse order: none may depend on an earlier one finishing */
    for (int i = NCONC - 1; i >= 0; i--) {
      eng_wait(x[i], 0);
      if (r[i]) eng_wait(r[i], 0);
      tpx_xfer_free(x[i]);
      tpx_xfer_free(r[i]);
    }
    for (int i = 0; i < NCONC; i++) {
      size_t off = (size_t)i * slot;
      size_t len = slot - (size_t)(i * 97 % 1000);
      uint32_t seed = (uint32_t)(round * 1000 + i);
      uint8_t *dst = (i % 4 == 0 || i % 4 == 2) ? b.p : a.p;
      size_t bad = tu_check(dst + off, len, seed, 0);
      if (bad != SIZE_MAX) fail_msg("round %d transfer %d: byte %zu differs", round, i, bad);
    }
  }
  eng_buf_free(&a);
  eng_buf_free(&b);
  eng_pair_close(&P);
}

/* Same-tag sends match recvs in order; a send larger than its recv fails on
 * both sides with TPX_ETRUNC and the next pair still works. */
static void test_tags(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  cfg.inline_bytes = 0;
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  eng_buf_t a, b;
  eng_buf(P.a, 1 << 20, 0, &a);
  eng_buf(P.b, 1 << 20, 0, &b);
  tu_fill(a.p, a.len, 9, 0);
  tpx_xfer_t *s[4], *r[4];
  for (int i = 0; i < 4; i++) assert_int_equal(tpx_send(P.ab, a.mem, (size_t)i * 1000, 1000, 3, &s[i]), 0);
  for (int i = 0; i < 4; i++) assert_int_equal(tpx_recv(P.ba, b.mem, (size_t)i * 4096, 4096, 3, &r[i]), 0);
  for (int i = 0; i < 4; i++) {
    eng_wait(s[i], 0);
    eng_wait(r[i], 0);
    assert_int_equal(tpx_xfer_received(r[i]), 1000);
    assert_int_equal(tu_check(b.p + i * 4096, 1000, 9, (size_t)i * 1000), SIZE_MAX);
    tpx_xfer_free(s[i]);
    tpx_xfer_free(r[i]);
  }
  tpx_xfer_t *big, *small;
  assert_int_equal(tpx_recv(P.ba, b.mem, 0, 100, 4, &small), 0);
  assert_int_equal(tpx_send(P.ab, a.mem, 0, 101, 4, &big), 0);
  eng_wait(big, TPX_ETRUNC);
  eng_wait(small, TPX_ETRUNC);
  tpx_xfer_free(big);
  tpx_xfer_free(small);
  assert_int_equal(tpx_recv(P.ba, b.mem, 0, 100, 4, &small), 0);
  assert_int_equal(tpx_send(P.ab, a.mem, 0, 100, 4, &big), 0);
  eng_wait(big, 0);
  eng_wait(small, 0);
  tpx_xfer_free(big);
  tpx_xfer_free(small);
  eng_buf_free(&a);
  eng_buf_free(&b);
  eng_pair_close(&P);
}

#define NPEERS 16

static void test_16_peers(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  cfg.num_channels = 2;
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.port = TPX_PORT_EPHEMERAL;
  p.listen_host = "127.0.0.1";
  p.name = "hub";
  tpx_endpoint_t *hub;
  assert_int_equal(tpx_endpoint_create(&p, &hub), 0);
  tpx_endpoint_t *leaf[NPEERS];
  tpx_peer_t *to_hub[NPEERS], *from_leaf[NPEERS];
  eng_buf_t lb[NPEERS], hb;
  size_t n = 256 * 1024 + 1;
  size_t tail = n * NPEERS; /* the hub sends from here, past the written area */
  eng_buf(hub, tail + 1000, TPX_ACCESS_WRITE | TPX_ACCESS_READ, &hb);
  tu_fill(hb.p + tail, 1000, 4242, 0);
  for (int i = 0; i < NPEERS; i++) {
    char name[16];
    snprintf(name, sizeof(name), "leaf%d", i);
    p.name = name;
    p.no_listen = 1;
    assert_int_equal(tpx_endpoint_create(&p, &leaf[i]), 0);
    eng_connect(leaf[i], hub, &to_hub[i], &from_leaf[i]);
    assert_string_equal(tpx_peer_name(from_leaf[i]), name);
    eng_buf(leaf[i], 2 * n, 0, &lb[i]); /* [0, n) is written out, [n, 2n) receives */
  }
  /* hb's descriptor as each leaf sees it: same blob, loaded once per leaf */
  tpx_xfer_t *x[NPEERS], *y[NPEERS];
  for (int i = 0; i < NPEERS; i++) {
    tu_fill(lb[i].p, n, (uint32_t)i, 0);
    assert_int_equal(tpx_write(to_hub[i], lb[i].mem, 0, hb.rmem, (size_t)i * n, n, &i, sizeof(i), &x[i]), 0);
    /* and the hub sends to each leaf at the same time */
    assert_int_equal(tpx_recv(to_hub[i], lb[i].mem, n, n, 1, &y[i]), 0);
  }
  tpx_xfer_t *hs[NPEERS];
  for (int i = 0; i < NPEERS; i++) assert_int_equal(tpx_send(from_leaf[i], hb.mem, tail, 1000, 1, &hs[i]), 0);
  int seen[NPEERS] = {0};
  for (int i = 0; i < NPEERS; i++) {
    eng_wait(x[i], 0);
    tpx_xfer_free(x[i]);
    tpx_notif_t nt;
    assert_int_equal(tpx_wait_notif(hub, 10000, &nt), 1);
    int who;
    assert_int_equal(nt.len, sizeof(who));
    memcpy(&who, nt.msg, sizeof(who));
    assert_true(who >= 0 && who < NPEERS);
    char name[16];
    snprintf(name, sizeof(name), "leaf%d", who);
    assert_string_equal(nt.peer_name, name); /* the sender's identity */
    assert_ptr_equal(nt.peer, from_leaf[who]);
    seen[who]++;
  }
  for (int i = 0; i < NPEERS; i++) {
    assert_int_equal(seen[i], 1);
    assert_int_equal(tu_check(hb.p + (size_t)i * n, n, (uint32_t)i, 0), SIZE_MAX);
  }
  for (int i = 0; i < NPEERS; i++) {
    eng_wait(hs[i], 0);
    eng_wait(y[i], 0);
    assert_int_equal(tpx_xfer_received(y[i]), 1000);
    assert_int_equal(tu_check(lb[i].p + n, 1000, 4242, 0), SIZE_MAX);
    tpx_xfer_free(hs[i]);
    tpx_xfer_free(y[i]);
  }
  for (int i = 0; i < NPEERS; i++) {
    tpx_peer_close(to_hub[i]);
    tpx_peer_close(from_leaf[i]);
    eng_buf_free(&lb[i]);
    tpx_endpoint_destroy(leaf[i]);
  }
  eng_buf_free(&hb);
  tpx_endpoint_destroy(hub);
}

/* 1000 small blocks scattered on both sides, one transfer, one notification
 * delivered after all of them landed; then read them back the same way. */
static void test_vector_1000(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  enum { NB = 1000, BS = 1000 };
  eng_buf_t a, b;
  eng_buf(P.a, NB * 2 * BS, 0, &a);
  eng_buf(P.b, NB * 3 * BS, TPX_ACCESS_WRITE | TPX_ACCESS_READ, &b);
  tu_fill(a.p, a.len, 11, 0);
  memset(b.p, 0xee, b.len);
  tpx_iov_t *v = calloc(NB, sizeof(*v));
  for (int i = 0; i < NB; i++) {
    v[i].local = a.mem;
    v[i].local_off = (size_t)i * 2 * BS;        /* every other block */
    v[i].remote = b.rmem;
    v[i].remote_off = (uint64_t)(NB - 1 - i) * 3 * BS; /* reversed, spread */
    v[i].len = BS - (size_t)(i % 7);
  }
  tpx_xfer_t *x;
  assert_int_equal(tpx_xfer_prep_write(P.ab, v, NB, "all-landed", 10, &x), 0);
  for (int rep = 0; rep < 3; rep++) {
    assert_int_equal(tpx_xfer_post(x), 0);
    tpx_notif_t nt;
    /* the notification may arrive before the ack, never before the data */
    assert_int_equal(tpx_wait_notif(P.b, 20000, &nt), 1);
    assert_int_equal(nt.len, 10);
    for (int i = 0; i < NB; i++) {
      size_t bad = tu_check(b.p + v[i].remote_off, v[i].len, 11, v[i].local_off);
      if (bad != SIZE_MAX) fail_msg("block %d: byte %zu differs when the notification arrived", i, bad);
      assert_int_equal(b.p[v[i].remote_off + v[i].len], 0xee);
    }
    eng_wait(x, 0);
  }
  tpx_xfer_free(x);
  /* vectored read back into fresh local positions */
  memset(a.p, 0, a.len);
  for (int i = 0; i < NB; i++) v[i].local_off = (size_t)i * BS;
  for (int i = 0; i < NB; i++) v[i].len = BS;
  tu_fill(b.p, b.len, 12, 0);
  assert_int_equal(tpx_xfer_prep_read(P.ab, v, NB, NULL, 0, &x), 0);
  assert_int_equal(tpx_xfer_post(x), 0);
  eng_wait(x, 0);
  tpx_xfer_free(x);
  for (int i = 0; i < NB; i++)
    assert_int_equal(tu_check(a.p + (size_t)i * BS, BS, 12, v[i].remote_off), SIZE_MAX);
  free(v);
  eng_buf_free(&a);
  eng_buf_free(&b);
  eng_pair_close(&P);
}

/* Notifications are delivered in order and only after the writes posted
 * before them landed. */
static void test_notif_order(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  eng_pair_t P;
  eng_pair_open(&P, &cfg);
  eng_buf_t a, b;
  size_t n = 2u << 20;
  eng_buf(P.a, n, 0, &a);
  eng_buf(P.b, n * 8, TPX_ACCESS_WRITE, &b);
  tpx_xfer_t *x[8];
  for (int i = 0; i < 8; i++) {
    tu_fill(a.p, n, (uint32_t)i, 0);
    assert_int_equal(tpx_write(P.ab, a.mem, 0, b.rmem, (size_t)i * n, n, NULL, 0, &x[i]), 0);
    eng_wait(x[i], 0); /* the source is reused: each write must be done */
    char msg = (char)('0' + i);
    assert_int_equal(tpx_notify(P.ab, &msg, 1), 0);
  }
  for (int i = 0; i < 8; i++) {
    tpx_notif_t nt;
    assert_int_equal(tpx_wait_notif(P.b, 10000, &nt), 1);
    assert_int_equal(nt.msg[0], '0' + i);
    assert_int_equal(tu_check(b.p + (size_t)i * n, n, (uint32_t)i, 0), SIZE_MAX);
    tpx_xfer_free(x[i]);
  }
  /* posted without waiting: the notification still waits for the data */
  for (int rep = 0; rep < 20; rep++) {
    tu_fill(a.p, n, (uint32_t)(100 + rep), 0);
    tpx_xfer_t *w;
    assert_int_equal(tpx_write(P.ab, a.mem, 0, b.rmem, 0, n, NULL, 0, &w), 0);
    assert_int_equal(tpx_notify(P.ab, "x", 1), 0);
    tpx_notif_t nt;
    assert_int_equal(tpx_wait_notif(P.b, 10000, &nt), 1);
    assert_int_equal(tu_check(b.p, n, (uint32_t)(100 + rep), 0), SIZE_MAX);
    eng_wait(w, 0);
    tpx_xfer_free(w);
  }
  eng_buf_free(&a);
  eng_buf_free(&b);
  eng_pair_close(&P);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_64_concurrent), cmocka_unit_test(test_tags),
      cmocka_unit_test(test_16_peers),      cmocka_unit_test(test_vector_1000),
      cmocka_unit_test(test_notif_order),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
