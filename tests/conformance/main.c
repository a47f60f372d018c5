/* tpx-conformance: runner. Parses options (arguments win over TPX_CONFORMANCE_*
 * environment variables), opens the transport, picks the device, meets the
 * other process in two-process mode, warms the transport up, records the fd
 * and thread baseline, runs the cases. */
#define _GNU_SOURCE
#include <errno.h>
#include <fnmatch.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "cases.h"
#include "conformance.h"

#define CASE(fn, name, c2s, s2c, order)                                                            \
  {#fn, fn, cf_case_setup, cf_case_teardown,                                                       \
   (void *)&(const cf_case_t){name, c2s, s2c, order}}

static const struct CMUnitTest tests[] = {
    CASE(t_pattern_matches_testutil, "pattern_matches_testutil", 0, 0, 0),
    CASE(t_properties, "properties", 0, 0, 0),
    CASE(t_connect_accept_first, "connect_accept_first", 1, 1, CF_ORDER_ACCEPT_FIRST),
    CASE(t_connect_connect_first, "connect_connect_first", 1, 1, CF_ORDER_CONNECT_FIRST),
    CASE(t_sizes, "sizes", 1, 1, CF_ORDER_ALTERNATE),
    CASE(t_size_1gib, "size_1gib", 1, 0, CF_ORDER_ALTERNATE),
    CASE(t_inflight, "inflight", 1, 1, CF_ORDER_ALTERNATE),
    CASE(t_multi_comm, "multi_comm", 4, 4, CF_ORDER_ALTERNATE),
    CASE(t_many_comms, "many_comms", 16, 16, CF_ORDER_ALTERNATE),
    CASE(t_truncation_small, "truncation_small", 1, 0, CF_ORDER_ALTERNATE),
    CASE(t_truncation_large, "truncation_large", 1, 0, CF_ORDER_ALTERNATE),
    CASE(t_short_send, "short_send", 1, 0, CF_ORDER_ALTERNATE),
    CASE(t_peer_close_recv_side, "peer_close_recv_side", 1, 0, CF_ORDER_ALTERNATE),
    CASE(t_peer_close_send_side, "peer_close_send_side", 1, 0, CF_ORDER_ALTERNATE),
    CASE(t_peer_close_mid_message, "peer_close_mid_message", 1, 0, CF_ORDER_ALTERNATE),
    CASE(t_close_after_last_send, "close_after_last_send", 1, 0, CF_ORDER_ALTERNATE),
    CASE(t_regmr_host, "regmr_host", 1, 0, CF_ORDER_ALTERNATE),
    CASE(t_regmr_cuda, "regmr_cuda", 1, 0, CF_ORDER_ALTERNATE),
    CASE(t_grouped_recv, "grouped_recv", 1, 0, CF_ORDER_ALTERNATE),
    CASE(t_close_idle, "close_idle", 1, 1, CF_ORDER_ALTERNATE),
    CASE(t_close_busy, "close_busy", 3, 2, CF_ORDER_ALTERNATE),
    CASE(t_bad_input, "bad_input", 1, 1, CF_ORDER_ALTERNATE),
};

static void usage(FILE *f) {
  fprintf(f,
          "usage: tpx-conformance [options]\n"
          "  --plugin SPEC      transport: tpx | path/to/libnccl-net-X.so | name (tcpx)\n"
          "                     [TPX_CONFORMANCE_PLUGIN; default TPX_NET_PLUGIN, else built-in]\n"
          "  --ifname NAME      device whose name is NAME [TPX_CONFORMANCE_IFNAME; default lo,\n"
          "                     else device 0]\n"
          "  --dev N            device index (wins over --ifname) [TPX_CONFORMANCE_DEV]\n"
          "  --role R           both (default: one process) | server | client\n"
          "  --peer HOST:PORT   side channel: server binds it (port 0 = any), client connects\n"
          "  --port-file FILE   server: write the bound side-channel port to FILE\n"
          "  --timeout-ms MS    deadline of every wait [TPX_CONFORMANCE_TIMEOUT_MS, 30000]\n"
          "  --case-timeout S   watchdog per case [TPX_CONFORMANCE_CASE_TIMEOUT, 120]\n"
          "  --max-bytes SIZE   largest message (K/M/G) [TPX_CONFORMANCE_MAX_BYTES, 1G]\n"
          "  --window N         requests in flight per comm [TPX_CONFORMANCE_WINDOW;\n"
          "                     default 32, 16 with TCPX quirks]\n"
          "  --quirks 0|1       tolerate TCPX quirks (no receive sizes, rc -2 once the peer\n"
          "                     closed, 16 requests) [TPX_CONFORMANCE_QUIRKS; auto: UNPACK or\n"
          "                     a name containing TCPX]\n"
          "  --no-fd-check      do not check fds/threads after each case\n"
          "                     [TPX_CONFORMANCE_FD_CHECK=0]\n"
          "  --host-bytes       UNPACK plugins: verify the bytes of host receives too (the\n"
          "                     TCPX plugin without devmem) [TPX_CONFORMANCE_HOST_BYTES=1]\n"
          "  --filter GLOB      run only matching cases (cmocka names, t_*)\n"
          "  --skip GLOB[,GLOB] skip matching cases\n"
          "  --list             list the cases\n");
}

static int parse_size(const char *s, size_t *out) {
  char *end = NULL;
  errno = 0;
  unsigned long long v = strtoull(s, &end, 0);
  if (errno || end == s) return -1;
  unsigned long long mul = 1;
  if (*end == 'k' || *end == 'K') mul = 1ull << 10, end++;
  else if (*end == 'm' || *end == 'M') mul = 1ull << 20, end++;
  else if (*end == 'g' || *end == 'G') mul = 1ull << 30, end++;
  if (*end == 'i' || *end == 'B') end++; /* 64MiB / 64MB */
  if (*end == 'B') end++;
  if (*end != '\0') return -1;
  *out = (size_t)(v * mul);
  return 0;
}

static int parse_int(const char *s, int lo, int hi, int *out) {
  char *end = NULL;
  errno = 0;
  long v = strtol(s, &end, 10);
  if (errno || end == s || *end || v < lo || v > hi) return -1;
  *out = (int)v;
  return 0;
}

/* Tests and tools may read their own variables; the library reads only
 * through src/common/config.c. */
static const char *env(const char *name) {
  const char *v = getenv(name);
  return v && v[0] ? v : NULL;
}

static int parse_opts(int argc, char **argv, cf_opts_t *o) {
  o->dev = -1;
  o->role = CF_ROLE_BOTH;
  o->timeout_ms = 30000;
  o->case_timeout_s = 120;
  o->max_bytes = (size_t)1 << 30;
  o->quirks = -1;
  o->fd_check = 1;
  const char *v;
  if ((v = env("TPX_CONFORMANCE_PLUGIN"))) o->plugin = v;
  if ((v = env("TPX_CONFORMANCE_IFNAME"))) o->ifname = v;
  if ((v = env("TPX_CONFORMANCE_DEV")) && parse_int(v, 0, 1 << 20, &o->dev)) goto bad_env;
  if ((v = env("TPX_CONFORMANCE_TIMEOUT_MS")) && parse_int(v, 100, 3600000, &o->timeout_ms))
    goto bad_env;
  if ((v = env("TPX_CONFORMANCE_CASE_TIMEOUT")) && parse_int(v, 1, 86400, &o->case_timeout_s))
    goto bad_env;
  if ((v = env("TPX_CONFORMANCE_MAX_BYTES")) && parse_size(v, &o->max_bytes)) goto bad_env;
  if ((v = env("TPX_CONFORMANCE_WINDOW")) && parse_int(v, 1, 4096, &o->window)) goto bad_env;
  if ((v = env("TPX_CONFORMANCE_QUIRKS")) && parse_int(v, 0, 1, &o->quirks)) goto bad_env;
  if ((v = env("TPX_CONFORMANCE_FD_CHECK")) && parse_int(v, 0, 1, &o->fd_check)) goto bad_env;
  if ((v = env("TPX_CONFORMANCE_HOST_BYTES")) && parse_int(v, 0, 1, &o->host_bytes)) goto bad_env;
  if ((v = env("TPX_CONFORMANCE_FILTER"))) o->filter = v;
  if ((v = env("TPX_CONFORMANCE_SKIP"))) o->skip = v;

  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char *val = i + 1 < argc ? argv[i + 1] : NULL;
#define NEED_VAL                                                                                   \
  do {                                                                                             \
    if (!val) {                                                                                    \
      fprintf(stderr, "tpx-conformance: %s needs a value\n", a);                                   \
      return -1;                                                                                   \
    }                                                                                              \
    i++;                                                                                           \
  } while (0)
    if (!strcmp(a, "--plugin")) { NEED_VAL; o->plugin = val; }
    else if (!strcmp(a, "--ifname")) { NEED_VAL; o->ifname = val; }
    else if (!strcmp(a, "--dev")) { NEED_VAL; if (parse_int(val, 0, 1 << 20, &o->dev)) goto bad; }
    else if (!strcmp(a, "--role")) {
      NEED_VAL;
      if (!strcmp(val, "both")) o->role = CF_ROLE_BOTH;
      else if (!strcmp(val, "server")) o->role = CF_ROLE_SERVER;
      else if (!strcmp(val, "client")) o->role = CF_ROLE_CLIENT;
      else goto bad;
    }
    else if (!strcmp(a, "--peer")) { NEED_VAL; o->peer = val; }
    else if (!strcmp(a, "--port-file")) { NEED_VAL; o->port_file = val; }
    else if (!strcmp(a, "--timeout-ms")) {
      NEED_VAL;
      if (parse_int(val, 100, 3600000, &o->timeout_ms)) goto bad;
    }
    else if (!strcmp(a, "--case-timeout")) {
      NEED_VAL;
      if (parse_int(val, 1, 86400, &o->case_timeout_s)) goto bad;
    }
    else if (!strcmp(a, "--max-bytes")) { NEED_VAL; if (parse_size(val, &o->max_bytes)) goto bad; }
    else if (!strcmp(a, "--window")) { NEED_VAL; if (parse_int(val, 1, 4096, &o->window)) goto bad; }
    else if (!strcmp(a, "--quirks")) { NEED_VAL; if (parse_int(val, 0, 1, &o->quirks)) goto bad; }
    else if (!strcmp(a, "--no-fd-check")) o->fd_check = 0;
    else if (!strcmp(a, "--host-bytes")) o->host_bytes = 1;
    else if (!strcmp(a, "--filter")) { NEED_VAL; o->filter = val; }
    else if (!strcmp(a, "--skip")) { NEED_VAL; o->skip = val; }
    else if (!strcmp(a, "--list")) {
      for (size_t k = 0; k < sizeof(tests) / sizeof(tests[0]); k++) printf("%s\n", tests[k].name);
      exit(0);
    }
    else if (!strcmp(a, "--help") || !strcmp(a, "-h")) { usage(stdout); exit(0); }
    else {
      fprintf(stderr, "tpx-conformance: unknown argument '%s'\n", a);
      usage(stderr);
      return -1;
    }
    continue;
  bad:
    fprintf(stderr, "tpx-conformance: bad value '%s' for %s\n", val, a);
    return -1;
#undef NEED_VAL
  }
  if (o->role != CF_ROLE_BOTH && !o->peer) {
    fprintf(stderr, "tpx-conformance: --role server|client needs --peer HOST:PORT\n");
    return -1;
  }
  return 0;
bad_env:
  fprintf(stderr, "tpx-conformance: bad value in the environment: '%s'\n", v);
  return -1;
}

static int pick_device(void) {
  const tpx_net_ops_t *ops = G.net->ops;
  int rc = ops->devices(G.net, &G.ndev);
  if (rc || G.ndev < 1) {
    fprintf(stderr, "tpx-conformance: devices rc %d (%s), ndev %d: %s\n", rc, tpx_strerror(rc),
            G.ndev, tpx_last_error());
    return -1;
  }
  int want_lo = !G.o.ifname;
  G.dev = -1;
  if (G.o.dev >= 0) {
    G.dev = G.o.dev;
  } else {
    for (int d = 0; d < G.ndev && G.dev < 0; d++) {
      tpx_net_props_t p;
      if (ops->get_properties(G.net, d, &p) != 0) continue;
      if (strcmp(p.name, want_lo ? "lo" : G.o.ifname) == 0) G.dev = d;
    }
    if (G.dev < 0 && !want_lo) {
      fprintf(stderr, "tpx-conformance: no device named '%s' among %d\n", G.o.ifname, G.ndev);
      return -1;
    }
    if (G.dev < 0) G.dev = 0;
  }
  if (G.dev >= G.ndev) {
    fprintf(stderr, "tpx-conformance: device %d out of range (%d devices)\n", G.dev, G.ndev);
    return -1;
  }
  rc = ops->get_properties(G.net, G.dev, &G.props);
  if (rc) {
    fprintf(stderr, "tpx-conformance: getProperties(%d) rc %d (%s)\n", G.dev, rc,
            tpx_strerror(rc));
    return -1;
  }
  return 0;
}

static int side_channel_up(void) {
  if (G.o.role == CF_ROLE_BOTH) return 0;
  if (G.o.role == CF_ROLE_SERVER) {
    int lfd, port;
    if (cf_sc_listen(G.o.peer, &lfd, &port) != 0) return -1;
    printf("tpx-conformance: server: side channel on port %d\n", port);
    fflush(stdout);
    if (G.o.port_file) {
      char tmp[4096];
      snprintf(tmp, sizeof(tmp), "%s.tmp", G.o.port_file);
      FILE *f = fopen(tmp, "w");
      if (!f || fprintf(f, "%d\n", port) < 0 || fclose(f) != 0 || rename(tmp, G.o.port_file)) {
        fprintf(stderr, "tpx-conformance: cannot write %s\n", G.o.port_file);
        close(lfd);
        return -1;
      }
    }
    G.side_fd = cf_sc_accept(lfd, G.o.case_timeout_s * 1000);
    close(lfd);
  } else {
    G.side_fd = cf_sc_connect(G.o.peer, G.o.case_timeout_s * 1000);
  }
  if (G.side_fd < 0) return -1;
  /* Both processes must run the same suite the same way. */
  char hello[512], got[512];
  snprintf(hello, sizeof(hello), "tpx-conformance/1 transport=%s abi=%d window=%d quirks=%d "
           "filter=%s skip=%s", G.net->name, G.net->abi_version, G.window, G.quirks,
           G.o.filter ? G.o.filter : "-", G.o.skip ? G.o.skip : "-");
  uint32_t n = 0;
  if (cf_sc_send(G.side_fd, hello, (uint32_t)strlen(hello), G.o.timeout_ms) != 0 ||
      cf_sc_recv(G.side_fd, got, sizeof(got) - 1, &n, G.o.timeout_ms) != 0) {
    fprintf(stderr, "tpx-conformance: side channel handshake failed\n");
    return -1;
  }
  got[n] = '\0';
  if (strcmp(hello, got) != 0) {
    fprintf(stderr, "tpx-conformance: the two processes differ:\n  here: %s\n  peer: %s\n", hello,
            got);
    return -1;
  }
  return 0;
}

/* Open every lazily created resource once (threads, epoll sets, pools) so
 * the per-case leak check compares like with like. */
static int warm_up(void) {
  enum { N = 8 };
  cf_link_t links[N];
  char why[320];
  G.case_no = 0;
  int rc = cf_sync("warm-up");
  for (int i = 0; i < N && rc == 0; i++) rc = cf_link_init(&links[i], i < N / 2 ? CF_C2S : CF_S2C);
  if (rc == 0) rc = cf_links_establish(links, N, CF_ORDER_ALTERNATE, why, sizeof(why));
  else snprintf(why, sizeof(why), "setup");
  if (rc == 0) {
    cf_msg_t m[N];
    cf_side_t *sides[2 * N];
    int k = 0;
    for (int i = 0; i < N; i++) {
      m[i] = (cf_msg_t){.send_size = 65536, .recv_size = 65536, .seed = cf_seed(i, 0)};
      sides[k++] = cf_side_new(&links[i], 1, &m[i], 1);
      sides[k++] = cf_side_new(&links[i], 0, &m[i], 1);
    }
    rc = cf_drive(sides, k, NULL, G.o.timeout_ms);
    for (int i = 0; i < k && rc == 0; i++)
      if (sides[i] && sides[i]->err_rc) {
        rc = sides[i]->err_rc;
        snprintf(why, sizeof(why), "%s", sides[i]->err_msg);
      }
    if (rc == TPX_ETIMEDOUT) snprintf(why, sizeof(why), "no completion in %d ms", G.o.timeout_ms);
  }
  cf_teardown_all(links, N);
  if (cf_sync("warm-up done") != 0 && rc == 0) rc = TPX_ESYSTEM;
  if (rc) {
    fprintf(stderr, "tpx-conformance: warm-up (8 links, 64 KiB each) failed: rc %d: %s\n", rc,
            why);
    if (strstr(why, "no size"))
      fprintf(stderr, "tpx-conformance: this transport reports no receive sizes (as TCPX and "
                      "the built-in's strict mode): run with --quirks 1\n");
  }
  return rc;
}

int main(int argc, char **argv) {
  if (parse_opts(argc, argv, &G.o) != 0) return 2;
  int rc = tpx_net_open(G.o.plugin, &G.net);
  if (rc || !G.net) {
    fprintf(stderr, "tpx-conformance: tpx_net_open(%s) rc %d (%s): %s\n",
            G.o.plugin ? G.o.plugin : "(default)", rc, tpx_strerror(rc), tpx_last_error());
    return 2;
  }
  int ret = 2;
  if (pick_device() != 0) goto out;
  G.unpack = G.props.dev_type == TPX_NET_DEV_UNPACK;
  /* TCPX quirks: an UNPACK device, or a loaded plugin limited to 16 requests. */
  G.quirks = G.o.quirks >= 0 ? G.o.quirks
                             : (G.unpack || (G.net->caps.max_requests == TPX_NET_TCPX_MAX_REQUESTS && !G.net->caps.builtin));
  G.window = G.o.window > 0 ? G.o.window : G.net->caps.max_requests;
  printf("tpx-conformance: transport '%s' (%s, ncclNet v%d), device %d '%s' of %d, role %s, "
         "window %d, TCPX quirks %s, max message %zu B\n",
         G.net->name, G.o.plugin ? G.o.plugin : "default", G.net->abi_version, G.dev,
         G.props.name, G.ndev,
         G.o.role == CF_ROLE_BOTH ? "both (one process)"
         : G.o.role == CF_ROLE_SERVER ? "server" : "client",
         G.window, G.quirks ? "tolerated" : "off", G.o.max_bytes);
  fflush(stdout);
  if (side_channel_up() != 0) goto out;
  if (warm_up() != 0) goto out;
  G.fd_base = tu_count_fds();
  tu_fds_snapshot(&G.fds_base);
  G.thr_base = cf_thread_count();
  if (G.o.filter) cmocka_set_test_filter(G.o.filter);
  /* --skip takes several globs (cmocka's filter takes one). */
  enum { NTESTS = sizeof(tests) / sizeof(tests[0]) };
  struct CMUnitTest run[NTESTS];
  size_t nrun = 0;
  for (size_t i = 0; i < NTESTS; i++) {
    int skip = 0;
    for (const char *g = G.o.skip; g && *g && !skip; g += strcspn(g, ",") + (g[strcspn(g, ",")] == ',')) {
      char pat[128];
      snprintf(pat, sizeof(pat), "%.*s", (int)strcspn(g, ","), g);
      skip = fnmatch(pat, tests[i].name, 0) == 0;
    }
    if (!skip) run[nrun++] = tests[i];
  }
  char group[160];
  snprintf(group, sizeof(group), "tpx-conformance[%s%s]", G.net->name,
           G.o.role == CF_ROLE_SERVER ? ",server" : G.o.role == CF_ROLE_CLIENT ? ",client" : "");
  int failed = _cmocka_run_group_tests(group, run, nrun, NULL, NULL);
  cf_print_notes();
  ret = failed ? 1 : 0;
out:
  if (G.side_fd >= 0) close(G.side_fd);
  tpx_net_close(G.net);
  return ret;
}
