/* GPU binding of transport calls (docs/A3HIGH.md, "GPU binding"): the
 * GPUDirect-TCPX plugin binds a comm, its bounce pages and its flow steering
 * to the calling thread's current CUDA device at listen, connect, accept and
 * regMr. The engine must therefore make the endpoint's GPU current around
 * each of those calls (and a CUDA region's own GPU around its regMr).
 *
 * CPU side: the transport is wrapped (tests/util/net_probe.h) so every call
 * records the device the engine's bind hook says is bound on the calling
 * thread; an endpoint on GPU 3 must have every call bound to 3 and nothing
 * bound once the call returned. tests/gpu/test_engine_gpu.c checks the same
 * with cudaGetDevice on a machine with several GPUs. */
#include <stdlib.h>
#include <string.h>

#include "eng.h"
#include "engine/gpu/gpu_path.h"
#include "net_probe.h"

static __thread int bound = -1;
static void hook(int dev) {
  bound = dev;
}
static int probe_bound(void) {
  return bound;
}

#define GPU_B 3

static void test_calls_bound_to_endpoint_gpu(void **state) {
  (void)state;
  tpx_config_t cfg;
  eng_cfg(&cfg);
  tpx_net_t *base = NULL;
  assert_int_equal(tpx_net_open_builtin(&cfg, &base), 0);
  tpx__gpu_bind_hook = hook;
  tpx_net_t *probe = net_probe_wrap(base, probe_bound, GPU_B);

  eng_pair_t P; /* B listens and accepts */
  eng_pair_open_net(&P, &cfg, &cfg, NULL, probe, GPU_B);
  tpx_endpoint_t *a = P.a, *b = P.b;
  tpx_peer_t *ab = P.ab, *ba = P.ba;
  eng_buf_t sa, sb, da, db;
  eng_buf(a, 256 << 10, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &sa);
  eng_buf(b, 256 << 10, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &sb);
  eng_buf(a, 256 << 10, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &da);
  eng_buf(b, 256 << 10, TPX_ACCESS_READ | TPX_ACCESS_WRITE, &db);
  eng_write_check(ab, &sa, &db, 1); /* B receives: its regMr */
  eng_write_check(ba, &sb, &da, 2); /* B sends: its connect, its regMr */

  for (int k = 0; k < NP_KINDS; k++) {
    assert_true(np_g.calls[k] > 0);
    if (np_g.wrong[k])
      fail_msg("call kind %d: %d of %d calls saw device %d, want %d", k, np_g.wrong[k],
               np_g.calls[k], np_g.seen[k], GPU_B);
  }
  assert_int_equal(bound, -1); /* this thread was left unbound */

  eng_buf_free(&sa), eng_buf_free(&sb), eng_buf_free(&da), eng_buf_free(&db);
  eng_pair_close(&P);
  tpx__gpu_bind_hook = NULL;
  tpx_net_close(base);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_calls_bound_to_endpoint_gpu),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
