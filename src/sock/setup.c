/* Connection setup of the built-in transport: listen, connect, accept.
 *
 * Nothing here blocks. connect keeps its progress in a heap state whose token
 * sits in the caller's handle buffer (so the caller must pass the same buffer
 * on every retry, as NCCL does); accept keeps every half-open connection in
 * the listen comm, grouped by the connector's random comm id, so several
 * connectors may be in progress on one listen comm at once. A connection
 * that does not speak our hello (wire.h) is closed and logged; the listen
 * comm keeps working. connect completes without waiting for accept: the
 * hello goes one way only. A keyed listen comm (listen_keyed) takes only
 * hellos that prove its session key (wire.h), and one comm. A socket whose
 * connect fails with a transient error (common/retry.h) is tried again
 * after a pause, within the retry count, the connect timeout and the
 * connect's SYN budget (TPX_DIAL_SYNS per socket). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/error.h"
#include "common/hmac.h"
#include "common/log.h"
#include "common/ratelog.h"
#include "common/ports.h"
#include "common/retry.h"
#include "common/util.h"
#include "cuda/gpu.h"
#include "sock/sock.h"
#include "sock/wire.h"

#define STATE_CHECK_KEY 0x7470785f636f6e6eull /* mixes the state token in the handle */
#define ACCEPTS_PER_CALL 64
#define MAX_PENDING 4096

/* ---- helpers -------------------------------------------------------------------- */

static int set_nodelay(int fd) {
  int one = 1;
  return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static uint64_t deadline_after_ms(int ms) {
  return tpx__now_ns() + (uint64_t)ms * 1000000ull;
}

static void encode_hello(uint8_t *h, uint64_t nonce, uint64_t comm_id, int index, int nsocks, int keyed, int enc) {
  memset(h, 0, keyed ? TPX_WIRE_HELLO_KEYED_BYTES : TPX_WIRE_HELLO_BYTES);
  tpx__put32(h, TPX_WIRE_HELLO_MAGIC);
  tpx__put16(h + 4, TPX_WIRE_VERSION);
  tpx__put16(h + 6, keyed ? TPX_WIRE_HELLO_KEYED_BYTES : TPX_WIRE_HELLO_BYTES);
  tpx__put64(h + 8, nonce);
  tpx__put64(h + 16, comm_id);
  tpx__put16(h + 24, (uint16_t)index);
  tpx__put16(h + 26, (uint16_t)nsocks);
  tpx__put32(h + 28, (keyed ? TPX_WIRE_HELLO_F_MAC : 0) | (enc ? TPX_WIRE_HELLO_F_ENC : 0));
}

int tpx__sock_hello_mac(const uint8_t *key, const uint8_t *hello, uint8_t *mac) {
  static const char label[] = "tpx sock hello";
  struct tpx_mac_part parts[] = {{label, sizeof(label)}, {hello, TPX_WIRE_HELLO_MACED}};
  return tpx__hmac(key, TPX_NET_KEY_BYTES, parts, 2, mac);
}

/* A keyed hello's fresh nonce and its MAC. */
static int seal_hello(uint8_t *h, const uint8_t *key) {
  int rc = tpx__random_bytes(h + TPX_WIRE_HELLO_BYTES, TPX_WIRE_HELLO_NONCE_BYTES);
  if (rc == 0) rc = tpx__sock_hello_mac(key, h, h + TPX_WIRE_HELLO_MACED);
  return rc;
}

/* ---- listen ------------------------------------------------------------------------ */

struct pending_sock {
  int fd;
  uint64_t deadline;
  size_t got;
  uint8_t hello[TPX_WIRE_HELLO_KEYED_BYTES];
  char peer[64];
};

struct group {
  uint64_t comm_id;
  int nsocks;
  int have;
  uint64_t deadline;
  int fds[TPX_SOCK_MAX_NSOCKS + 1];
  char peer[64];
  uint8_t (*keys)[TPX_AEAD_KEY_BYTES]; /* TPX_ENCRYPT: each socket's record key (from its hello) */
};

typedef struct tpx__sock_listen {
  uint64_t token;
  int dev;
  int fd;
  uint64_t nonce;
  char addr[64];
  struct pending_sock *pend;
  int npend, cap_pend;
  struct group *groups;
  int ngroups, cap_groups;
  int gpu_bound; /* unpack mode: the CUDA device current at listen (-1: none) */
  int keyed;     /* listen_keyed: hellos must prove key */
  int enc;       /* TPX_ENCRYPT: hellos must ask for sealed records */
  int taken;     /* keyed: its one comm was accepted; later hellos are refused */
  uint8_t key[TPX_NET_KEY_BYTES];
  struct tpx_ratelog dropped; /* connections refused or timed out: logged rate-limited */
  tpx_sock_ready_t *rd;       /* the net's setup readiness (ready.c) */
  _Atomic int ready;          /* a socket of it was readable at the last refresh (or it is new) */
} tpx_sock_listen_t;

static void mark_ready(void *listen) { atomic_store(&((tpx_sock_listen_t *)listen)->ready, 1); }

static void dropped_summary(const tpx_sock_listen_t *l, uint64_t n, const char *when) {
  if (n) TPX_WARN("sock: listen comm %s: %llu more connections dropped %s (rate-limited)", l->addr,
                  (unsigned long long)n, when);
}

/* A connection to l is refused or dropped: 1 to log it in full, else it is
 * counted (common/ratelog.h). */
static int drop_log_ok(tpx_sock_listen_t *l) {
  uint64_t n = 0;
  int v = tpx__ratelog(&l->dropped, tpx__now_ns(), &n);
  if (v == TPX_RATELOG_SUMMARY) dropped_summary(l, n, "since the last summary");
  return v == TPX_RATELOG_FULL;
}

static void group_keys_free(struct group *g) {
  if (g->keys) tpx__cleanse(g->keys, (size_t)(TPX_SOCK_MAX_NSOCKS + 1) * TPX_AEAD_KEY_BYTES);
  free(g->keys);
  g->keys = NULL;
}

static void group_close(struct group *g) {
  for (int i = 0; i <= g->nsocks; i++)
    if (g->fds[i] >= 0) close(g->fds[i]);
  group_keys_free(g);
}

void tpx__sock_listen_free(void *obj) {
  tpx_sock_listen_t *l = obj;
  dropped_summary(l, tpx__ratelog_flush(&l->dropped), "before it closed");
  if (l->fd >= 0) close(l->fd);
  for (int i = 0; i < l->npend; i++)
    close(l->pend[i].fd);
  for (int i = 0; i < l->ngroups; i++)
    group_close(&l->groups[i]);
  free(l->pend);
  free(l->groups);
  tpx__cleanse(l->key, sizeof(l->key));
  free(l);
}

static void fill_handle(uint8_t *h, const struct sockaddr_storage *sa, int nsocks, uint64_t nonce, int keyed,
                        int enc) {
  memset(h, 0, TPX_NET_HANDLE_BYTES);
  tpx__put32(h + TPX_WH_MAGIC, TPX_WIRE_HANDLE_MAGIC);
  tpx__put16(h + TPX_WH_VERSION, TPX_WIRE_VERSION);
  if (sa->ss_family == AF_INET6) {
    const struct sockaddr_in6 *s6 = (const struct sockaddr_in6 *)sa;
    tpx__put16(h + TPX_WH_FAMILY, 6);
    memcpy(h + TPX_WH_ADDR, &s6->sin6_addr, 16);
    memcpy(h + TPX_WH_PORT, &s6->sin6_port, 2);
    tpx__put32(h + TPX_WH_SCOPE, s6->sin6_scope_id);
  } else {
    const struct sockaddr_in *s4 = (const struct sockaddr_in *)sa;
    tpx__put16(h + TPX_WH_FAMILY, 4);
    memcpy(h + TPX_WH_ADDR, &s4->sin_addr, 4);
    memcpy(h + TPX_WH_PORT, &s4->sin_port, 2);
  }
  tpx__put16(h + TPX_WH_NSOCKS, (uint16_t)nsocks);
  tpx__put64(h + TPX_WH_NONCE, nonce);
  tpx__put32(h + TPX_WH_FLAGS, (keyed ? TPX_WIRE_HANDLE_F_KEYED : 0) | (enc ? TPX_WIRE_HANDLE_F_ENC : 0));
}

static int listen_open(tpx_net_t *net, int dev, const uint8_t *key, void *handle, void **listen_comm) {
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "listen");
  if (sn == NULL) return TPX_EINVAL;
  if (handle == NULL || listen_comm == NULL)
    return tpx_err_quiet(TPX_EINVAL, "listen: %s is NULL", handle == NULL ? "handle" : "listen_comm");
  *listen_comm = NULL;
  if (dev < 0 || dev >= sn->ndev)
    return tpx_err_quiet(TPX_EINVAL, "listen: device %d does not exist (%d devices)", dev, sn->ndev);
  tpx_sock_dev_t *d = &sn->devs[dev];
  struct sockaddr_storage sa = d->addr;
  int fd = socket(sa.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return tpx_err_quiet(TPX_ESYSTEM, "listen on %s: socket: %s", d->name, strerror(errno));
  char as[64];
  tpx__sock_addr_str(&sa, as, sizeof(as));
  socklen_t len = tpx__sock_addr_len(&sa);
  int e = tpx__bind_port(fd, (struct sockaddr *)&sa, len, 0);
  if (e != 0 || listen(fd, 16384) != 0 || getsockname(fd, (struct sockaddr *)&sa, &len) != 0) {
    if (e == 0) e = errno;
    close(fd);
    return tpx_err_quiet(TPX_ESYSTEM, "listen on %s (%s): %s", d->name, as, strerror(e));
  }
  tpx_sock_listen_t *l = calloc(1, sizeof(*l));
  if (l == NULL) {
    close(fd);
    return tpx_err_quiet(TPX_ENOMEM, "listen: out of memory");
  }
  l->dev = dev;
  l->fd = fd;
  l->nonce = tpx__sock_random(sn);
  l->enc = sn->encrypt;
  if (key == NULL && sn->encrypt) key = sn->plugin_key; /* NCCL's listen: the key of TPX_AUTH_KEY */
  if (key) { /* the nonce keyed hellos quote: unpredictable as well as unique */
    l->keyed = 1;
    memcpy(l->key, key, TPX_NET_KEY_BYTES);
    if (tpx__random_bytes(&l->nonce, sizeof(l->nonce)) != 0) {
      tpx__sock_listen_free(l);
      return TPX_EINTERNAL; /* detail recorded below */
    }
  }
  /* As the plugin's listen (tcpxNewListenComm: flow steering follows it). */
  l->gpu_bound = sn->unpack && sn->gpu_ok ? tpx__gpu_current_device() : TPX_GPU_NONE;
  tpx__sock_addr_str(&sa, l->addr, sizeof(l->addr));
  l->rd = &sn->ready;
  atomic_store(&l->ready, 1);
  l->token = tpx__sock_reg_add(&sn->reg, TPX_SK_LISTEN, l);
  if (l->token == 0) {
    tpx__sock_listen_free(l);
    return tpx_err_quiet(TPX_ENOMEM, "listen: more than %d open handles", TPX_SOCK_MAX_OBJECTS);
  }
  if (tpx__sock_ready_watch(&sn->ready, fd, l->token) != 0) {
    int rc = tpx_err_quiet(TPX_ESYSTEM, "listen on %s: %s", l->addr, tpx_last_error());
    tpx__sock_reg_del(&sn->reg, l->token);
    tpx__sock_listen_free(l);
    return rc;
  }
  fill_handle(handle, &sa, sn->cfg.nsocks, l->nonce, l->keyed, l->enc);
  TPX_DEBUG("sock: listening on %s (%s), %d data sockets per comm%s%s", l->addr, d->name,
            sn->cfg.nsocks, l->keyed ? ", keyed" : "", l->enc ? ", encrypted" : "");
  *listen_comm = (void *)(uintptr_t)l->token;
  return 0;
}

int tpx__sock_listen(tpx_net_t *net, int dev, void *handle, void **listen_comm) {
  return listen_open(net, dev, NULL, handle, listen_comm);
}

int tpx__sock_listen_keyed(tpx_net_t *net, int dev, const uint8_t *key, void *handle, void **listen_comm) {
  if (key == NULL) return tpx_err_quiet(TPX_EINVAL, "listen_keyed: key is NULL");
  return listen_open(net, dev, key, handle, listen_comm);
}

static tpx_sock_listen_t *listen_get(tpx_sock_net_t *sn, void *comm, const char *fn, int *rc) {
  int kind = TPX_SK_NONE;
  tpx_sock_listen_t *l =
      tpx__sock_reg_get(&sn->reg, (uint64_t)(uintptr_t)comm, TPX_SK_LISTEN, &kind);
  if (l == NULL)
    *rc = tpx_err_quiet(TPX_EINVAL, "%s: %p is not an open listen comm%s", fn, comm,
                  kind != TPX_SK_NONE ? " (wrong kind of handle)" : "");
  return l;
}

int tpx__sock_close_listen(tpx_net_t *net, void *listen_comm) {
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "closeListen");
  if (sn == NULL) return TPX_EINVAL;
  int rc = 0;
  tpx_sock_listen_t *l = listen_get(sn, listen_comm, "closeListen", &rc);
  if (l == NULL) return rc;
  if (l->npend + l->ngroups > 0)
    TPX_DEBUG("sock: closing listen comm %s with %d unidentified and %d incomplete connections",
              l->addr, l->npend, l->ngroups);
  pthread_mutex_lock(&sn->ready.mu); /* a refresh in another thread may be marking it */
  tpx__sock_reg_del(&sn->reg, l->token);
  tpx__sock_listen_free(l);
  pthread_mutex_unlock(&sn->ready.mu);
  return 0;
}

/* ---- connect ---------------------------------------------------------------------- */

enum { CS_CONNECTING = 0, CS_HELLO, CS_DONE, CS_RETRY /* waiting for retry.next_ns */ };

typedef struct tpx__sock_connect {
  uint64_t token;
  int dev;
  int nsocks;
  uint64_t nonce, comm_id, deadline;
  struct sockaddr_storage peer;
  char peerstr[64];
  int fds[TPX_SOCK_MAX_NSOCKS + 1];
  uint8_t st[TPX_SOCK_MAX_NSOCKS + 1];
  uint8_t off[TPX_SOCK_MAX_NSOCKS + 1];
  struct tpx_retry retry; /* failed attempts of any of its sockets (common/retry.h) */
  int syns;      /* SYNs sent, and reserved for attempts in progress or due */
  int syn_budget; /* TPX_DIAL_SYNS per socket */
  uint8_t rsv[TPX_SOCK_MAX_NSOCKS + 1];  /* SYNs reserved for socket i's attempt (1 or ATTEMPT_SYNS) */
  uint64_t cut[TPX_SOCK_MAX_NSOCKS + 1]; /* socket i's attempt ends here unless connected */
  int has_key;   /* connect_keyed: retries must give the same key */
  uint8_t key[TPX_NET_KEY_BYTES];
  int hello_len; /* TPX_WIRE_HELLO_KEYED_BYTES when the handle asked for a MAC */
  uint8_t hello[TPX_SOCK_MAX_NSOCKS + 1][TPX_WIRE_HELLO_KEYED_BYTES];
} tpx_sock_connect_t;

void tpx__sock_connect_free(void *obj) {
  tpx_sock_connect_t *s = obj;
  for (int i = 0; i <= s->nsocks; i++)
    if (s->fds[i] >= 0) close(s->fds[i]);
  tpx__cleanse(s->key, sizeof(s->key));
  free(s);
}

static void connect_end(tpx_sock_net_t *sn, tpx_sock_connect_t *s, uint8_t *h) {
  tpx__sock_reg_del(&sn->reg, s->token);
  tpx__sock_connect_free(s);
  tpx__put64(h + TPX_WH_STATE, 0);
  tpx__put64(h + TPX_WH_CHECK, 0);
}

/* The listener's address in a handle (family already checked: 4 or 6). */
static void handle_addr(const uint8_t *h, struct sockaddr_storage *out) {
  memset(out, 0, sizeof(*out));
  if (tpx__get16(h + TPX_WH_FAMILY) == 6) {
    struct sockaddr_in6 *s6 = (struct sockaddr_in6 *)out;
    s6->sin6_family = AF_INET6;
    memcpy(&s6->sin6_addr, h + TPX_WH_ADDR, 16);
    memcpy(&s6->sin6_port, h + TPX_WH_PORT, 2);
    s6->sin6_scope_id = tpx__get32(h + TPX_WH_SCOPE);
  } else {
    struct sockaddr_in *s4 = (struct sockaddr_in *)out;
    s4->sin_family = AF_INET;
    memcpy(&s4->sin_addr, h + TPX_WH_ADDR, 4);
    memcpy(&s4->sin_port, h + TPX_WH_PORT, 2);
  }
}

/* A handle as it comes from a peer, before any connect: made by a listen of
 * this transport and version, with no connector state (a peer naming a
 * state token could otherwise steer us into another connect in progress). */
int tpx__sock_handle_dials(tpx_net_t *net, const void *handle, struct sockaddr_storage *addr, int *conns) {
  (void)net;
  const uint8_t *h = handle;
  if (tpx__get32(h + TPX_WH_MAGIC) != TPX_WIRE_HANDLE_MAGIC || tpx__get16(h + TPX_WH_VERSION) != TPX_WIRE_VERSION)
    return tpx_err_quiet(TPX_EPROTO, "not a listen handle of this transport (magic 0x%08x, version %u)",
                         tpx__get32(h + TPX_WH_MAGIC), tpx__get16(h + TPX_WH_VERSION));
  int fam = tpx__get16(h + TPX_WH_FAMILY), nsocks = tpx__get16(h + TPX_WH_NSOCKS);
  if (fam != 4 && fam != 6) return tpx_err_quiet(TPX_EPROTO, "handle has address family %d", fam);
  if (nsocks < 1 || nsocks > TPX_SOCK_MAX_NSOCKS)
    return tpx_err_quiet(TPX_EPROTO, "handle asks for %d data sockets (1..%d)", nsocks, TPX_SOCK_MAX_NSOCKS);
  if (tpx__get64(h + TPX_WH_STATE) != 0 || tpx__get64(h + TPX_WH_CHECK) != 0)
    return tpx_err_quiet(TPX_EPROTO, "handle carries connector state (only a local connect writes it)");
  handle_addr(h, addr);
  *conns = nsocks + 1;
  return 0;
}

/* Every socket's hello, made once: keyed ones carry a fresh nonce each and
 * the MAC over it (wire.h). */
static int build_hellos(tpx_sock_connect_t *s, int keyed, int enc) {
  s->hello_len = keyed ? TPX_WIRE_HELLO_KEYED_BYTES : TPX_WIRE_HELLO_BYTES;
  for (int i = 0; i <= s->nsocks; i++) {
    encode_hello(s->hello[i], s->nonce, s->comm_id, i, s->nsocks, keyed, enc);
    if (keyed && seal_hello(s->hello[i], s->key) != 0) return TPX_EINTERNAL; /* detail recorded below */
  }
  return 0;
}

/* The SYN budget (TPX_DIAL_SYNS): each attempt sets TCP_SYNCNT 1, so it
 * sends at most ATTEMPT_SYNS SYNs (its first and one retransmission). An
 * attempt reserves that much when it is decided; when it ends, what it
 * really sent (TCP_INFO's retransmissions) is kept. A HELLO naming a port
 * that refuses, or a host that drops SYNs, cannot make us send more than
 * TPX_DIAL_SYNS per socket it names (docs/SECURITY.md). */
#define ATTEMPT_SYNS 2
/* An attempt ends before the kernel could send more SYNs than it reserved.
 * SYNs go at 0 and 1 s (initial RTO 1 s), then at 2 s (Linux >= 6.5 spaces
 * the first retransmissions linearly) or 3 s; TCP_SYNCNT alone is checked
 * against elapsed time and lets a third go. TCP_USER_TIMEOUT makes the
 * kernel abort the attempt in time (reset once connected); the cut below
 * is the fallback where it does not. */
#define ONE_SYN_MS 900
#define TWO_SYNS_MS 1500
#define CUT_SLACK_NS 300000000ull

/* Reserve the SYNs of socket i's next attempt: 1, or 0 when none is left. */
static int syns_reserve(tpx_sock_connect_t *s, int i) {
  int left = s->syn_budget - s->syns;
  if (left < 1) return 0;
  s->rsv[i] = (uint8_t)(left < ATTEMPT_SYNS ? 1 : ATTEMPT_SYNS);
  s->syns += s->rsv[i];
  return 1;
}

/* Socket i's attempt (fd still open) ended, connected or not: what it
 * really sent replaces its reservation. */
static void syns_settle(tpx_sock_connect_t *s, int i) {
  struct tcp_info ti;
  socklen_t tl = sizeof(ti);
  memset(&ti, 0, sizeof(ti));
  if (s->rsv[i] == 0 || getsockopt(s->fds[i], IPPROTO_TCP, TCP_INFO, &ti, &tl) != 0) return; /* kept */
  int sent = 1 + (ti.tcpi_total_retrans > 0 || ti.tcpi_retransmits > 0);
  s->syns += sent - s->rsv[i];
  s->rsv[i] = 0;
}

/* Socket i's attempt connected: its SYNs counted, the connection's own
 * timeouts back to the system's. */
static int sock_connected(tpx_sock_connect_t *s, int i) {
  unsigned zero = 0;
  syns_settle(s, i);
  if (setsockopt(s->fds[i], IPPROTO_TCP, TCP_USER_TIMEOUT, &zero, sizeof(zero)) != 0)
    return tpx_err_quiet(TPX_ESYSTEM, "connect to %s: TCP_USER_TIMEOUT: %s", s->peerstr, strerror(errno));
  s->st[i] = CS_HELLO;
  return 0;
}

/* Socket i's next attempt: a fresh non-blocking socket and its connect.
 * 0 = connecting (or connected); > 0 = connect failed at once with that
 * errno (the caller decides on a retry); < 0 = a local failure. */
static int sock_open(tpx_sock_connect_t *s, int i) {
  int fd = socket(s->peer.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) return tpx_err_quiet(TPX_ESYSTEM, "connect to %s: socket: %s", s->peerstr, strerror(errno));
  s->fds[i] = fd;
  s->off[i] = 0;
  tpx__set_reuseaddr(fd); /* its TIME_WAIT must not hold the port (common/ports.c) */
  if (set_nodelay(fd) != 0)
    return tpx_err_quiet(TPX_ESYSTEM, "connect to %s: TCP_NODELAY: %s", s->peerstr, strerror(errno));
  int syncnt = ATTEMPT_SYNS - 1;
  unsigned ut = s->rsv[i] == 1 ? ONE_SYN_MS : TWO_SYNS_MS;
  if (setsockopt(fd, IPPROTO_TCP, TCP_SYNCNT, &syncnt, sizeof(syncnt)) != 0 ||
      setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &ut, sizeof(ut)) != 0)
    return tpx_err_quiet(TPX_ESYSTEM, "connect to %s: TCP_SYNCNT/TCP_USER_TIMEOUT: %s", s->peerstr, strerror(errno));
  s->cut[i] = tpx__now_ns() + (uint64_t)ut * 1000000ull + CUT_SLACK_NS;
  if (connect(fd, (struct sockaddr *)&s->peer, tpx__sock_addr_len(&s->peer)) == 0) {
    int rc = sock_connected(s, i);
    if (rc) return rc;
  } else if (errno == EINPROGRESS || errno == EINTR) {
    s->st[i] = CS_CONNECTING;
  } else { /* refused before any SYN left (no route, a link down): nothing spent */
    int e = errno;
    s->syns -= s->rsv[i];
    s->rsv[i] = 0;
    return e;
  }
  return 0;
}

/* Socket i's attempt failed with errno e: a transient error (a link just
 * back up, a listener not there yet) is retried after a pause, within the
 * retry count and the connect timeout; anything else fails the connect. */
static int sock_failed(tpx_sock_net_t *sn, tpx_sock_connect_t *s, int i, int e) {
  syns_settle(s, i);
  close(s->fds[i]);
  s->fds[i] = -1;
  uint64_t now = tpx__now_ns();
  int joined = 0; /* sockets failing together wait for one retry round */
  for (int j = 0; j <= s->nsocks; j++)
    joined |= j != i && s->st[j] == CS_RETRY && s->retry.next_ns > now;
  int again = joined && tpx__retry_transient(e);
  if (!again) again = tpx__retry_failed(&s->retry, e, sn->cfg.socket_retry_cnt, sn->cfg.socket_retry_sleep_msec, now);
  if (again && !syns_reserve(s, i)) {
    if (joined) tpx__retry_note(&s->retry, e);
    char causes[256];
    tpx__retry_causes(&s->retry, causes, sizeof(causes));
    return tpx_err_quiet(TPX_EREMOTE, "connect to %s (socket %d of %d): %s; not retried: the SYN budget of its %d "
                         "sockets is spent (%d, TPX_DIAL_SYNS=%d per socket); failed attempts: %s", s->peerstr, i,
                         s->nsocks + 1, strerror(e), s->nsocks + 1, s->syn_budget, sn->cfg.dial_syns, causes);
  }
  if (again && joined) {
    s->st[i] = CS_RETRY;
    return 0;
  }
  if (again) {
    s->st[i] = CS_RETRY;
    if (s->retry.next_ns >= s->deadline) s->retry.next_ns = UINT64_MAX; /* it fails at the deadline, not before */
    if (s->retry.next_ns == UINT64_MAX)
      TPX_DEBUG("sock: connect to %s (socket %d of %d): %s; no time for retry %d before the connect timeout",
                s->peerstr, i, s->nsocks + 1, strerror(e), s->retry.failed);
    else
      TPX_DEBUG("sock: connect to %s (socket %d of %d): %s; retry %d in %llu ms", s->peerstr, i, s->nsocks + 1,
                strerror(e), s->retry.failed, (unsigned long long)((s->retry.next_ns - now) / 1000000ull));
    return 0;
  }
  char causes[256];
  tpx__retry_causes(&s->retry, causes, sizeof(causes));
  int code = tpx__retry_transient(e) ? TPX_EREMOTE : TPX_ESYSTEM;
  if (s->retry.failed == 1)
    return tpx_err_quiet(code, "connect to %s (socket %d of %d): %s", s->peerstr, i, s->nsocks + 1, strerror(e));
  return tpx_err_quiet(code, "connect to %s (socket %d of %d): %s after %d attempts (TPX_SOCKET_RETRY_CNT=%d): %s",
                 s->peerstr, i, s->nsocks + 1, strerror(e), s->retry.failed, sn->cfg.socket_retry_cnt, causes);
}

/* Sockets waiting for their retry whose pause is over: their next attempt. */
static int sock_retry_due(tpx_sock_net_t *sn, tpx_sock_connect_t *s) {
  if (tpx__now_ns() < s->retry.next_ns) return 0;
  for (int i = 0; i <= s->nsocks; i++) {
    if (s->st[i] != CS_RETRY) continue;
    int e = sock_open(s, i);
    if (e < 0) return e;
    if (e > 0 && (e = sock_failed(sn, s, i, e)) != 0) return e;
  }
  return 0;
}

static int connect_start(tpx_sock_net_t *sn, int dev, uint8_t *h, const uint8_t *key, tpx_sock_connect_t **out) {
  int fam = tpx__get16(h + TPX_WH_FAMILY);
  int nsocks = tpx__get16(h + TPX_WH_NSOCKS);
  int keyed = (tpx__get32(h + TPX_WH_FLAGS) & TPX_WIRE_HANDLE_F_KEYED) != 0;
  if (fam != 4 && fam != 6)
    return tpx_err_quiet(TPX_EINVAL, "connect: handle has address family %d (not 4 or 6)", fam);
  if (nsocks < 1 || nsocks > TPX_SOCK_MAX_NSOCKS)
    return tpx_err_quiet(TPX_EINVAL, "connect: handle asks for %d data sockets (1..%d)", nsocks,
                   TPX_SOCK_MAX_NSOCKS);
  /* Both ends encrypt or neither: never plaintext to a peer that asked for
   * records, nor to one that would read ours as garbage. */
  int enc = (tpx__get32(h + TPX_WH_FLAGS) & TPX_WIRE_HANDLE_F_ENC) != 0;
  if (enc != sn->encrypt)
    return tpx_err_quiet(TPX_EAUTH, "connect: %s", enc ? "the listener encrypts its data sockets (TPX_ENCRYPT=1 there) "
                                                         "and this side does not: set TPX_ENCRYPT=1 and the same key here"
                                                       : "this side encrypts (TPX_ENCRYPT=1) and the listener does not "
                                                         "(TPX_ENCRYPT=0 there): refusing to send plaintext");
  if (enc && !keyed)
    return tpx_err_quiet(TPX_EPROTO, "connect: the handle asks for encryption without a key (not made by our listen)");
  if (keyed && key == NULL)
    return tpx_err_quiet(TPX_EAUTH, "connect: the listener takes only authenticated data sockets (its endpoint has "
                              "an authentication key, TPX_AUTH_KEY); this connect has no session key");
  tpx_sock_connect_t *s = calloc(1, sizeof(*s));
  if (s == NULL) return tpx_err_quiet(TPX_ENOMEM, "connect: out of memory");
  s->dev = dev;
  s->nsocks = nsocks;
  s->nonce = tpx__get64(h + TPX_WH_NONCE);
  s->comm_id = tpx__sock_random(sn);
  s->deadline = deadline_after_ms(sn->cfg.connect_timeout_ms);
  for (int i = 0; i <= nsocks; i++)
    s->fds[i] = -1;
  handle_addr(h, &s->peer);
  tpx__sock_addr_str(&s->peer, s->peerstr, sizeof(s->peerstr));
  s->has_key = key != NULL;
  if (key) memcpy(s->key, key, TPX_NET_KEY_BYTES);
  s->syn_budget = sn->cfg.dial_syns * (nsocks + 1);
  int rc = build_hellos(s, keyed, enc);
  for (int i = 0; i <= nsocks && rc == 0; i++) {
    if (!syns_reserve(s, i)) rc = tpx_err_quiet(TPX_EINVAL, "connect: TPX_DIAL_SYNS=%d", sn->cfg.dial_syns);
    if (rc == 0) rc = sock_open(s, i);
    if (rc > 0) rc = sock_failed(sn, s, i, rc);
  }
  if (rc == 0) {
    s->token = tpx__sock_reg_add(&sn->reg, TPX_SK_CONNECT, s);
    if (s->token == 0)
      rc = tpx_err_quiet(TPX_ENOMEM, "connect: more than %d open handles", TPX_SOCK_MAX_OBJECTS);
  }
  if (rc != 0) {
    tpx__sock_connect_free(s);
    return rc;
  }
  tpx__put64(h + TPX_WH_STATE, s->token);
  tpx__put64(h + TPX_WH_CHECK, s->token ^ s->nonce ^ STATE_CHECK_KEY);
  *out = s;
  return 0;
}

/* One non-blocking pass. 1 = all sockets connected and hellos sent, 0 = not
 * yet, < 0 = failed. */
static int connect_step(tpx_sock_net_t *sn, tpx_sock_connect_t *s) {
  struct pollfd pfd[TPX_SOCK_MAX_NSOCKS + 1];
  int idx[TPX_SOCK_MAX_NSOCKS + 1], np = 0;
  int rc = sock_retry_due(sn, s);
  if (rc) return rc;
  for (int i = 0; i <= s->nsocks; i++) {
    if (s->st[i] != CS_CONNECTING) continue;
    pfd[np].fd = s->fds[i];
    pfd[np].events = POLLOUT;
    pfd[np].revents = 0;
    idx[np++] = i;
  }
  if (np > 0) {
    int n = poll(pfd, (nfds_t)np, 0);
    if (n < 0 && errno != EINTR)
      return tpx_err_quiet(TPX_ESYSTEM, "connect to %s: poll: %s", s->peerstr, strerror(errno));
    for (int k = 0; k < np && n > 0; k++) {
      if (pfd[k].revents == 0) continue;
      int i = idx[k], err = 0;
      socklen_t el = sizeof(err);
      if (getsockopt(s->fds[i], SOL_SOCKET, SO_ERROR, &err, &el) != 0) err = errno;
      if (err != 0) {
        if ((rc = sock_failed(sn, s, i, err)) != 0) return rc;
        continue;
      }
      if ((rc = sock_connected(s, i)) != 0) return rc;
    }
    uint64_t now = tpx__now_ns();
    for (int k = 0; k < np; k++) /* attempts not connected before a SYN past their reservation would go */
      if (s->st[idx[k]] == CS_CONNECTING && now >= s->cut[idx[k]] &&
          (rc = sock_failed(sn, s, idx[k], ETIMEDOUT)) != 0)
        return rc;
  }
  int done = 0;
  for (int i = 0; i <= s->nsocks; i++) {
    if (s->st[i] == CS_HELLO) {
      ssize_t n = send(s->fds[i], s->hello[i] + s->off[i], (size_t)(s->hello_len - s->off[i]),
                       MSG_NOSIGNAL | MSG_DONTWAIT);
      if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)
        return tpx_err_quiet(TPX_EREMOTE, "connect to %s (socket %d of %d): sending hello: %s",
                       s->peerstr, i, s->nsocks + 1, strerror(errno));
      if (n > 0) s->off[i] = (uint8_t)(s->off[i] + n);
      if (s->off[i] == s->hello_len) s->st[i] = CS_DONE;
    }
    if (s->st[i] == CS_DONE) done++;
  }
  if (done == s->nsocks + 1) return 1;
  if (tpx__now_ns() > s->deadline) {
    char causes[256];
    tpx__retry_causes(&s->retry, causes, sizeof(causes));
    return tpx_err_quiet(TPX_ETIMEDOUT, "connect to %s: %d of %d sockets up after the connect timeout (%d ms)%s%s",
                   s->peerstr, done, s->nsocks + 1, sn->cfg.connect_timeout_ms,
                   s->retry.failed ? "; failed attempts: " : "", causes);
  }
  return 0;
}

static int connect_any(tpx_net_t *net, int dev, const uint8_t *key, void *handle, void **send_comm,
                       tpx_net_dev_handle_t *send_dev) {
  (void)send_dev; /* HOST device type: nothing to fill */
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "connect");
  if (sn == NULL) return TPX_EINVAL;
  if (handle == NULL || send_comm == NULL)
    return tpx_err_quiet(TPX_EINVAL, "connect: %s is NULL", handle == NULL ? "handle" : "send_comm");
  *send_comm = NULL;
  if (dev < 0 || dev >= sn->ndev)
    return tpx_err_quiet(TPX_EINVAL, "connect: device %d does not exist (%d devices)", dev, sn->ndev);
  uint8_t *h = handle;
  if (tpx__get32(h + TPX_WH_MAGIC) != TPX_WIRE_HANDLE_MAGIC)
    return tpx_err_quiet(TPX_EINVAL,
                   "connect: the handle was not made by this transport's listen"
                   " (magic 0x%08x)",
                   tpx__get32(h + TPX_WH_MAGIC));
  if (tpx__get16(h + TPX_WH_VERSION) != TPX_WIRE_VERSION)
    return tpx_err_quiet(TPX_EVERSION, "connect: handle version %u, this transport speaks %u",
                   tpx__get16(h + TPX_WH_VERSION), TPX_WIRE_VERSION);
  uint64_t tok = tpx__get64(h + TPX_WH_STATE);
  tpx_sock_connect_t *s = NULL;
  int rc;
  if (key == NULL && sn->encrypt) key = sn->plugin_key; /* NCCL's connect: the key of TPX_AUTH_KEY */
  if (tok == 0) {
    if ((rc = connect_start(sn, dev, h, key, &s)) != 0) return rc;
  } else {
    s = tpx__sock_reg_get(&sn->reg, tok, TPX_SK_CONNECT, NULL);
    if (s == NULL || tpx__get64(h + TPX_WH_CHECK) != (tok ^ s->nonce ^ STATE_CHECK_KEY) ||
        s->nonce != tpx__get64(h + TPX_WH_NONCE))
      return tpx_err_quiet(TPX_EINVAL,
                     "connect: the handle carries connect state %#llx that this"
                     " process does not know (a handle must go back to connect unchanged)",
                     (unsigned long long)tok);
    if (s->dev != dev)
      return tpx_err_quiet(TPX_EINVAL, "connect: retried on device %d, started on device %d", dev,
                     s->dev);
    if (s->has_key != (key != NULL) || (key && !tpx__mac_equal(key, s->key, TPX_NET_KEY_BYTES)))
      return tpx_err_quiet(TPX_EINVAL, "connect: retried with another session key than it started with");
  }
  rc = connect_step(sn, s);
  if (rc == 0) return 0;
  if (rc < 0) {
    connect_end(sn, s, h);
    return rc;
  }
  /* All sockets up: the fds move into the comm. */
  int fds[TPX_SOCK_MAX_NSOCKS + 1];
  for (int i = 0; i <= s->nsocks; i++) {
    fds[i] = s->fds[i];
    s->fds[i] = -1;
  }
  char peer[64];
  snprintf(peer, sizeof(peer), "%s", s->peerstr);
  int nsocks = s->nsocks;
  uint64_t comm_id = s->comm_id;
  uint8_t keys[TPX_SOCK_MAX_NSOCKS + 1][TPX_AEAD_KEY_BYTES];
  int enc = (tpx__get32(s->hello[0] + 28) & TPX_WIRE_HELLO_F_ENC) != 0;
  for (int i = 0; enc && i <= nsocks && rc > 0; i++)
    if (tpx__sock_seal_key(s->key, s->hello[i], keys[i]) != 0) rc = TPX_EINTERNAL;
  connect_end(sn, s, h);
  if (rc <= 0) {
    for (int i = 0; i <= nsocks; i++)
      close(fds[i]);
    return rc;
  }
  rc = tpx__sock_comm_create(sn, TPX_SK_SEND, dev, nsocks, comm_id, fds, peer, enc ? keys : NULL, send_comm);
  tpx__cleanse(keys, sizeof(keys));
  return rc;
}

int tpx__sock_connect_abort(tpx_net_t *net, void *handle) {
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "connect_abort");
  if (sn == NULL) return TPX_EINVAL;
  if (handle == NULL) return tpx_err_quiet(TPX_EINVAL, "connect_abort: handle is NULL");
  uint8_t *h = handle;
  uint64_t tok = tpx__get64(h + TPX_WH_STATE);
  if (tpx__get32(h + TPX_WH_MAGIC) != TPX_WIRE_HANDLE_MAGIC || tok == 0) return 0;
  tpx_sock_connect_t *s = tpx__sock_reg_get(&sn->reg, tok, TPX_SK_CONNECT, NULL);
  if (s == NULL || tpx__get64(h + TPX_WH_CHECK) != (tok ^ s->nonce ^ STATE_CHECK_KEY))
    return tpx_err_quiet(TPX_EINVAL, "connect_abort: the handle carries connect state %#llx that this process does not "
                   "know", (unsigned long long)tok);
  TPX_DEBUG("sock: connect to %s abandoned; its %d sockets closed", s->peerstr, s->nsocks + 1);
  if (s->retry.failed) { /* what it had been through, for the caller's report (net.h) */
    char causes[256];
    tpx__retry_causes(&s->retry, causes, sizeof(causes));
    (void)tpx_err_quiet(TPX_ETIMEDOUT, "connect to %s: failed attempts: %s", s->peerstr, causes);
  }
  connect_end(sn, s, h);
  return 0;
}

int tpx__sock_connect(tpx_net_t *net, int dev, void *handle, void **send_comm, tpx_net_dev_handle_t *send_dev) {
  return connect_any(net, dev, NULL, handle, send_comm, send_dev);
}

int tpx__sock_connect_keyed(tpx_net_t *net, int dev, const uint8_t *key, void *handle, void **send_comm,
                            tpx_net_dev_handle_t *send_dev) {
  if (key == NULL) return tpx_err_quiet(TPX_EINVAL, "connect_keyed: key is NULL");
  return connect_any(net, dev, key, handle, send_comm, send_dev);
}

/* ---- accept ----------------------------------------------------------------------- */

/* A connection leaves the pending list: closed, or filed in its group (it
 * is then not watched any more: it is read again only as part of a comm). */
static void pend_drop(tpx_sock_listen_t *l, int i, int close_fd) {
  if (close_fd) close(l->pend[i].fd);
  else tpx__sock_ready_unwatch(l->rd, l->pend[i].fd);
  l->pend[i] = l->pend[--l->npend];
}

static void accept_new(tpx_sock_net_t *sn, tpx_sock_listen_t *l) {
  atomic_store(&l->ready, 1); /* unless the queue is found empty below: more may wait */
  for (int k = 0; k < ACCEPTS_PER_CALL; k++) {
    struct sockaddr_storage sa;
    socklen_t sl = sizeof(sa);
    int fd = accept4(l->fd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      if (errno != EAGAIN && errno != EWOULDBLOCK)
        TPX_WARN("sock: accept on %s: %s", l->addr, strerror(errno));
      else
        atomic_store(&l->ready, 0); /* until a refresh sees the listen socket readable */
      return;
    }
    char ps[64];
    tpx__sock_addr_str(&sa, ps, sizeof(ps));
    if (l->npend >= MAX_PENDING) {
      if (drop_log_ok(l))
        TPX_WARN("sock: listen comm %s: %d connections without a hello; dropping one from %s",
                 l->addr, l->npend, ps);
      close(fd);
      continue;
    }
    if (l->npend == l->cap_pend) {
      int cap = l->cap_pend ? 2 * l->cap_pend : 16;
      struct pending_sock *p = realloc(l->pend, (size_t)cap * sizeof(*p));
      if (p == NULL) {
        if (drop_log_ok(l))
          TPX_WARN("sock: listen comm %s: out of memory; dropping a connection from %s", l->addr, ps);
        close(fd);
        continue;
      }
      l->pend = p;
      l->cap_pend = cap;
    }
    (void)set_nodelay(fd);
    if (tpx__sock_ready_watch(l->rd, fd, l->token) != 0) {
      if (drop_log_ok(l))
        TPX_WARN("sock: listen comm %s: %s; dropping a connection from %s", l->addr, tpx_last_error(), ps);
      close(fd);
      continue;
    }
    struct pending_sock *p = &l->pend[l->npend++];
    memset(p, 0, sizeof(*p));
    p->fd = fd;
    p->deadline = deadline_after_ms(sn->cfg.connect_timeout_ms);
    snprintf(p->peer, sizeof(p->peer), "%s", ps);
  }
}

static struct group *group_for(tpx_sock_listen_t *l, uint64_t comm_id, int nsocks,
                               uint64_t deadline) {
  for (int i = 0; i < l->ngroups; i++)
    if (l->groups[i].comm_id == comm_id) return &l->groups[i];
  if (l->ngroups == l->cap_groups) {
    int cap = l->cap_groups ? 2 * l->cap_groups : 4;
    struct group *g = realloc(l->groups, (size_t)cap * sizeof(*g));
    if (g == NULL) return NULL;
    l->groups = g;
    l->cap_groups = cap;
  }
  struct group *g = &l->groups[l->ngroups++];
  memset(g, 0, sizeof(*g));
  g->comm_id = comm_id;
  g->nsocks = nsocks;
  g->deadline = deadline;
  for (int i = 0; i <= TPX_SOCK_MAX_NSOCKS; i++)
    g->fds[i] = -1;
  return g;
}

static size_t hello_want(const tpx_sock_listen_t *l) {
  return l->keyed ? TPX_WIRE_HELLO_KEYED_BYTES : TPX_WIRE_HELLO_BYTES;
}

int tpx__sock_hello_head(const uint8_t *h, int keyed) {
  if (tpx__get32(h) != TPX_WIRE_HELLO_MAGIC) return TPX_HELLO_MAGIC;
  if (tpx__get16(h + 4) != TPX_WIRE_VERSION) return TPX_HELLO_VERSION;
  if (tpx__get16(h + 6) != (keyed ? TPX_WIRE_HELLO_KEYED_BYTES : TPX_WIRE_HELLO_BYTES)) return TPX_HELLO_LENGTH;
  return TPX_HELLO_OK;
}

int tpx__sock_hello_check(const uint8_t *h, const uint8_t *key, uint64_t nonce, uint64_t *comm_id, int *index,
                          int *nsocks) {
  int v = tpx__sock_hello_head(h, key != NULL);
  if (v) return v;
  if (key) { /* a keyed hello proves the session key before anything else it says counts */
    uint8_t mac[TPX_MAC_BYTES];
    if (!(tpx__get32(h + 28) & TPX_WIRE_HELLO_F_MAC) || tpx__sock_hello_mac(key, h, mac) != 0 ||
        !tpx__mac_equal(mac, h + TPX_WIRE_HELLO_MACED, TPX_MAC_BYTES))
      return TPX_HELLO_MAC;
  }
  if (tpx__get64(h + 8) != nonce) return TPX_HELLO_NONCE;
  *comm_id = tpx__get64(h + 16);
  *index = tpx__get16(h + 24);
  *nsocks = tpx__get16(h + 26);
  if (*nsocks < 1 || *nsocks > TPX_SOCK_MAX_NSOCKS || *index > *nsocks) return TPX_HELLO_SOCKETS;
  return TPX_HELLO_OK;
}

/* Why a hello was refused, once, where it is decided. */
static void hello_refused(tpx_sock_listen_t *l, const struct pending_sock *p, int v) {
  const uint8_t *h = p->hello;
  unsigned len = tpx__get16(h + 6);
  const char *why = "";
  char buf[80];
  switch (v) {
  case TPX_HELLO_MAGIC:
    snprintf(buf, sizeof(buf), "not a tpx hello (magic 0x%08x)", tpx__get32(h));
    why = buf;
    break;
  case TPX_HELLO_VERSION:
    snprintf(buf, sizeof(buf), "wire version %u (we speak %u)", tpx__get16(h + 4), TPX_WIRE_VERSION);
    why = buf;
    break;
  case TPX_HELLO_LENGTH:
    why = l->keyed ? "a hello without a MAC, and this listen comm takes only authenticated sockets"
          : len == TPX_WIRE_HELLO_KEYED_BYTES ? "a hello with a MAC, and this listen comm has no key"
                                              : "a hello of the wrong length";
    break;
  case TPX_HELLO_MAC: why = "its hello does not prove this session's key (wrong or stale MAC)"; break;
  case TPX_HELLO_TAKEN: why = "this keyed listen comm has accepted its one comm (a replayed hello?)"; break;
  case TPX_HELLO_ENC:
    why = l->enc ? "the peer does not encrypt (TPX_ENCRYPT=0 there) and this side does (TPX_ENCRYPT=1)"
                 : "the peer encrypts (TPX_ENCRYPT=1 there) and this side does not (TPX_ENCRYPT=0)";
    break;
  case TPX_HELLO_NONCE: why = "its handle belongs to another listen comm"; break;
  default:
    snprintf(buf, sizeof(buf), "socket %u of %u data sockets", tpx__get16(h + 24), tpx__get16(h + 26));
    why = buf;
    break;
  }
  if (drop_log_ok(l))
    TPX_WARN("sock: listen comm %s: rejected a connection from %s: %s", l->addr, p->peer, why);
}

/* The hello's first 8 bytes (magic, version, length), as soon as they are
 * there: a hello of the wrong kind for this listen comm (keyed or not) is
 * refused at once, not at the connect timeout. 0 = fine so far. */
static int hello_head(tpx_sock_listen_t *l, const struct pending_sock *p) {
  int v = tpx__sock_hello_head(p->hello, l->keyed);
  if (v) hello_refused(l, p, v);
  return v ? TPX_EPROTO : 0;
}

/* A hello is complete: check it and file the socket. 0 = filed, else the
 * socket must be dropped (reason logged). */
static int hello_file(tpx_sock_listen_t *l, struct pending_sock *p) {
  uint64_t comm_id = 0;
  int index = 0, nsocks = 0;
  int v = tpx__sock_hello_check(p->hello, l->keyed ? l->key : NULL, l->nonce, &comm_id, &index, &nsocks);
  if (v == TPX_HELLO_OK && l->keyed && l->taken) v = TPX_HELLO_TAKEN;
  if (v == TPX_HELLO_OK && ((tpx__get32(p->hello + 28) & TPX_WIRE_HELLO_F_ENC) != 0) != l->enc) v = TPX_HELLO_ENC;
  if (v) {
    hello_refused(l, p, v);
    return TPX_EPROTO;
  }
  struct group *g = group_for(l, comm_id, nsocks, p->deadline);
  if (g == NULL) {
    if (drop_log_ok(l))
      TPX_WARN("sock: listen comm %s: out of memory; dropping a connection from %s", l->addr,
               p->peer);
    return TPX_ENOMEM;
  }
  if (g->nsocks != nsocks || g->fds[index] >= 0) {
    if (drop_log_ok(l))
      TPX_WARN("sock: listen comm %s: rejected a connection from %s: socket %d of comm %016llx is a"
               " duplicate or disagrees on nsocks (%d vs %d)",
               l->addr, p->peer, index, (unsigned long long)comm_id, nsocks, g->nsocks);
    return TPX_EPROTO;
  }
  if (l->enc) { /* the socket's record key, from the hello it proved */
    if (g->keys == NULL) g->keys = calloc(TPX_SOCK_MAX_NSOCKS + 1, TPX_AEAD_KEY_BYTES);
    if (g->keys == NULL || tpx__sock_seal_key(l->key, p->hello, g->keys[index]) != 0) {
      if (drop_log_ok(l))
        TPX_WARN("sock: listen comm %s: no record key for a connection from %s: %s", l->addr, p->peer,
                 g->keys ? tpx_last_error() : "out of memory");
      return TPX_ENOMEM;
    }
  }
  g->fds[index] = p->fd;
  g->have++;
  if (index == 0) snprintf(g->peer, sizeof(g->peer), "%s", p->peer);
  return 0;
}

enum { PEND_WAIT = 0, PEND_GONE };

/* Read what pending connection i has: PEND_GONE when it left the list
 * (filed, refused, or it went away), else PEND_WAIT. */
static int pend_read(tpx_sock_listen_t *l, int i) {
  struct pending_sock *p = &l->pend[i];
  for (;;) { /* the same socket again while bytes come: more may be there */
    ssize_t n = recv(p->fd, p->hello + p->got, hello_want(l) - p->got, MSG_DONTWAIT);
    if (n <= 0) {
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return PEND_WAIT;
      TPX_DEBUG("sock: listen comm %s: connection from %s went away before its hello (%s)", l->addr,
                p->peer, n == 0 ? "closed" : strerror(errno));
      pend_drop(l, i, 1);
      return PEND_GONE;
    }
    p->got += (size_t)n;
    if (p->got >= 8 && hello_head(l, p) != 0) {
      pend_drop(l, i, 1);
      return PEND_GONE;
    }
    if (p->got == hello_want(l)) {
      int filed = hello_file(l, p) == 0;
      pend_drop(l, i, !filed);
      return PEND_GONE;
    }
  }
}

/* io: a socket of l was readable (its pending connections are read); the
 * deadlines are checked either way, with no system call. */
static void read_hellos(tpx_sock_listen_t *l, int io) {
  uint64_t now = tpx__now_ns();
  for (int i = 0; i < l->npend;) {
    if (io && pend_read(l, i) == PEND_GONE) continue;
    struct pending_sock *p = &l->pend[i];
    if (now > p->deadline) {
      if (drop_log_ok(l))
        TPX_WARN("sock: listen comm %s: connection from %s sent %zu of %zu hello bytes before the"
                 " connect timeout; dropped",
                 l->addr, p->peer, p->got, hello_want(l));
      pend_drop(l, i, 1);
      continue;
    }
    i++;
  }
  for (int i = 0; i < l->ngroups;) {
    struct group *g = &l->groups[i];
    if (g->have <= g->nsocks && now > g->deadline) {
      if (drop_log_ok(l))
        TPX_WARN("sock: listen comm %s: comm %016llx from %s has %d of %d sockets after the connect"
                 " timeout; dropped",
                 l->addr, (unsigned long long)g->comm_id, g->peer, g->have, g->nsocks + 1);
      group_close(g);
      l->groups[i] = l->groups[--l->ngroups];
      continue;
    }
    i++;
  }
}

int tpx__sock_accept(tpx_net_t *net, void *listen_comm, void **recv_comm,
                    tpx_net_dev_handle_t *recv_dev) {
  tpx_sock_net_t *sn = tpx__sock_net_of(net, "accept");
  if (sn == NULL) return TPX_EINVAL;
  if (recv_comm == NULL) return tpx_err_quiet(TPX_EINVAL, "accept: recv_comm is NULL");
  *recv_comm = NULL;
  int rc = 0;
  tpx_sock_listen_t *l = listen_get(sn, listen_comm, "accept", &rc);
  if (l == NULL) return rc;
  /* Unpack mode fills the caller's device handle (the TCPX plugin crashed
   * without one); HOST mode leaves it alone. */
  if (sn->unpack && recv_dev == NULL)
    return tpx_err_quiet(TPX_EINVAL,
                   "accept on %s: unpack mode (UNPACK device) needs the caller's device-handle"
                   " storage (tpx_net_dev_handle_t, 512 bytes), got NULL",
                   l->addr);
  tpx__sock_ready_refresh(sn, mark_ready);
  int io = atomic_exchange(&l->ready, 0);
  if (io) accept_new(sn, l);
  if (io || l->npend || l->ngroups) read_hellos(l, io);
  for (int i = 0; i < l->ngroups; i++) {
    struct group *g = &l->groups[i];
    if (g->have != g->nsocks + 1) continue;
    struct group done = *g;
    l->groups[i] = l->groups[--l->ngroups];
    if (l->keyed) l->taken = 1; /* its session's one comm */
    /* The peer's address as seen on the control socket names the comm. */
    rc = tpx__sock_comm_create(sn, TPX_SK_RECV, l->dev, done.nsocks, done.comm_id, done.fds,
                              done.peer, done.keys, recv_comm);
    group_keys_free(&done);
    if (rc == 0 && sn->unpack) {
      tpx_sock_comm_t *m =
          tpx__sock_reg_get(&sn->reg, (uint64_t)(uintptr_t)*recv_comm, TPX_SK_RECV, NULL);
      tpx__sock_upk_fill_dev(m, recv_dev);
      /* The plugin steers the flows for the listen's GPU but takes bounce
       * pages from the accepting thread's: say so when they differ. */
      if (m->gpu_bound != l->gpu_bound)
        TPX_WARN("accept on %s: listened with GPU %d current, accepted with GPU %d: the TCPX "
                 "plugin would steer flows to one GPU and receive into the other's pages",
                 l->addr, l->gpu_bound, m->gpu_bound);
    }
    return rc;
  }
  return 0;
}
