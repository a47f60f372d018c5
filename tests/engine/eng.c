#include "eng.h"

#include <stdlib.h>
#include <string.h>

void eng_cfg(tpx_config_t *cfg) {
  tpx_config_from_env(cfg);
  if (cfg->timeout_ms > 20000) cfg->timeout_ms = 20000;
  if (cfg->connect_timeout_ms > 10000) cfg->connect_timeout_ms = 10000;
  cfg->progress_thread = 1; /* both ends live in one process; caller-driven tests say so */
}

void eng_connect(tpx_endpoint_t *a, tpx_endpoint_t *b, tpx_peer_t **ab, tpx_peer_t **ba) {
  int rc = tpx_connect(a, "127.0.0.1", tpx_endpoint_port(b), ab);
  if (rc) fail_msg("connect: %s: %s", tpx_strerror(rc), tpx_last_error());
  rc = tpx_accept(b, 10000, ba);
  if (rc) fail_msg("accept: %s: %s", tpx_strerror(rc), tpx_last_error());
}

void eng_pair_open(eng_pair_t *p, const tpx_config_t *cfg) { eng_pair_open2(p, cfg, cfg, 0); }

void eng_pair_open2(eng_pair_t *p, const tpx_config_t *ca, const tpx_config_t *cb, int gpu_b) {
  eng_pair_open_net(p, ca, cb, NULL, NULL, gpu_b);
}

void eng_pair_open_net(eng_pair_t *p, const tpx_config_t *ca, const tpx_config_t *cb, tpx_net_t *net_a,
                       tpx_net_t *net_b, int gpu_b) {
  memset(p, 0, sizeof(*p));
  tpx_endpoint_params_t ep;
  tpx_endpoint_params_init(&ep);
  ep.cfg = ca;
  ep.port = TPX_PORT_EPHEMERAL;
  ep.listen_host = "127.0.0.1";
  ep.name = "A";
  ep.net = net_a;
  int rc = tpx_endpoint_create(&ep, &p->a);
  if (rc) fail_msg("endpoint A: %s: %s", tpx_strerror(rc), tpx_last_error());
  ep.cfg = cb;
  ep.name = "B";
  ep.gpu = gpu_b;
  ep.net = net_b;
  rc = tpx_endpoint_create(&ep, &p->b);
  if (rc) fail_msg("endpoint B: %s: %s", tpx_strerror(rc), tpx_last_error());
  eng_connect(p->a, p->b, &p->ab, &p->ba);
}

void eng_pair_close(eng_pair_t *p) {
  tpx_peer_close(p->ab);
  tpx_peer_close(p->ba);
  tpx_endpoint_destroy(p->a);
  tpx_endpoint_destroy(p->b);
  memset(p, 0, sizeof(*p));
}

void eng_buf(tpx_endpoint_t *ep, size_t len, unsigned access, eng_buf_t *b) {
  memset(b, 0, sizeof(*b));
  b->len = len;
  size_t alloc = (len + 4095) & ~(size_t)4095;
  b->p = aligned_alloc(4096, alloc ? alloc : 4096);
  assert_non_null(b->p);
  tpx_mem_desc_t d = {b->p, len ? len : 1, TPX_MEM_HOST, 0, access};
  int rc = tpx_mem_register(ep, &d, &b->mem);
  if (rc) fail_msg("register: %s", tpx_last_error());
  uint8_t blob[TPX_MD_MAX];
  size_t bl = 0;
  assert_int_equal(tpx_mem_get_public_data(b->mem, blob, sizeof(blob), &bl), 0);
  assert_int_equal(tpx_load_remote_md(blob, bl, &b->rmem), 0);
}

void eng_buf_free(eng_buf_t *b) {
  if (b->mem) assert_int_equal(tpx_mem_deregister(b->mem), 0);
  tpx_rmem_free(b->rmem);
  free(b->p);
  memset(b, 0, sizeof(*b));
}

void eng_wait(tpx_xfer_t *x, int expect) {
  int rc = tpx_xfer_wait(x, 60000);
  if (rc != expect) fail_msg("transfer: got %d (%s), expected %d: %s", rc, tpx_strerror(rc), expect, tpx_last_error());
}

void eng_write_check(tpx_peer_t *peer, eng_buf_t *src, eng_buf_t *dst, uint32_t seed) {
  tu_fill(src->p, src->len, seed, 0);
  tpx_xfer_t *x;
  assert_int_equal(tpx_write(peer, src->mem, 0, dst->rmem, 0, src->len, NULL, 0, &x), 0);
  eng_wait(x, 0);
  tpx_xfer_free(x);
  assert_int_equal(tu_check(dst->p, src->len, seed, 0), SIZE_MAX);
}
