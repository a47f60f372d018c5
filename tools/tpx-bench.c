/* tpx-bench: transfers of host or GPU memory through the engine, swept like
 * nccl-tests (-b/-e/-f) and in nixlbench's KV-cache pattern (--batch blocks
 * of --block-size in one vectored request), reported as a table, [PERF]
 * lines and --json. `tpx-bench --help` lists the options; docs/API.md
 * describes the tool and its JSON schema.
 *
 *   tpx-bench server [--port P] [--host ADDR] [--forever]
 *   tpx-bench client HOST [--port P] [options]
 *   tpx-bench loopback [options]            both in one process, one transport
 *
 * The code lives in tools/bench/ (bench.h says which file holds what); this
 * file is the entry: the command line, signals, the modes. */
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "bench/bench.h"
#include "internal.h" /* GPU count, primary-context counts: tools/internal.h */
#include "tpx/net.h"
#include "version.h"

static void on_signal(int sig) {
  (void)sig;
  bench_stop = 1;
}

/* SIGINT / SIGTERM end the runs (and a --forever server) cleanly. No
 * SA_RESTART: the waits are bounded slices anyway. */
static void signals(void) {
  struct sigaction sa;
  memset(&sa, 0, sizeof(sa));
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
}

struct lb {
  struct bench_opts o;
  int ports[BENCH_MAX_GPUS];
  int state; /* 0 starting, 1 listening, -1 failed */
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int ret;
};

static void lb_ready(void *arg, const int *ports) {
  struct lb *l = arg;
  pthread_mutex_lock(&l->mu);
  for (int i = 0; ports && i < l->o.ngpus; i++) l->ports[i] = ports[i];
  l->state = ports ? 1 : -1;
  pthread_cond_signal(&l->cv);
  pthread_mutex_unlock(&l->mu);
}

static void *server_thread(void *arg) {
  struct lb *l = arg;
  struct bench_server_ready r = {lb_ready, l};
  l->ret = bench_server(&l->o, &r);
  return NULL;
}

/* One transport for every endpoint of this process (loopback, --gpus), as
 * one process driving several GPUs has. A plugin is shared anyway (the
 * loader opens it once per process; endpoints opening it themselves also
 * follow TPX_NET_ABI), so --gpus opens only the built-in one here. */
static int open_net(struct bench_opts *o, int builtin_only) {
  tpx_config_t cfg;
  bench_make_cfg(o, &cfg);
  int rc = 0;
  if (tpx_net_spec_is_builtin(cfg.net_plugin)) {
    cfg.nsocks = tpx_config_nsocks(&cfg, cfg.num_channels);
    rc = tpx_net_open_builtin(&cfg, &o->net);
  } else if (!builtin_only) {
    rc = tpx_net_open(cfg.net_plugin, &o->net);
  }
  if (rc) fprintf(stderr, "tpx-bench: transport: %s\n", tool_error(rc));
  return rc;
}

/* Both ends in this process, sharing one transport like one process driving
 * two GPUs. The client's failure (even before it connects) stops the server. */
static int loopback(struct bench_opts *o, int argc, char **argv) {
  int rc;
  if (open_net(o, 0)) return 1;
  struct lb l;
  memset(&l, 0, sizeof(l));
  l.o = *o;
  l.o.port = TPX_PORT_EPHEMERAL;
  l.o.listen_host = "127.0.0.1";
  pthread_mutex_init(&l.mu, NULL);
  pthread_cond_init(&l.cv, NULL);
  pthread_t th;
  if (pthread_create(&th, NULL, server_thread, &l) != 0) {
    tpx_net_close(o->net);
    return 1;
  }
  pthread_mutex_lock(&l.mu);
  while (l.state == 0) pthread_cond_wait(&l.cv, &l.mu);
  pthread_mutex_unlock(&l.mu);
  rc = 1;
  o->ports = l.ports;
  if (l.state == 1) rc = bench_client(o, "127.0.0.1", 0, argc, argv);
  bench_stop = 1; /* a server still waiting for a client that never came */
  pthread_join(th, NULL);
  tpx_net_close(o->net);
  return rc ? rc : l.ret;
}

static int gpus_ok(const struct bench_opts *o) {
  int ndev = 0;
  tpx__gpu_device_count(&ndev);
  int need = (o->server_gpu > o->gpu ? o->server_gpu : o->gpu) + 1;
  for (int i = 0; i < o->ngpus; i++) need = o->gpus[i] + 1 > need ? o->gpus[i] + 1 : need;
  if (ndev >= need) return 1;
  fprintf(stderr, "tpx-bench: --mem cuda needs GPU %d, %d usable (%s)\n", need - 1, ndev,
          ndev ? "no such device" : tpx_last_error());
  return 0;
}

int main(int argc, char **argv) {
  if (tool_version_asked(argc, argv, "tpx-bench")) {
    printf("wire version %d (the engine's control protocol, src/engine/wire.h)\n",
           WIRE_VERSION);
    return 0;
  }
  for (int i = 1; i < argc; i++)
    if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) {
      bench_usage(stdout);
      return 0;
    }
  struct bench_opts o;
  char err[512];
  if (bench_parse(argc, argv, &o, err, sizeof(err)) != 0) {
    fprintf(stderr, "tpx-bench: %s\n", err);
    fprintf(stderr, "usage: tpx-bench server|client HOST|loopback [options]; tpx-bench --help lists them\n");
    return 2;
  }
  if (o.json && !strcmp(o.json, "-")) { /* JSON alone on stdout; the table goes to stderr */
    int fd = dup(STDOUT_FILENO);
    if (fd < 0 || !(bench_json_stdout = fdopen(fd, "w")) || dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
      perror("tpx-bench: --json -");
      return 1;
    }
  }
  if (o.cuda && !gpus_ok(&o)) return 1; /* before any connection: nobody left waiting */
  tpx_config_t cfg;
  bench_make_cfg(&o, &cfg);
  if (bench_ifname_check(&cfg, err, sizeof(err)) != 0) {
    fprintf(stderr, "tpx-bench: %s\n", err);
    return 2;
  }
  signals();
  int r;
  if (o.mode != BENCH_LOOPBACK && o.multi && open_net(&o, 1)) return 1; /* --gpus: one transport, every endpoint */
  if (o.mode == BENCH_SERVER) r = bench_server(&o, NULL);
  else if (o.mode == BENCH_CLIENT) r = bench_client(&o, o.host, o.port, argc, argv);
  else r = loopback(&o, argc, argv);
  if (o.mode != BENCH_LOOPBACK && o.net) tpx_net_close(o.net);
  if (o.cuda) printf("[GPU] primary contexts still retained after teardown: %d\n", tpx__gpu_ctx_retained());
  return r;
}
