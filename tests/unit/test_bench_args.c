/* tpx-bench's command line (tools/bench/args.c, compiled into this test):
 * every bad value is refused with a message naming the option and the value;
 * the ranges of settings that the environment also sets are config.c's own;
 * good command lines give the runs they say. The exit status (2) is checked
 * on the binary by tests/tools/bench_cli.sh. */
#include <stdlib.h>
#include <string.h>

#include "bench/bench.h"
#include "common/config.h"
#include "testutil.h"

static int parse(const char *line, struct bench_opts *o, char *err, size_t n) {
  static char buf[512];
  char *argv[64];
  int argc = 0;
  snprintf(buf, sizeof(buf), "tpx-bench %s", line);
  for (char *save = NULL, *t = strtok_r(buf, " ", &save); t && argc < 63; t = strtok_r(NULL, " ", &save))
    argv[argc++] = t;
  argv[argc] = NULL;
  return bench_parse(argc, argv, o, err, n);
}

/* Refused, and the message names `must1` and `must2` (the option, the value). */
static void refused(const char *line, const char *must1, const char *must2) {
  struct bench_opts o;
  char err[512];
  int rc = parse(line, &o, err, sizeof(err));
  if (rc != -1 || !strstr(err, must1) || (must2 && !strstr(err, must2)))
    fail_msg("'%s': rc %d, message '%s' (wanted '%s' and '%s')", line, rc, err, must1, must2 ? must2 : "");
}

static void test_bad_values_named(void **state) {
  (void)state;
  /* the list first */
  refused("loopback --size -5", "--size", "-5");
  refused("loopback --size 100G", "--size", "107374182400");
  refused("server --port abc", "--port", "abc");
  refused("client h --port -5", "--port", "-5");
  refused("server --port 70000", "--port", "70000");
  refused("loopback --port 20000", "--port", "loopback"); /* loopback picks its own */
  refused("loopback --chunk 1", "--chunk", "TPX_CHUNK_BYTES");
  refused("loopback --frobnicate", "--frobnicate", "unknown");
  refused("server --bogus 3", "--bogus", NULL);
  /* the rest of the table */
  refused("loopback --size 0", "--size", "0");
  refused("loopback --size 12X", "--size", "12X");
  refused("loopback --size 99999999999999999999", "--size", "99999999999999999999");
  refused("loopback --block-size -1", "--block-size", "-1");
  refused("loopback -b 0", "-b", "0");
  refused("loopback -e 5Q", "-e", "5Q");
  refused("loopback --max-bytes x", "--max-bytes", "x");
  refused("loopback -b 1M -e 4K", "-b", "-e");
  refused("loopback -f 1", "-f", "1");
  refused("loopback -f two", "-f", "two");
  refused("loopback --iters 0", "--iters", "0");
  refused("loopback -n -3", "-n", "-3");
  refused("loopback --warmup -1", "--warmup", "-1");
  refused("loopback --inflight 17", "--inflight", "17");
  refused("loopback --inflight 2 --op send", "--inflight", "send");
  refused("loopback --inflight 2 --latency", "--inflight", "--latency");
  refused("loopback --latency --check", "--check", "--latency");
  refused("loopback --regions 0", "--regions", "0");
  refused("loopback --regions 17", "--regions", "17");
  refused("loopback --regions 2 --op send", "--regions", "send");
  refused("loopback --regions 2 --latency", "--regions", "--latency");
  refused("loopback --regions 3 --inflight 16", "--regions 3", "18");
  refused("loopback --size 16G --regions 8", "--regions", "17179869184");
  refused("loopback --op writes", "--op", "writes");
  refused("loopback --op write,write", "--op", "twice");
  refused("loopback --op ,", "--op", ",");
  refused("loopback --batch 0", "--batch", "0");
  refused("loopback --batch 40000", "--batch", "40000");
  refused("loopback --batch 4,x", "--batch", "4,x");
  refused("loopback --batch 4 --op send", "--batch", "send");
  refused("loopback --batch 1000 --size 1G", "--batch", "1000");
  refused("loopback --mem gpu", "--mem", "gpu");
  refused("loopback --gpu -1", "--gpu", "-1");
  refused("loopback --gpus 3-1", "--gpus", "3-1");
  refused("loopback --gpus 0,,1", "--gpus", "0,,1");
  refused("loopback --gpus -1", "--gpus", "-1");
  refused("loopback --gpus 0-x", "--gpus", "0-x");
  refused("loopback --gpus 1024", "--gpus", "1024");
  refused("loopback --gpus 0-64", "--gpus", "64 endpoints");
  refused("loopback --gpus 0-1 --gpu 1", "--gpus", "--gpu");
  refused("loopback --gpus 0-1 --server-gpu 1", "--gpus", "--server-gpu");
  refused("loopback --channels 0", "--channels", "TPX_NUM_CHANNELS");
  refused("loopback --channels 65", "--channels", "65");
  refused("loopback --chunk 8M", "--chunk", "8M");
  refused("loopback --timeout-ms 0", "--timeout-ms", "TPX_TIMEOUT_MS");
  refused("loopback --progress maybe", "--progress", "maybe");
  refused("loopback --forever", "--forever", "loopback");
  refused("server --size 4K", "--size", "server");
  refused("client h --host 1.2.3.4", "--host", "client");
  refused("loopback --size", "--size", "needs a value");
  refused("client", "client", "HOST");
  refused("client --size 4K", "client", "HOST");
  refused("serve", "serve", "mode");
  refused("", "mode", NULL);
  /* a number outside its range is called that, not "not a number" */
  refused("loopback --iters 100000001", "--iters", "out of range [1, 100000000]");
  refused("loopback -f two", "-f", "not an integer");
  refused("loopback --channels 65", "--channels", "out of range [1, 64]");
  refused("loopback --channels x", "--channels", "not a number");
  refused("loopback --size 2000G", "--size", "out of range");
  refused("loopback --size 12X", "--size", "not a size");
  /* --keep-going, --duration: write/read bandwidth runs only */
  refused("loopback --keep-going --op send", "--keep-going", "send");
  refused("loopback --duration 5 --latency", "--duration", "--latency");
  refused("loopback --duration 0", "--duration", "out of range");
  refused("server --keep-going", "--keep-going", "server");
}

/* The ranges are the environment's: what TPX_CHUNK_BYTES accepts, --chunk does. */
static void test_ranges_are_configs(void **state) {
  (void)state;
  long long lo, hi;
  assert_int_equal(tpx__config_range("TPX_CHUNK_BYTES", &lo, &hi), 0);
  char line[128], err[512];
  struct bench_opts o;
  snprintf(line, sizeof(line), "loopback --chunk %lld", lo);
  assert_int_equal(parse(line, &o, err, sizeof(err)), 0);
  assert_int_equal(o.chunk, (size_t)lo);
  snprintf(line, sizeof(line), "loopback --chunk %lld", lo - 1);
  assert_int_equal(parse(line, &o, err, sizeof(err)), -1);
  snprintf(line, sizeof(line), "loopback --chunk %lld", hi + 1);
  assert_int_equal(parse(line, &o, err, sizeof(err)), -1);
  assert_int_equal(parse("loopback --chunk 4M", &o, err, sizeof(err)), 0);
  assert_int_equal(o.chunk, 4u << 20);
  assert_int_equal(tpx__config_range("TPX_PORT_BASE", &lo, &hi), 0);
  assert_int_equal(hi, 65535);
  assert_int_equal(parse("server --port 65535", &o, err, sizeof(err)), 0);
  assert_int_equal(o.port, 65535);
  assert_int_equal(tpx__config_range("TPX_NET_PLUGIN", &lo, &hi), TPX_EINVAL); /* not a number */
  long long v = 0;
  assert_int_equal(tpx__config_parse_var("TPX_CHUNK_BYTES", "1", &v), TPX_EINVAL);
  assert_int_equal(tpx__config_parse_var("TPX_CHUNK_BYTES", "64K", &v), 0);
  assert_int_equal(v, 65536);
}

/* The API obeys the same ranges: a chunk size the environment refuses is
 * refused by tpx_endpoint_create too, naming the variable whose rule it is. */
static void test_api_same_ranges(void **state) {
  (void)state;
  tpx_config_t cfg;
  tpx_config_from_env(&cfg);
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.cfg = &cfg;
  p.no_listen = 1;
  tpx_endpoint_t *ep = NULL;
  cfg.chunk_bytes = 1;
  assert_int_equal(tpx_endpoint_create(&p, &ep), TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "TPX_CHUNK_BYTES"));
  cfg.chunk_bytes = 4096;
  cfg.window = 0;
  assert_int_equal(tpx_endpoint_create(&p, &ep), TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "TPX_WINDOW"));
  cfg.window = 16;
  assert_int_equal(tpx_endpoint_create(&p, &ep), 0);
  tpx_endpoint_destroy(ep);
}

static void test_good_lines(void **state) {
  (void)state;
  struct bench_opts o;
  char err[512];
  assert_int_equal(parse("loopback", &o, err, sizeof(err)), 0);
  assert_int_equal(o.mode, BENCH_LOOPBACK);
  assert_int_equal(o.size_min, 64u << 20);
  assert_int_equal(o.nops, 1);
  assert_int_equal(o.ops[0], TPX_OP_WRITE);
  assert_int_equal(parse("client node1 -b 4K -e 1G -f 4 --op write,read,send -c --json out.json", &o, err,
                         sizeof(err)), 0);
  assert_string_equal(o.host, "node1");
  assert_int_equal(o.size_min, 4096);
  assert_int_equal(o.size_max, 1u << 30);
  assert_int_equal(o.factor, 4);
  assert_int_equal(o.nops, 3);
  assert_int_equal(o.ops[2], TPX_OP_SEND);
  assert_int_equal(o.check, 1);
  assert_string_equal(o.json, "out.json");
  assert_int_equal(parse("loopback --block-size 64K --batch 1,256,1000 --op read", &o, err, sizeof(err)), 0);
  assert_int_equal(o.size_min, 65536);
  assert_int_equal(o.size_max, 65536);
  assert_int_equal(o.nbatch, 3);
  assert_int_equal(o.batch[2], 1000);
  assert_int_equal(parse("loopback --latency", &o, err, sizeof(err)), 0);
  assert_int_equal(o.size_min, 4096); /* latency's own default size */
  assert_int_equal(parse("server --forever --host 127.0.0.1 -p 0", &o, err, sizeof(err)), 0);
  assert_int_equal(o.forever, 1);
  assert_int_equal(o.port, 0);
  assert_int_equal(o.ngpus, 1); /* one pair, GPU 0, no --gpus */
  assert_int_equal(o.multi, 0);
  assert_int_equal(o.gpu, 0);
  assert_int_equal(parse("server --gpu 3", &o, err, sizeof(err)), 0);
  assert_int_equal(o.gpus[0], 3);
  assert_int_equal(parse("loopback --gpus 0,0,0,0", &o, err, sizeof(err)), 0);
  assert_int_equal(o.ngpus, 4);
  assert_int_equal(o.multi, 1);
  for (int i = 0; i < 4; i++) assert_int_equal(o.gpus[i], 0);
  assert_int_equal(parse("client h --gpus 0-3,6,2-2", &o, err, sizeof(err)), 0);
  int want[] = {0, 1, 2, 3, 6, 2};
  assert_int_equal(o.ngpus, 6);
  for (int i = 0; i < 6; i++) assert_int_equal(o.gpus[i], want[i]);
  assert_int_equal(o.gpu, 0);
  assert_int_equal(parse("server --gpus 0-63", &o, err, sizeof(err)), 0);
  assert_int_equal(o.ngpus, BENCH_MAX_GPUS);
}

/* The KV layout: blocks never touch on either side, and the span bounds them. */
static void test_layout(void **state) {
  (void)state;
  struct bench_layout l;
  bench_layout_init(&l, 65536, 1000);
  assert_int_equal(bench_layout_bytes(&l), 65536000);
  for (int i = 0; i < 1000; i++) {
    assert_true(bench_layout_client_off(&l, i) + l.block <= bench_layout_span(&l));
    assert_true(bench_layout_server_off(&l, i) + l.block <= bench_layout_span(&l));
    if (i) assert_true(bench_layout_client_off(&l, i) >= bench_layout_client_off(&l, i - 1) + l.block + BENCH_GAP);
  }
  assert_int_equal(bench_layout_server_off(&l, 0), bench_layout_client_off(&l, 999));
  /* --regions: copy k of the layout is the same layout k x region bytes further on both sides */
  struct bench_layout k3 = bench_layout_at(&l, 3, 70000000);
  assert_int_equal(bench_layout_span(&k3), bench_layout_span(&l));
  for (int i = 0; i < 1000; i += 333) {
    assert_int_equal(bench_layout_client_off(&k3, i), bench_layout_client_off(&l, i) + 210000000);
    assert_int_equal(bench_layout_server_off(&k3, i), bench_layout_server_off(&l, i) + 210000000);
  }
  bench_layout_init(&l, 4096, 1);
  assert_int_equal(bench_layout_span(&l), 4096);
  assert_int_equal(bench_layout_client_off(&l, 0), 0);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_bad_values_named),
      cmocka_unit_test(test_ranges_are_configs),
      cmocka_unit_test(test_api_same_ranges),
      cmocka_unit_test(test_good_lines),
      cmocka_unit_test(test_layout),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
