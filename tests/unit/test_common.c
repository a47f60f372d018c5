/* Error codes, configuration parsing. */
#define _GNU_SOURCE
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sys/socket.h>

#include "testutil.h"
#include "tpx/config.h"
#include "common/config.h"
#include "tpx/error.h"
#include "common/error.h"
#include "common/ports.h"
#include "common/util.h"

static void test_strerror(void **state) {
  (void)state;
  assert_string_equal(tpx_strerror(TPX_OK), "success");
  assert_string_equal(tpx_strerror(TPX_ETRUNC), "message truncated");
  assert_string_equal(tpx_strerror(-999), "unknown error");
  assert_string_equal(tpx_strerror(5), "unknown error");
}

/* Every code the public header defines has its own text and an ncclResult_t,
 * and nothing past the sentinel is a code: what an internal path returns is
 * one of these (tests/abi/check_errors.py keeps bare numbers out of src/). */
static void test_error_codes(void **state) {
  (void)state;
  for (int e = TPX_ECUDA; e > TPX_EUNKNOWN; e--) {
    assert_string_not_equal(tpx_strerror(e), "unknown error");
    for (int f = TPX_ECUDA; f > e; f--) assert_string_not_equal(tpx_strerror(e), tpx_strerror(f));
    int r = tpx_to_nccl(e);
    assert_true(r >= 1 && r <= 7);
  }
  assert_string_equal(tpx_strerror(TPX_EUNKNOWN), "unknown error");
  assert_string_equal(tpx_strerror(TPX_EUNKNOWN - 1), "unknown error");
}

/* A refused setting is reported once per process however often the
 * environment is read (tpx_config_global, then once per endpoint a tool
 * makes); another value of it, or the same after a good one, is reported
 * again. */
static void test_config_warn_once(void **state) {
  (void)state;
  tu_log_capture_t c;
  tpx_config_t cfg;
  tu_log_capture_start(&c);
  setenv("TPX_NUM_CHANNELS", "abc", 1);
  for (int i = 0; i < 4; i++) assert_int_equal(tpx_config_from_env(&cfg), TPX_EINVAL);
  assert_int_equal(tu_log_capture_end(&c, "TPX_NUM_CHANNELS=abc"), 1);
  tu_log_capture_start(&c);
  setenv("TPX_NUM_CHANNELS", "xyz", 1);
  for (int i = 0; i < 3; i++) assert_int_equal(tpx_config_from_env(&cfg), TPX_EINVAL);
  setenv("TPX_NUM_CHANNELS", "2", 1); /* taken: the refusal is forgotten */
  assert_int_equal(tpx_config_from_env(&cfg), 0);
  setenv("TPX_NUM_CHANNELS", "xyz", 1);
  for (int i = 0; i < 2; i++) assert_int_equal(tpx_config_from_env(&cfg), TPX_EINVAL);
  assert_int_equal(tu_log_capture_end(&c, "TPX_NUM_CHANNELS=xyz"), 2);
  tu_log_capture_start(&c);
  setenv("TPX_AUTH_KEY", "short", 1);
  for (int i = 0; i < 3; i++) {
    assert_int_equal(tpx_config_from_env(&cfg), TPX_EINVAL);
    assert_true(cfg.auth_error[0] != '\0'); /* refused every time, reported once */
  }
  assert_int_equal(tu_log_capture_end(&c, "TPX_AUTH_KEY"), 1);
  unsetenv("TPX_AUTH_KEY");
  unsetenv("TPX_NUM_CHANNELS");
  /* A retired setting: ignored (nothing refused), said once. */
  tu_log_capture_start(&c);
  setenv("TPX_STAGING_COPY", "sm,ce", 1);
  for (int i = 0; i < 3; i++) assert_int_equal(tpx_config_from_env(&cfg), 0);
  assert_int_equal(tu_log_capture_end(&c, "TPX_STAGING_COPY=sm,ce: the setting is retired"), 1);
  unsetenv("TPX_STAGING_COPY");
  assert_int_equal(tpx_config_set(&cfg, "TPX_STAGING_COPY", "sm"), TPX_ENOENT);
}

static void test_nccl_mapping(void **state) {
  (void)state;
  for (int r = 0; r <= 7; r++) assert_int_equal(tpx_to_nccl(tpx_from_nccl(r)), r);
  assert_int_equal(tpx_from_nccl(42), TPX_EINTERNAL);
  assert_int_equal(tpx_to_nccl(TPX_ETRUNC), 5);
}

static void test_last_error(void **state) {
  (void)state;
  int rc = tpx_err_quiet(TPX_EINVAL, "widget %d is bad", 7);
  assert_int_equal(rc, TPX_EINVAL);
  assert_non_null(strstr(tpx_last_error(), "widget 7 is bad"));
  assert_non_null(strstr(tpx_last_error(), "invalid argument"));
}

/* Once where decided: a quiet record is logged by the first surface, and
 * neither a second surface nor one after tpx_err logs it again; a code
 * nothing recorded after a logged failure is logged with its own text. All
 * at INFO: the caller gets code and text, so at the default level (warn) the
 * library says nothing and the caller reports it once. */
static void surface_sequence(void) {
  assert_int_equal(tpx_err_quiet(TPX_ECLOSED, "gadget %d fell over", 3), TPX_ECLOSED);
  assert_int_equal(tpx_err_surface(TPX_ECLOSED), TPX_ECLOSED);
  assert_int_equal(tpx_err_surface(TPX_ECLOSED), TPX_ECLOSED);
  assert_int_equal(tpx_err(TPX_EINVAL, "sprocket %d is bent", 4), TPX_EINVAL);
  assert_int_equal(tpx_err_surface(TPX_EINVAL), TPX_EINVAL);
  assert_int_equal(tpx_err_surface(TPX_EAUTH), TPX_EAUTH);
  assert_int_equal(tpx_err_surface(0), 0);
}

static void test_err_surface_once(void **state) {
  (void)state;
  tu_log_capture_t c;
  tu_log_capture_start_at(&c, TPX_LOG_INFO);
  surface_sequence();
  size_t len = 0;
  char *text = tu_log_capture_text(&c, &len);
  const char *want[] = {"gadget 3 fell over", "sprocket 4 is bent", tpx_strerror(TPX_EAUTH)};
  for (size_t i = 0; i < sizeof(want) / sizeof(want[0]); i++) {
    const char *at = strstr(text, want[i]);
    assert_non_null(at);
    assert_null(strstr(at + 1, want[i]));
  }
  assert_null(strstr(text, " WARN "));
  free(text);
  tu_log_capture_start(&c); /* the default level: nothing */
  surface_sequence();
  text = tu_log_capture_text(&c, &len);
  assert_int_equal(len, 0);
  free(text);
}

/* The code's name ends the recorded text once, however many layers passed
 * the detail up through tpx_last_error(). */
static void test_err_code_named_once(void **state) {
  (void)state;
  tpx_err_quiet(TPX_ETIMEDOUT, "socket %d: no answer", 7);
  tpx_err_quiet(TPX_ETIMEDOUT, "channel 2: %s", tpx_last_error());
  tpx_err_quiet(TPX_ETIMEDOUT, "peer x: %s", tpx_last_error());
  assert_string_equal(tpx_last_error(), "peer x: channel 2: socket 7: no answer (timed out)");
  tpx_err_quiet(TPX_EREMOTE, "peer y: %s", tpx_last_error());
  assert_string_equal(tpx_last_error(), "peer y: peer x: channel 2: socket 7: no answer (timed out) (remote error)");
}

static void test_config_env(void **state) {
  (void)state;
  tpx_config_t cfg, def;
  tpx_config_defaults(&def);
  setenv("TPX_NSOCKS", "8", 1);
  setenv("UCCL_TCPX_CHUNK_BYTES", "1M", 1);
  setenv("TPX_LOG", "debug", 1);
  assert_int_equal(tpx_config_from_env(&cfg), 0);
  assert_int_equal(cfg.nsocks, 8);
  assert_int_equal(cfg.chunk_bytes, 1 << 20);
  assert_int_equal(cfg.log_level, TPX_LOG_DEBUG);
  /* The TPX_ name wins over its synonym. */
  setenv("TPX_CHUNK_BYTES", "65536", 1);
  assert_int_equal(tpx_config_from_env(&cfg), 0);
  assert_int_equal(cfg.chunk_bytes, 65536);
  /* Out of range or malformed: default kept, error reported. */
  setenv("TPX_CHUNK_BYTES", "8M", 1);
  setenv("TPX_NSOCKS", "many", 1);
  assert_int_equal(tpx_config_from_env(&cfg), TPX_EINVAL);
  assert_int_equal(cfg.chunk_bytes, def.chunk_bytes);
  assert_int_equal(cfg.nsocks, def.nsocks);
  unsetenv("TPX_NSOCKS");
  unsetenv("TPX_CHUNK_BYTES");
  unsetenv("UCCL_TCPX_CHUNK_BYTES");
  unsetenv("TPX_LOG");
}

/* Sockets per comm: an explicit TPX_NSOCKS wins; automatic is the machine's
 * one-comm default shared among the comms of one peer, at least 1. */
/* tpx_config_set: the environment's names and checks, by variable or field. */
static void test_config_set(void **state) {
  (void)state;
  tpx_config_t c, before;
  tpx_config_defaults(&c);
  assert_int_equal(tpx_config_set(&c, "TPX_NUM_CHANNELS", "8"), 0);
  assert_int_equal(c.num_channels, 8);
  assert_int_equal(tpx_config_set(&c, "chunk_bytes", "256K"), 0);
  assert_int_equal(c.chunk_bytes, 256 * 1024);
  assert_int_equal(tpx_config_set(&c, "Log", "debug"), 0);
  assert_int_equal(c.log_level, TPX_LOG_DEBUG);
  assert_int_equal(tpx_config_set(&c, "net_plugin", "tcpx"), 0);
  assert_string_equal(c.net_plugin, "tcpx");
  before = c;
  assert_int_equal(tpx_config_set(&c, "num_channels", "0"), TPX_EINVAL); /* below 1 */
  assert_non_null(strstr(tpx_last_error(), "TPX_NUM_CHANNELS=0"));
  assert_int_equal(tpx_config_set(&c, "chunk_bytes", "8M"), TPX_EINVAL); /* above 4 MiB */
  assert_int_equal(tpx_config_set(&c, "no_such_knob", "1"), TPX_ENOENT);
  assert_int_equal(tpx_config_set(&c, "UCCL_TCPX_NUM_CHANNELS", "5"), 0); /* a synonym */
  assert_int_equal(c.num_channels, 5);
  assert_int_equal(tpx_config_set(&c, "num_channels", "8"), 0);
  assert_int_equal(tpx_config_set(&c, "NSOCKS", "x"), TPX_EINVAL);
  assert_int_equal(tpx_config_set(NULL, "nsocks", "1"), TPX_EINVAL);
  assert_memory_equal(&c, &before, sizeof(c));
  assert_int_equal(tpx_config_size(), sizeof(tpx_config_t));
}

/* TPX_PACK_BYTES: "auto" by default (the engine picks per transport), a
 * number in [0, 4M] overrides it; the same rules through tpx_config_set, the
 * environment and tpx_config_check. */
static void test_config_pack_bytes(void **state) {
  (void)state;
  tpx_config_t c;
  tpx_config_defaults(&c);
  assert_true(c.pack_bytes == TPX_PACK_BYTES_AUTO);
  assert_int_equal(tpx_config_check(&c), 0);
  assert_int_equal(tpx_config_set(&c, "pack_bytes", "64K"), 0);
  assert_int_equal(c.pack_bytes, 65536);
  assert_int_equal(tpx_config_set(&c, "TPX_PACK_BYTES", "AUTO"), 0);
  assert_true(c.pack_bytes == TPX_PACK_BYTES_AUTO);
  assert_int_equal(tpx_config_set(&c, "pack_bytes", "0"), 0);
  assert_int_equal(c.pack_bytes, 0);
  assert_int_equal(tpx_config_set(&c, "pack_bytes", "5M"), TPX_EINVAL);
  assert_int_equal(tpx_config_set(&c, "pack_bytes", "-1"), TPX_EINVAL);
  assert_int_equal(tpx_config_set(&c, "pack_bytes", "autox"), TPX_EINVAL);
  c.pack_bytes = (5u << 20);
  assert_int_equal(tpx_config_check(&c), TPX_EINVAL);
  c.pack_bytes = (size_t)-2; /* only the one sentinel is outside the range */
  assert_int_equal(tpx_config_check(&c), TPX_EINVAL);
  setenv("TPX_PACK_BYTES", "auto", 1);
  tpx_config_defaults(&c);
  c.pack_bytes = 4096;
  assert_int_equal(tpx_config_from_env(&c), 0);
  assert_true(c.pack_bytes == TPX_PACK_BYTES_AUTO);
  setenv("TPX_PACK_BYTES", "16K", 1);
  assert_int_equal(tpx_config_from_env(&c), 0);
  assert_int_equal(c.pack_bytes, 16384);
  setenv("TPX_PACK_BYTES", "8M", 1);
  assert_int_equal(tpx_config_from_env(&c), TPX_EINVAL);
  unsetenv("TPX_PACK_BYTES");
}

static void test_config_nsocks(void **state) {
  (void)state;
  tpx_config_t cfg;
  tpx_config_defaults(&cfg);
  assert_int_equal(cfg.nsocks, 0);
  cpu_set_t set;
  assert_int_equal(sched_getaffinity(0, sizeof(set), &set), 0);
  long ncpu = CPU_COUNT(&set); /* the CPUs this process may use, not all online */
  int one = ncpu <= 2 ? 2 : 4;
  assert_int_equal(tpx_config_nsocks(&cfg, 1), one);
  assert_int_equal(tpx_config_nsocks(&cfg, 0), one);
  assert_int_equal(tpx_config_nsocks(NULL, 1), one);
  /* Together no more data sockets than CPUs, 1..one each. */
  for (int comms = 2; comms <= 64; comms *= 2) {
    long fit = ncpu / comms;
    int want = fit < 1 ? 1 : fit > one ? one : (int)fit;
    assert_int_equal(tpx_config_nsocks(&cfg, comms), want);
  }
  assert_int_equal(tpx_config_nsocks(&cfg, (int)ncpu + 1), 1);
  cfg.nsocks = 3;
  assert_int_equal(tpx_config_nsocks(&cfg, 8), 3);
  setenv("TPX_NSOCKS", "0", 1);
  assert_int_equal(tpx_config_from_env(&cfg), 0);
  assert_int_equal(cfg.nsocks, 0);
  unsetenv("TPX_NSOCKS");
}

/* TPX_CHUNK_BYTES: automatic by default ("auto", 0), a number fixes it. */
static void test_config_chunk(void **state) {
  (void)state;
  tpx_config_t cfg;
  tpx_config_defaults(&cfg);
  assert_int_equal(cfg.chunk_bytes, 0);
  assert_int_equal(tpx_config_check(&cfg), 0);
  /* 4 CPUs and more: 512 KiB whatever the transfer. */
  assert_int_equal(tpx__config_chunk_for(NULL, 64u << 20, 8, 16), 512 * 1024);
  assert_int_equal(tpx__config_chunk_for(NULL, UINT64_MAX, 1, 4), 512 * 1024);
  /* Fewer: the largest power of two from 512 KiB to 2 MiB that every
   * channel gets whole. */
  assert_int_equal(tpx__config_chunk_for(NULL, 0, 2, 2), 512 * 1024);
  assert_int_equal(tpx__config_chunk_for(NULL, 1u << 20, 2, 2), 512 * 1024);
  assert_int_equal(tpx__config_chunk_for(NULL, 2u << 20, 2, 2), 1u << 20);
  assert_int_equal(tpx__config_chunk_for(NULL, 3u << 20, 2, 2), 1u << 20);
  assert_int_equal(tpx__config_chunk_for(NULL, 4u << 20, 2, 2), 2u << 20);
  assert_int_equal(tpx__config_chunk_for(NULL, 64u << 20, 2, 3), 2u << 20);
  assert_int_equal(tpx__config_chunk_for(NULL, UINT64_MAX, 1, 1), 2u << 20);
  assert_int_equal(tpx__config_chunk_for(NULL, 4u << 20, 0, 2), 2u << 20); /* no channels yet: as one */
  size_t mine = tpx_config_chunk(&cfg, 64u << 20, 2);
  assert_int_equal(mine, tpx__config_chunk_for(NULL, 64u << 20, 2, tpx__cpu_count()));
  assert_int_equal(tpx_config_chunk(NULL, 64u << 20, 2), mine);
  cfg.chunk_bytes = 65536;
  assert_int_equal(tpx_config_chunk(&cfg, 64u << 20, 2), 65536);
  assert_int_equal(tpx__config_chunk_for(&cfg, 64u << 20, 2, 1), 65536); /* a fixed size on any machine */
  setenv("TPX_CHUNK_BYTES", "auto", 1);
  assert_int_equal(tpx_config_from_env(&cfg), 0);
  assert_int_equal(cfg.chunk_bytes, 0);
  setenv("TPX_CHUNK_BYTES", "0", 1); /* as the field holds it */
  assert_int_equal(tpx_config_from_env(&cfg), 0);
  assert_int_equal(cfg.chunk_bytes, 0);
  setenv("TPX_CHUNK_BYTES", "4095", 1); /* below 4 KiB: refused, default kept */
  assert_int_equal(tpx_config_from_env(&cfg), TPX_EINVAL);
  assert_int_equal(cfg.chunk_bytes, 0);
  unsetenv("TPX_CHUNK_BYTES");
  assert_int_equal(tpx_config_set(&cfg, "chunk_bytes", "1M"), 0);
  assert_int_equal(tpx_config_chunk(&cfg, 64u << 20, 2), 1u << 20);
  assert_int_equal(tpx_config_set(&cfg, "chunk_bytes", "AUTO"), 0);
  assert_int_equal(cfg.chunk_bytes, 0);
}

/* Confined to one CPU (taskset, a cpuset), the defaults are a 1-CPU
 * machine's whatever the host has: 2 threads, 2 channels, 2 sockets for a
 * comm alone, 1 each for two comms. */
static void test_config_affinity(void **state) {
  (void)state;
  cpu_set_t all, one;
  assert_int_equal(sched_getaffinity(0, sizeof(all), &all), 0);
  int cpu = 0;
  while (!CPU_ISSET(cpu, &all)) cpu++;
  CPU_ZERO(&one);
  CPU_SET(cpu, &one);
  assert_int_equal(sched_setaffinity(0, sizeof(one), &one), 0);
  tpx_config_t cfg;
  tpx_config_defaults(&cfg);
  int nthreads = cfg.nthreads, channels = cfg.num_channels;
  int s1 = tpx_config_nsocks(&cfg, 1), s2 = tpx_config_nsocks(&cfg, 2);
  assert_int_equal(sched_setaffinity(0, sizeof(all), &all), 0);
  assert_int_equal(nthreads, 2);
  assert_int_equal(channels, 2);
  assert_int_equal(s1, 2);
  assert_int_equal(s2, 1);
}

/* Any free port, IPv4 and IPv6 loopback: distinct ports, listenable. */
static void test_bind_port(void **state) {
  (void)state;
  struct sockaddr_in a4 = {.sin_family = AF_INET, .sin_port = htons(1)};
  a4.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  struct sockaddr_in6 a6 = {.sin6_family = AF_INET6, .sin6_addr = IN6ADDR_LOOPBACK_INIT};
  const struct sockaddr *addrs[2] = {(struct sockaddr *)&a4, (struct sockaddr *)&a6};
  socklen_t lens[2] = {sizeof(a4), sizeof(a6)};
  for (int k = 0; k < 2; k++) {
    int fds[2];
    uint16_t ports[2];
    for (int i = 0; i < 2; i++) {
      fds[i] = socket(addrs[k]->sa_family, SOCK_STREAM | SOCK_CLOEXEC, 0);
      assert_true(fds[i] >= 0);
      int e = tpx__bind_port(fds[i], addrs[k], lens[k], 0);
      if (k == 1 && e == EADDRNOTAVAIL) { /* no IPv6 loopback here */
        close(fds[i]);
        if (i == 1) close(fds[0]);
        return;
      }
      assert_int_equal(e, 0);
      assert_int_equal(listen(fds[i], 4), 0);
      struct sockaddr_storage got;
      socklen_t gl = sizeof(got);
      assert_int_equal(getsockname(fds[i], (struct sockaddr *)&got, &gl), 0);
      ports[i] = ntohs(got.ss_family == AF_INET ? ((struct sockaddr_in *)&got)->sin_port
                                                : ((struct sockaddr_in6 *)&got)->sin6_port);
      assert_true(ports[i] != 0 && ports[i] != 1); /* the port asked for is ignored */
    }
    assert_true(ports[0] != ports[1]);
    close(fds[0]);
    close(fds[1]);
  }
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  assert_int_equal(tpx__bind_port(fd, addrs[0], (socklen_t)sizeof(struct sockaddr_storage) + 1, 0), EINVAL);
  assert_int_equal(tpx__bind_port(fd, addrs[0], lens[0], 65536), EINVAL);
  close(fd);
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_strerror),
      cmocka_unit_test(test_error_codes),
      cmocka_unit_test(test_config_warn_once),
      cmocka_unit_test(test_err_surface_once),
      cmocka_unit_test(test_err_code_named_once),
      cmocka_unit_test(test_nccl_mapping),
      cmocka_unit_test(test_last_error),
      cmocka_unit_test(test_config_env),
      cmocka_unit_test(test_config_set),
      cmocka_unit_test(test_config_pack_bytes),
      cmocka_unit_test(test_config_nsocks),
      cmocka_unit_test(test_config_chunk),
      cmocka_unit_test(test_config_affinity),
      cmocka_unit_test(test_config_set),
      cmocka_unit_test(test_bind_port),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
