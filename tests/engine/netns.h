/* Network-namespace fixtures for the engine tests: two namespaces joined by
 * several veth links (198.18.<k>.1/24 on side A, 198.18.<k>.2/24 on side B,
 * k = 1..n, inside 198.18.0.0/15 only), entering a namespace from a forked
 * child, interface byte counters, and link up/down. Built with `ip` from
 * iproute2 (fork/exec, exit codes checked). Names carry the creator's pid so
 * concurrent runs never collide; namespaces left by a killed run are removed
 * by the next one. */
#ifndef TPX_TESTS_NETNS_H
#define TPX_TESTS_NETNS_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <unistd.h>

#include "tpx/tpx.h"

#define NN_MAX_LINKS 8
#define NN_NAME 16 /* IFNAMSIZ: 15 characters + NUL */

typedef struct nn_topo {
  int nlinks;
  int pid;                               /* creator; only it tears down */
  char ns[2][32];                        /* [0] side A, [1] side B */
  char ifname[2][NN_MAX_LINKS][NN_NAME]; /* [side][k-1] */
  char addr[2][NN_MAX_LINKS][20];        /* "198.18.k.1" / "198.18.k.2" */
  int created[2];                        /* namespace exists */
} nn_topo_t;

/* Outcomes of nn_topo_create. */
#define NN_OK 0
#define NN_SKIP 1 /* not permitted here (EPERM) or `ip` missing: *why says which */
#define NN_FAIL (-1)

/* Run `ip` with the space-separated arguments formatted from fmt; its stdout
 * is discarded unless quiet is 0. Returns its exit status (127: not found,
 * -1: could not run it). */
int nn_ip(int quiet, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Build the topology with nlinks (1..NN_MAX_LINKS) links, lo and every link
 * up. On NN_FAIL whatever was made is torn down again. */
int nn_topo_create(nn_topo_t *t, int nlinks, const char **why);
/* Delete both namespaces (which deletes the veths). Safe to repeat; does
 * nothing in a process other than the creator. Returns 0 when nothing of
 * the topology is left. */
int nn_topo_destroy(nn_topo_t *t);
/* Delete namespaces named by this fixture whose creating process is gone. */
void nn_reap_stale(void);

/* In a forked, single-threaded child: move into the namespace and mount a
 * private /sys of it (so /sys/class/net shows its interfaces). Returns 0, or
 * -1 with a message on stderr. */
int nn_enter(const char *ns);
/* Byte counter of an interface of the current namespace: which is "tx_bytes"
 * or "rx_bytes". Reads /sys/class/net/<if>/statistics (or /proc/self/net/dev
 * when nn_enter could not mount /sys). Returns 0 or -1. */
int nn_counter(const char *ifname, const char *which, uint64_t *out);
/* Wait until an interface of the current namespace is up and running (the
 * kernel marks a veth running a little after `ip link set up`, and the
 * transport skips interfaces that are not). Returns 0, or -1 on timeout. */
int nn_wait_running(const char *ifname, int timeout_ms);
/* Set an interface of the current namespace up or down (ioctl: immediate). */
int nn_link_set(const char *ifname, int up);

/* In side me's namespace (0: nsA, 1: nsB): an endpoint on the built-in
 * transport over the first nlinks links of t (TPX_SOCKET_IFNAME), dialling
 * the test network (TPX_ALLOW_DIAL=198.18.0.0/15: the peer's other NICs are
 * not its control connection's address); B listens on its first link's
 * address at port, A does not listen. cfg holds the caller's other
 * settings. Then a zeroed buffer of len bytes, registered for reading and
 * writing. 0, or -1 with why saying what failed. */
int nn_ep_open(const nn_topo_t *t, int me, int nlinks, tpx_config_t *cfg, int port, size_t len,
               tpx_endpoint_t **ep, uint8_t **buf, tpx_mem_t **mem, char *why, size_t cap);
/* Undo nn_ep_open (peers closed first by the caller). 0, or -1 with why. */
int nn_ep_close(tpx_endpoint_t *ep, uint8_t *buf, tpx_mem_t *mem, char *why, size_t cap);

/* Fork side B (1) then side A (0), each running fn(t, me, ready_fd) in a
 * child that dies with the parent: B writes 'r' to ready_fd once it listens,
 * A reads it; each exits 0 when it passed. Waits at most limit_ms (a side that
 * fails cuts the other's wait to 2 s). 0 when both passed, else -1 with why
 * naming the side that failed first (hung or failed). */
int nn_run_sides(const nn_topo_t *t, void (*fn)(const nn_topo_t *t, int me, int ready_fd), int limit_ms,
                 char *why, size_t cap);
/* Run `tc` with the formatted arguments in the current namespace (a child
 * that entered it). Returns its exit status (127: not found). */
int nn_tc(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* ---- one side of a two-namespace engine test (a forked child, no cmocka) ---- */

typedef struct nn_side {
  const nn_topo_t *t;
  int me;           /* 0: A (connects, drives), 1: B (listens) */
  char tag;         /* 'A' / 'B' */
  const char *name; /* the test's, in front of every failure */
  tpx_endpoint_t *ep;
  tpx_peer_t *peer;
  uint8_t *buf;
  tpx_mem_t *mem;
  tpx_rmem_t *remote; /* A: B's buffer */
} nn_side_t;

/* A side's check: on failure say where (test name, side tag) and why, with
 * the library's last error, and _exit (no cleanup: the parent kills and
 * deletes everything). NN_CK takes an nn_side_t. */
#define NN_CK_AT(name, tag, cond, ...)                                                             \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "[%s %c] FAILED at line %d: ", (name), (tag), __LINE__);                     \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, " (last error: %s)\n", tpx_last_error());                                   \
      fflush(NULL);                                                                                \
      _exit(10);                                                                                   \
    }                                                                                              \
  } while (0)
#define NN_CK(s, cond, ...) NN_CK_AT((s)->name, (s)->tag, cond, __VA_ARGS__)

/* Milliseconds of the monotonic clock. */
double nn_now_ms(void);

/* In side me's child: s named, inside its namespace, its first nlinks links
 * running (10 s at most). */
void nn_side_enter(nn_side_t *s, const nn_topo_t *t, int me, const char *name, int nlinks);
/* nn_ep_open with cfg, then the peer: B tells A through ready_fd that it
 * listens, accepts and sends its buffer's descriptor ("MD" + public data);
 * A waits for ready_fd, connects to B's first link at port and loads the
 * descriptor into s->remote. Each wait bounded by step_ms. */
void nn_side_open(nn_side_t *s, int nlinks, tpx_config_t *cfg, int port, size_t len, int ready_fd, int step_ms);
/* Peer, remote descriptor, endpoint and buffer released. */
void nn_side_close(nn_side_t *s);

/* The parent's part of a test (cmocka): build the topology with nlinks
 * links into *t (skip where not permitted), run fn on both sides within
 * limit_ms, fail naming the side that failed. The caller tears t down. */
void nn_test_sides(nn_topo_t *t, int nlinks, void (*fn)(const nn_topo_t *t, int me, int ready_fd), int limit_ms);

#endif
