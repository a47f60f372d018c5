/* One process of a rendezvous test (tests/rendezvous/test_rendezvous.py
 * drives several): public API only, etcd settings from the environment.
 *
 *   rdv_peer writer NAME        publish an endpoint and a 1 MiB region ("buf",
 *                               a pattern of NAME) as NAME; print READY; serve
 *                               until "quit" or EOF on stdin ("put ITEM": one more key)
 *   rdv_peer reader NAME PEER   look PEER up, connect, read its "buf" and
 *                               check every byte; print READ ok; then obey
 *                               stdin: "read" (again), "lookup X", "quit"
 *   rdv_peer lookup PEER        one look (timeout 0), or with a third
 *                               argument MS a wait: LOOKUP ok | LOOKUP fail
 *
 * Every answer is one line on stdout: WORD ok, or WORD fail rc=N ms=T detail. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tpx/tpx.h"

#define LEN (1u << 20)

static double now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

static uint8_t pattern(const char *name, size_t i) {
  uint32_t h = 2166136261u;
  for (const char *p = name; *p; p++) h = (h ^ (uint8_t)*p) * 16777619u;
  return (uint8_t)((i * 131u + h + (i >> 12)) & 0xff);
}

static void say(const char *word, int rc, double t0) {
  if (rc == 0) printf("%s ok\n", word);
  else printf("%s fail rc=%d ms=%.0f %s: %s\n", word, rc, now_ms() - t0, tpx_strerror(rc), tpx_last_error());
  fflush(stdout);
}

static tpx_endpoint_t *endpoint(const char *name, int listen) {
  tpx_endpoint_params_t p;
  tpx_endpoint_params_init(&p);
  p.name = name;
  p.listen_host = "127.0.0.1";
  p.port = TPX_PORT_EPHEMERAL;
  p.no_listen = !listen;
  tpx_endpoint_t *ep = NULL;
  int rc = tpx_endpoint_create(&p, &ep);
  if (rc) say("ENDPOINT", rc, now_ms());
  return rc ? NULL : ep;
}

static int writer(tpx_rdv_t *r, const char *name) {
  static uint8_t buf[LEN];
  for (size_t i = 0; i < LEN; i++) buf[i] = pattern(name, i);
  tpx_endpoint_t *ep = endpoint(name, 1);
  if (!ep) return 1;
  tpx_mem_desc_t d = {buf, LEN, TPX_MEM_HOST, 0, TPX_ACCESS_READ};
  tpx_mem_t *m = NULL;
  double t0 = now_ms();
  int rc = tpx_mem_register(ep, &d, &m);
  if (rc == 0) rc = tpx_rdv_publish(r, ep, name);
  if (rc == 0) rc = tpx_rdv_publish_mem(r, name, "buf", m);
  say("PUBLISH", rc, t0);
  if (rc == 0) say("READY", 0, t0);
  char line[128];
  while (rc == 0 && fgets(line, sizeof(line), stdin) && strncmp(line, "quit", 4) != 0) {
    line[strcspn(line, "\n")] = '\0';
    if (!strncmp(line, "put ", 4)) { /* an item of our own: "put ITEM" stores ITEM's name as its value */
      t0 = now_ms();
      say("PUT", tpx_rdv_put(r, name, line + 4, line + 4, strlen(line + 4)), t0);
    }
  }
  tpx_rdv_close(r); /* before the endpoint: the keys go first */
  tpx_mem_deregister(m);
  tpx_endpoint_destroy(ep);
  return rc ? 1 : 0;
}

static int read_check(tpx_peer_t *peer, tpx_mem_t *m, uint8_t *buf, const tpx_rmem_t *rm, const char *peer_name) {
  memset(buf, 0, LEN);
  tpx_xfer_t *x = NULL;
  int rc = tpx_read(peer, m, 0, rm, 0, LEN, &x);
  if (rc == 0) rc = tpx_xfer_wait(x, 30000);
  tpx_xfer_free(x);
  for (size_t i = 0; rc == 0 && i < LEN; i++)
    if (buf[i] != pattern(peer_name, i)) {
      printf("MISMATCH at byte %zu\n", i);
      rc = TPX_EPROTO;
    }
  return rc;
}

static int reader(tpx_rdv_t *r, const char *name, const char *peer_name) {
  static uint8_t buf[LEN];
  tpx_endpoint_t *ep = endpoint(name, 0);
  if (!ep) return 1;
  tpx_mem_desc_t d = {buf, LEN, TPX_MEM_HOST, 0, TPX_ACCESS_WRITE};
  tpx_mem_t *m = NULL;
  tpx_peer_t *peer = NULL;
  tpx_rmem_t *rm = NULL;
  double t0 = now_ms();
  int rc = tpx_mem_register(ep, &d, &m);
  if (rc == 0) rc = tpx_rdv_connect(r, ep, peer_name, -1, &peer);
  if (rc == 0) rc = tpx_rdv_load_mem(r, peer_name, "buf", -1, &rm);
  if (rc == 0) rc = read_check(peer, m, buf, rm, peer_name);
  say("READ", rc, t0);
  char line[128];
  while (rc == 0 && fgets(line, sizeof(line), stdin) && strncmp(line, "quit", 4) != 0) {
    line[strcspn(line, "\n")] = '\0';
    t0 = now_ms();
    if (!strcmp(line, "read")) {
      say("READ", read_check(peer, m, buf, rm, peer_name), t0);
    } else if (!strncmp(line, "lookup ", 7)) {
      uint8_t blob[TPX_CONN_INFO_MAX];
      size_t len;
      say("LOOKUP", tpx_rdv_get(r, line + 7, "conn", blob, sizeof(blob), &len, -1), t0);
    } else {
      printf("UNKNOWN %s\n", line);
      fflush(stdout);
    }
  }
  tpx_rmem_free(rm);
  tpx_peer_close(peer);
  tpx_mem_deregister(m);
  tpx_endpoint_destroy(ep);
  tpx_rdv_close(r);
  return rc ? 1 : 0;
}

int main(int argc, char **argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: rdv_peer writer NAME | reader NAME PEER | lookup PEER [MS]\n");
    return 2;
  }
  tpx_rdv_t *r = NULL;
  double t0 = now_ms();
  int rc = tpx_rdv_open(NULL, &r);
  if (rc) {
    say("OPEN", rc, t0);
    return 1;
  }
  if (!strcmp(argv[1], "writer")) return writer(r, argv[2]);
  if (!strcmp(argv[1], "reader") && argc == 4) return reader(r, argv[2], argv[3]);
  if (!strcmp(argv[1], "lookup")) {
    uint8_t blob[TPX_CONN_INFO_MAX];
    size_t len;
    rc = tpx_rdv_get(r, argv[2], "conn", blob, sizeof(blob), &len, argc > 3 ? atoi(argv[3]) : 0);
    say("LOOKUP", rc, t0);
    tpx_rdv_close(r);
    return rc ? 1 : 0;
  }
  tpx_rdv_close(r);
  fprintf(stderr, "rdv_peer: bad arguments\n");
  return 2;
}
