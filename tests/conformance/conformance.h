/* tpx-conformance: the ncclNet contract checked through the internal table
 * (tpx_net_ops_t) of any transport tpx_net_open() can load.
 *
 * One process (both ends local, role "both") or two processes (roles
 * "server" and "client", handles carried over a small TCP side channel).
 * Every case is written once: it describes links (a send comm on one side, a
 * recv comm on the other) and the messages on them; each process drives only
 * the ends it owns. A link's direction is c2s (client sends) or s2c. */
#ifndef TPX_CONFORMANCE_H
#define TPX_CONFORMANCE_H

#include <stddef.h>
#include <stdint.h>

#include "testutil.h"
#include "tpx/net.h"

enum cf_role { CF_ROLE_BOTH = 0, CF_ROLE_SERVER, CF_ROLE_CLIENT };
enum cf_dir { CF_C2S = 0, CF_S2C = 1 };

/* A data mismatch found by the harness itself (not a tpx code). */
#define CF_EDATA 1001
/* The harness failed to allocate or register a buffer. */
#define CF_EHARNESS 1002

#define CF_MAX_LINKS 32

typedef struct cf_opts {
  const char *plugin;    /* spec for tpx_net_open; NULL = TPX_NET_PLUGIN / built-in */
  const char *ifname;    /* pick the device with this props name */
  int dev;               /* explicit device, -1 = by ifname / "lo" / 0 */
  int role;              /* enum cf_role */
  const char *peer;      /* HOST:PORT of the side channel (two-process mode) */
  const char *port_file; /* server: write the bound side-channel port here */
  int timeout_ms;        /* deadline of every wait (drive, connect, sync) */
  int case_timeout_s;    /* watchdog per case: a hang ends the process */
  size_t max_bytes;      /* largest single message a case may use */
  int window;            /* requests in flight per comm; 0 = 32 or the plugin's limit */
  int quirks;            /* TCPX quirks tolerated: -1 auto (UNPACK or name has TCPX) */
  int fd_check;          /* check fds/threads return to the baseline after each case */
  int host_bytes;        /* UNPACK plugins: verify host receives' bytes too (TCPX without devmem) */
  const char *filter;    /* cmocka test filter (glob) */
  const char *skip;      /* cmocka skip filter (glob) */
} cf_opts_t;

typedef struct cf_global {
  cf_opts_t o;
  tpx_net_t *net;
  int ndev, dev;
  tpx_net_props_t props;
  int window;
  int unpack; /* props.dev_type == UNPACK: data lands in bounce pages, not our buffer */
  int quirks; /* no receive sizes, rc -2 with done=1 at peer close, 16 requests */
  int side_fd;   /* two-process side channel, -1 in one-process mode */
  int side_dead; /* the peer process is gone: fail fast instead of waiting */
  int fd_base, thr_base;
  tu_fds_t fds_base; /* which ones, to name a leak's */
  uint32_t case_no; /* running case number: seeds differ between cases */
} cf_global_t;

extern cf_global_t G;

typedef struct cf_link {
  int dir;            /* enum cf_dir */
  int me_send, me_recv;
  /* Both exactly TPX_NET_HANDLE_BYTES on the heap, so ASan sees overruns.
   * handle: written by listen. chandle: the connector's copy, made once (or
   * received over the side channel) and passed unchanged on every retry. */
  unsigned char *handle, *chandle;
  void *listen_comm, *send_comm, *recv_comm;
  tpx_net_dev_handle_t *send_dev, *recv_dev;
  int connect_calls, accept_calls;
  uint64_t max_call_ns; /* longest single connect/accept call */
} cf_link_t;

/* One message. Sender side: send_size bytes of pattern `seed`. Receiver side:
 * a recv_size buffer; expected received size = send_size. */
typedef struct cf_msg {
  size_t send_size, recv_size;
  uint32_t seed;
  int tag;
  /* optional caller-owned buffers (inside a registered region) */
  unsigned char *ext_send, *ext_recv;
  void *ext_send_mh, *ext_recv_mh;
} cf_msg_t;

typedef struct cf_op {
  cf_msg_t m;
  unsigned char *buf; /* own allocation (NULL when ext) */
  unsigned char *data;
  void *mh;
  int own_mh;
  void *req;
  size_t got;
  int done;
} cf_op_t;

typedef struct cf_side {
  cf_link_t *link;
  int is_send;
  void *comm;
  cf_op_t *ops;
  int nops;
  int next_post, head; /* [head, next_post) are posted and not complete */
  int window;
  int err_rc, err_op;  /* first error on this side (0 = none) */
  const char *err_where;
  char err_msg[256];
  int max_inflight, backpressure;
  int sizes_null;      /* pass sizes = NULL to test */
  int close_ends_it;   /* this case expects the peer's close to end the request: with quirks
                        * on, rc -2 with done=0 is then the error, not "keep polling" */
  int close_rc_done, close_rc_transient; /* how often that happened */
  int unverified;      /* receives whose bytes could not be checked (UNPACK) */
  int no_size;         /* receives that reported no size (quirks) */
  uint64_t t_err_ns;   /* when the error was seen */
} cf_side_t;

/* ---- harness (harness.c) ---- */
void cf_note(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
void cf_print_notes(void);
uint64_t cf_now_ns(void);
uint32_t cf_seed(int link, int msg);

void cf_fill(void *buf, size_t len, uint32_t seed);
size_t cf_check(const void *buf, size_t len, uint32_t seed); /* SIZE_MAX = all match */
size_t cf_mem_available(void);                              /* MemAvailable, bytes */
int cf_thread_count(void);

int cf_link_init(cf_link_t *l, int dir);
/* Listen on the receiving ends, exchange handles (two-process), then retry
 * connect/accept with the same handle buffer and listen comm until every
 * local end is up or the deadline passes; then close the listen comms, as
 * NCCL does. order: CF_ORDER_*. Returns 0 or a code, with `why` filled. */
enum { CF_ORDER_ALTERNATE = 0, CF_ORDER_ACCEPT_FIRST = 1, CF_ORDER_CONNECT_FIRST = 2 };
int cf_links_establish(cf_link_t *links, int n, int order, char *why, size_t whylen);
/* Close one end: deregisters what live sides/regions hold on that comm first.
 * Returns the close call's code (0 when already closed). */
int cf_link_close_send(cf_link_t *l);
int cf_link_close_recv(cf_link_t *l);
/* End of a case: deregister, close every end still open, free every side,
 * region and link buffer. */
void cf_teardown_all(cf_link_t *links, int n);

/* A side is the local end of a link with its messages; NULL when that end is
 * not in this process. Sides live until cf_teardown_all. */
cf_side_t *cf_side_new(cf_link_t *l, int is_send, const cf_msg_t *msgs, int n);
/* A registered region on one end of a link (NULL when not local). */
typedef struct cf_region {
  cf_link_t *link;
  int is_send;
  unsigned char *base;
  size_t size;
  void *mh;
} cf_region_t;
cf_region_t *cf_region_new(cf_link_t *l, int is_send, size_t size);

/* One pass over all sides: post what the window allows, test the heads.
 * Returns nonzero when something moved. */
int cf_poll(cf_side_t **sides, int n);
/* Poll until `until` is finished (NULL: all sides) or timeout_ms passes.
 * Returns 0 or TPX_ETIMEDOUT. */
int cf_drive(cf_side_t **sides, int n, cf_side_t *until, int timeout_ms);
int cf_side_finished(const cf_side_t *s);

/* ---- two-process side channel (sidechan.c) ---- */
int cf_sc_listen(const char *hostport, int *lfd, int *port);
int cf_sc_accept(int lfd, int timeout_ms);
int cf_sc_connect(const char *hostport, int timeout_ms);
int cf_sc_send(int fd, const void *p, uint32_t len, int timeout_ms);
int cf_sc_recv(int fd, void *p, uint32_t cap, uint32_t *len, int timeout_ms);

/* Both processes meet at `tag` (no-op in one-process mode). 0 or -1. */
int cf_sync(const char *tag);
/* AND of a local decision across both processes (identity in one process). */
int cf_agree(int local);

#endif
