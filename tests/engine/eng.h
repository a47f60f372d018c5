/* Helpers for the engine tests: endpoint pairs over loopback, registered
 * buffers, descriptor exchange. */
#ifndef TPX_TESTS_ENG_H
#define TPX_TESTS_ENG_H

#include "testutil.h"
#include "tpx/net.h"
#include "tpx/tpx.h"

/* Configuration from the environment (so TPX_SOCK_STRICT applies), with
 * test-friendly overrides. */
void eng_cfg(tpx_config_t *cfg);

/* One endpoint on loopback (127.0.0.1, ephemeral port); fails the test,
 * naming the reason, when it cannot be made. */
tpx_endpoint_t *eng_ep_open(const tpx_config_t *cfg, const char *name);
/* The same on a transport the caller opened (NULL: the configuration's). */
tpx_endpoint_t *eng_ep_open_net(const tpx_config_t *cfg, const char *name, tpx_net_t *net);

typedef struct eng_pair {
  tpx_endpoint_t *a, *b; /* a dialled b */
  tpx_peer_t *ab;        /* a's handle on b */
  tpx_peer_t *ba;        /* b's handle on a */
} eng_pair_t;

/* Two endpoints (ephemeral ports), connected. */
void eng_pair_open(eng_pair_t *p, const tpx_config_t *cfg);
/* The same with one configuration per side, and B's GPU index. */
void eng_pair_open2(eng_pair_t *p, const tpx_config_t *ca, const tpx_config_t *cb, int gpu_b);
/* The same over given transports (NULL: the configuration's), borrowed. */
void eng_pair_open_net(eng_pair_t *p, const tpx_config_t *ca, const tpx_config_t *cb,
                       tpx_net_t *net_a, tpx_net_t *net_b, int gpu_b);
void eng_pair_close(eng_pair_t *p);
/* Connect a to b (b listening) and return both peer handles. */
void eng_connect(tpx_endpoint_t *a, tpx_endpoint_t *b, tpx_peer_t **ab, tpx_peer_t **ba);

typedef struct eng_buf {
  uint8_t *p;
  size_t len;
  tpx_mem_t *mem;
  tpx_rmem_t *rmem; /* as the peer sees it */
} eng_buf_t;

/* Allocate len bytes (page aligned), register with access, make the remote view. */
void eng_buf(tpx_endpoint_t *ep, size_t len, unsigned access, eng_buf_t *b);
void eng_buf_free(eng_buf_t *b);

/* Wait with a bounded timeout (ms), assert the result code. */
void eng_wait(tpx_xfer_t *x, int expect);
/* Fill src with pattern seed, write all of it to the start of dst through
 * peer, and check that it landed. */
void eng_write_check(tpx_peer_t *peer, eng_buf_t *src, eng_buf_t *dst, uint32_t seed);

/* Raw TCP to 127.0.0.1:port (what an attacker's client does). */
int eng_raw_connect(int port);
/* Read until EOF (or 5 s: fail); returns the bytes received. */
size_t eng_read_to_eof(int fd, uint8_t *buf, size_t cap);

/* Process resources, to check that they come back after an attack. */
typedef struct eng_res {
  int fds, threads;
  long rss_kb;
} eng_res_t;
void eng_res_now(eng_res_t *r);
/* fds and threads back to base within 3 s; RSS within slack. */
void eng_res_settled(const eng_res_t *base, long rss_slack_kb);
/* CPU seconds this process used so far (user + system). */
double eng_cpu_s(void);

/* A proxy transport in front of an endpoint's own: every call goes through
 * to it, except the hooks given (a hostile or counting transport). One at a
 * time. Hooks reach the real transport through eng_px_isend/eng_px_connect. */
typedef struct eng_proxy {
  int (*isend)(tpx_net_t *net, void *comm, void *data, size_t size, int tag, void *mh, void **req);
  int (*connect)(tpx_net_t *net, int dev, void *handle, void **comm, tpx_net_dev_handle_t *dh);
  tpx_net_t net;
  tpx_net_ops_t ops;
  tpx_net_t *inner;
} eng_proxy_t;
void eng_proxy_install(tpx_endpoint_t *ep, eng_proxy_t *px);
void eng_proxy_remove(tpx_endpoint_t *ep, eng_proxy_t *px);
int eng_px_isend(tpx_net_t *net, void *comm, void *data, size_t size, int tag, void *mh, void **req);
int eng_px_connect(tpx_net_t *net, int dev, void *handle, void **comm, tpx_net_dev_handle_t *dh);


/* ---- for the hostile-peer tests (test_engine_exhaustion.c, _flood.c) ---- */
/* A built-in listen handle naming 127.0.0.1:port with nsocks data sockets,
 * as a hand-written HELLO carries it. */
void eng_mk_handle(uint8_t *h, uint16_t port, int nsocks);
/* A loopback listener that never accepts and whose accept queue is full
 * (backlog 0, one connection queued): the kernel drops every further SYN,
 * so a connect to it stays in SYN_SENT until it is given up. */
typedef struct eng_blackhole {
  int lfd, filler;
  uint16_t port;
} eng_blackhole_t;
void eng_blackhole_open(eng_blackhole_t *b);
void eng_blackhole_close(eng_blackhole_t *b);
/* a connects to b, writes len bytes checked at b, both close. */
void eng_legit_transfer(tpx_endpoint_t *a, tpx_endpoint_t *b, size_t len, uint32_t seed);

/* A descriptor of b's region naming a region id that does not exist, so
 * that every access through it is refused by the target (caller frees). */
tpx_rmem_t *eng_unknown_region(const eng_buf_t *b);

#endif
