/* An in-memory ncclNet plugin for loader tests: one source, built into
 * several .so files that differ by which tables they export (FAKE_V7 ..
 * FAKE_V12), plus flavours: FAKE_INIT_FAIL (init returns a system error),
 * FAKE_UNPACK (v7 device offload: fills the device handle, has getDeviceMr
 * and irecvConsumed), FAKE_TCPX_NAME (the v7 table is named like a HOST-type
 * GPUDirect-TCPX build), FAKE_INIT_ONCE (any init after the first fails, as
 * a real plugin may: the loader must share one instance). It counts every
 * call in `fake_stats`.
 *
 * Both ends of a connection live in this process: listen writes the listen
 * comm's id into the handle (a connect to a closed one fails, as a refused
 * connection would); connect and accept each answer "not yet" once (state
 * kept in the handle / listen comm, as real plugins do) before completing;
 * isend/irecv queue requests per connection and match them FIFO. A test may
 * make completing connects and accepts fail (fake_stats.fail_*). */
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "fake_stats.h"

/* The engine calls a shared instance from several endpoints' progress
 * threads at once: every record is atomic (ThreadSanitizer-clean). */
#define STAT_ADD(f, n) __atomic_add_fetch(&fake_stats.f, (n), __ATOMIC_RELAXED)
#define STAT_SET(f, v) __atomic_store_n(&fake_stats.f, (v), __ATOMIC_RELAXED)
#include "ncclnet/abi.h"

/* Each flavour uses a different subset of the shared calls. */
#pragma GCC diagnostic ignored "-Wunused-function"

#define EXPORT __attribute__((visibility("default")))
#define MAX_REQS NCCLNET_MAX_REQUESTS

EXPORT struct fake_stats fake_stats;

static pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
static ncclnet_logger_t logger;

struct req {
  int is_send, done, err;
  void *data;
  size_t size, got;
  int tag;
  struct req *next;
};

struct pipe_ {
  struct req *sends, *recvs; /* FIFOs of unmatched requests */
  int send_open, recv_open;
  int send_reqs, recv_reqs; /* requests alive per end */
};

struct lcomm {
  uint64_t magic, id;
  struct pipe_ *pending; /* connected, not yet accepted */
  int accept_tries;
  struct lcomm *next; /* in lcomms */
};
static struct lcomm *lcomms; /* open listen comms, under mu */
static uint64_t lcomm_ids;

struct end {
  struct pipe_ *p;
  int is_send;
};

struct handle { /* lives in the 128-byte NCCL handle */
  uint64_t magic;
  uint64_t id; /* of the listen comm */
  int connect_tries;
};
_Static_assert(sizeof(struct handle) <= NCCLNET_HANDLE_MAXSIZE, "handle fits");
#define MAGIC 0xfa4e0e7ull

static void push(struct req **q, struct req *r) {
  while (*q)
    q = &(*q)->next;
  *q = r;
}

static void match(struct pipe_ *p) {
  while (p->sends && p->recvs) {
    struct req *s = p->sends, *r = p->recvs;
    p->sends = s->next;
    p->recvs = r->next;
    if (s->size > r->size) {
      s->err = r->err = NCCLNET_INVALID_USAGE; /* receive too small */
    } else {
      if (s->size) memcpy(r->data, s->data, s->size);
      r->got = s->size;
    }
    s->done = r->done = 1;
  }
}

static void maybe_free_pipe(struct pipe_ *p) {
  if (!p->send_open && !p->recv_open) {
    for (struct req *r = p->sends, *n; r; r = n)
      n = r->next, free(r);
    for (struct req *r = p->recvs, *n; r; r = n)
      n = r->next, free(r);
    free(p);
  }
}

/* ---- calls shared by every version (size_t inside) --------------------------------- */

static int inits_ever; /* unlike fake_stats, never reset by a test */

static ncclnet_result_t f_init(int version, ncclnet_logger_t log) {
  pthread_mutex_lock(&mu);
  STAT_ADD(init, 1);
  int again = inits_ever++ > 0;
  STAT_SET(version, version);
  STAT_SET(logger_set, log != NULL);
  logger = log;
  pthread_mutex_unlock(&mu);
  if (log)
    log(NCCLNET_LOG_INFO, NCCLNET_SUBSYS_NET, __FILE__, __LINE__, "fake net v%d init\n", version);
  (void)again;
#ifdef FAKE_INIT_FAIL
  return NCCLNET_SYSTEM_ERROR;
#elif defined(FAKE_INIT_ONCE)
  return again ? NCCLNET_INTERNAL_ERROR : NCCLNET_SUCCESS;
#else
  return NCCLNET_SUCCESS;
#endif
}

static ncclnet_result_t f_devices(int *ndev) {
  __atomic_add_fetch(&fake_stats.devices, 1, __ATOMIC_RELAXED);
  *ndev = 2;
  return NCCLNET_SUCCESS;
}

/* Fills the fields every version has; returns 0 or an error for a bad dev. */
#define FILL_PROPS(pr, dev)                                                                        \
  do {                                                                                             \
    __atomic_add_fetch(&fake_stats.props, 1, __ATOMIC_RELAXED);                                    \
    if ((dev) < 0 || (dev) > 1) return NCCLNET_INVALID_ARGUMENT;                                   \
    memset((pr), 0, sizeof(*(pr)));                                                                \
    (pr)->name = (dev) == 0 ? "fake0" : "fake1";                                                   \
    (pr)->pciPath = NULL;                                                                          \
    (pr)->guid = 0x1000 + (dev);                                                                   \
    (pr)->ptrSupport = NCCLNET_PTR_HOST;                                                           \
    (pr)->speed = 100000;                                                                          \
    (pr)->port = 0;                                                                                \
    (pr)->latency = 1.5f;                                                                          \
    (pr)->maxComms = 1024;                                                                         \
    (pr)->maxRecvs = 1;                                                                            \
    (pr)->netDeviceType = UNPACK_TYPE;                                                             \
    (pr)->netDeviceVersion = UNPACK_TYPE ? NCCLNET_DEVICE_UNPACK_VERSION : 0;                      \
  } while (0)

#ifdef FAKE_UNPACK
#define UNPACK_TYPE NCCLNET_DEVICE_UNPACK
#else
#define UNPACK_TYPE NCCLNET_DEVICE_HOST
#endif

static ncclnet_result_t f_listen(int dev, void *handle, void **lc) {
  if (dev < 0 || dev > 1 || !handle || !lc) return NCCLNET_INVALID_ARGUMENT;
  struct lcomm *l = calloc(1, sizeof(*l));
  if (!l) return NCCLNET_SYSTEM_ERROR;
  l->magic = MAGIC;
  pthread_mutex_lock(&mu);
  l->id = ++lcomm_ids;
  l->next = lcomms;
  lcomms = l;
  struct handle h = {MAGIC, l->id, 0};
  memset(handle, 0, NCCLNET_HANDLE_MAXSIZE);
  memcpy(handle, &h, sizeof(h));
  STAT_ADD(listen, 1);
  STAT_ADD(listen_dev[dev], 1);
  STAT_ADD(live_comms, 1);
  pthread_mutex_unlock(&mu);
  *lc = l;
  return NCCLNET_SUCCESS;
}

static ncclnet_result_t f_connect(int dev, void *handle, void **sc, ncclnet_dev_handle_t **dh) {
  if (dev < 0 || dev > 1 || !handle || !sc) return NCCLNET_INVALID_ARGUMENT;
  struct handle *h = handle;
  if (h->magic != MAGIC || h->id == 0) return NCCLNET_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  struct lcomm *l = lcomms;
  while (l && l->id != h->id)
    l = l->next;
  STAT_ADD(connect_dev_calls[dev], 1);
  STAT_ADD(connect, 1);
  STAT_SET(connect_dev, dh ? (void *)*dh : (void *)-1);
  ncclnet_result_t r = NCCLNET_SUCCESS;
  *sc = NULL;
  if (!l) {
    r = NCCLNET_SYSTEM_ERROR; /* its listener closed: refused */
  } else if (h->connect_tries++ == 0) {
    STAT_ADD(connect_pending, 1); /* first call: "in progress"; state kept in the handle */
  } else if (fake_stats.fail_connects > 0) {
    STAT_ADD(fail_connects, -1);
    STAT_ADD(connect_failed, 1);
    r = fake_stats.fail_code ? (ncclnet_result_t)fake_stats.fail_code : NCCLNET_SYSTEM_ERROR;
  } else if (l->pending) {
    r = NCCLNET_INTERNAL_ERROR; /* one connection per listen comm in this fake */
  } else {
    struct pipe_ *p = calloc(1, sizeof(*p));
    struct end *e = calloc(1, sizeof(*e));
    if (!p || !e) {
      free(p), free(e);
      r = NCCLNET_SYSTEM_ERROR;
    } else {
      p->send_open = p->recv_open = 1;
      e->p = p, e->is_send = 1;
      l->pending = p;
      STAT_ADD(live_comms, 1);
      *sc = e;
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}

static int accept_inside;

/* The TCPX-named flavour takes a moment in accept, as the real plugin does
 * when it imports its receive buffer there: overlapping calls, which the
 * loader must not make (src/ncclnet/adapt.c), get counted. */
static void accept_enter(void) {
  if (__atomic_add_fetch(&accept_inside, 1, __ATOMIC_SEQ_CST) > 1) STAT_ADD(accept_overlap, 1);
#ifdef FAKE_TCPX_NAME
  struct timespec ts = {0, 300 * 1000};
  nanosleep(&ts, NULL);
#endif
}

static ncclnet_result_t f_accept_body(struct lcomm *l, void **rc, ncclnet_dev_handle_t **dh);

static ncclnet_result_t f_accept(void *lc, void **rc, ncclnet_dev_handle_t **dh) {
  struct lcomm *l = lc;
  if (!l || l->magic != MAGIC || !rc) return NCCLNET_INVALID_ARGUMENT;
  accept_enter();
  ncclnet_result_t r = f_accept_body(l, rc, dh);
  __atomic_sub_fetch(&accept_inside, 1, __ATOMIC_SEQ_CST);
  return r;
}

static ncclnet_result_t f_accept_body(struct lcomm *l, void **rc, ncclnet_dev_handle_t **dh) {
  pthread_mutex_lock(&mu);
  STAT_ADD(accept, 1);
  STAT_SET(accept_slot, dh);
  STAT_SET(accept_dev, dh ? (void *)*dh : NULL);
  *rc = NULL;
  ncclnet_result_t r = NCCLNET_SUCCESS;
  if (l->accept_tries++ == 0 || l->pending == NULL) {
    STAT_ADD(accept_pending, 1);
  } else if (fake_stats.fail_accepts > 0) {
    STAT_ADD(fail_accepts, -1);
    STAT_ADD(accept_failed, 1);
    r = fake_stats.fail_code ? (ncclnet_result_t)fake_stats.fail_code : NCCLNET_INTERNAL_ERROR;
  } else {
    struct end *e = calloc(1, sizeof(*e));
    if (!e) {
      r = NCCLNET_SYSTEM_ERROR;
    } else {
#ifdef FAKE_UNPACK
      if (!dh || !*dh || (*dh)->netDeviceType != NCCLNET_DEVICE_UNPACK) {
        free(e);
        pthread_mutex_unlock(&mu);
        return NCCLNET_INVALID_ARGUMENT; /* NCCL always gives UNPACK plugins typed storage */
      }
      (*dh)->handle = (void *)(uintptr_t)0xd0d0d0d0;
      (*dh)->size = 24;
      (*dh)->needsProxyProgress = 1;
#endif
      e->p = l->pending, e->is_send = 0;
      l->pending = NULL;
      STAT_ADD(live_comms, 1);
      *rc = e;
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}

static ncclnet_result_t f_regmr(void *comm, void *data, size_t size, int type, void **mh) {
  (void)data;
  if (!comm || !mh || (type != NCCLNET_PTR_HOST)) return NCCLNET_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  STAT_ADD(regmr, 1);
  STAT_SET(last_regmr_size, size);
  STAT_ADD(live_mrs, 1);
  pthread_mutex_unlock(&mu);
  *mh = malloc(8);
  return *mh ? NCCLNET_SUCCESS : NCCLNET_SYSTEM_ERROR;
}

static ncclnet_result_t f_regmr_int(void *comm, void *data, int size, int type, void **mh) {
  if (size < 0) return NCCLNET_INVALID_ARGUMENT;
  return f_regmr(comm, data, (size_t)size, type, mh);
}

static ncclnet_result_t f_deregmr(void *comm, void *mh) {
  if (!comm) return NCCLNET_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  STAT_ADD(deregmr, 1);
  STAT_ADD(live_mrs, -1);
  pthread_mutex_unlock(&mu);
  free(mh);
  return NCCLNET_SUCCESS;
}

static ncclnet_result_t f_isend(void *sc, void *data, size_t size, int tag, void *mh,
                                void **request) {
  (void)mh;
  struct end *e = sc;
  if (!e || !e->is_send || !request) return NCCLNET_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  STAT_ADD(isend, 1);
  STAT_SET(last_isend_size, size);
  *request = NULL;
  ncclnet_result_t r = NCCLNET_SUCCESS;
  if (e->p->send_reqs < MAX_REQS) { /* else: back-pressure, *request stays NULL */
    struct req *q = calloc(1, sizeof(*q));
    if (!q) {
      r = NCCLNET_SYSTEM_ERROR;
    } else {
      q->is_send = 1, q->data = data, q->size = size, q->tag = tag;
      push(&e->p->sends, q);
      e->p->send_reqs++;
      STAT_ADD(live_reqs, 1);
      match(e->p);
      *request = q;
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}

static ncclnet_result_t f_isend_int(void *sc, void *data, int size, int tag, void *mh,
                                    void **request) {
  if (size < 0) return NCCLNET_INVALID_ARGUMENT;
  return f_isend(sc, data, (size_t)size, tag, mh, request);
}

static ncclnet_result_t f_isend_ph(void *sc, void *data, size_t size, int tag, void *mh, void *ph,
                                   void **request) {
  (void)ph;
  return f_isend(sc, data, size, tag, mh, request);
}

static ncclnet_result_t f_irecv(void *rc, int n, void **data, size_t *sizes, int *tags, void **mhs,
                                void **request) {
  (void)mhs;
  struct end *e = rc;
  if (!e || e->is_send || !request || n != 1 || !data || !sizes || !tags)
    return NCCLNET_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  STAT_ADD(irecv, 1);
  STAT_SET(last_irecv_size, sizes[0]);
  *request = NULL;
  ncclnet_result_t r = NCCLNET_SUCCESS;
  if (e->p->recv_reqs < MAX_REQS) {
    struct req *q = calloc(1, sizeof(*q));
    if (!q) {
      r = NCCLNET_SYSTEM_ERROR;
    } else {
      q->data = data[0], q->size = sizes[0], q->tag = tags[0];
      push(&e->p->recvs, q);
      e->p->recv_reqs++;
      STAT_ADD(live_reqs, 1);
      match(e->p);
      *request = q;
    }
  }
  pthread_mutex_unlock(&mu);
  return r;
}

static ncclnet_result_t f_irecv_int(void *rc, int n, void **data, int *sizes, int *tags, void **mhs,
                                    void **request) {
  if (n != 1 || !sizes || sizes[0] < 0) return NCCLNET_INVALID_ARGUMENT;
  size_t s = (size_t)sizes[0];
  return f_irecv(rc, n, data, &s, tags, mhs, request);
}

static ncclnet_result_t f_irecv_ph(void *rc, int n, void **data, size_t *sizes, int *tags,
                                   void **mhs, void **ph, void **request) {
  if (!ph) return NCCLNET_INVALID_ARGUMENT; /* NCCL always passes an array */
  return f_irecv(rc, n, data, sizes, tags, mhs, request);
}

static ncclnet_result_t f_iflush(void *rc, int n, void **data, int *sizes, void **mhs,
                                 void **request) {
  (void)rc, (void)n, (void)data, (void)sizes, (void)mhs;
  __atomic_add_fetch(&fake_stats.iflush, 1, __ATOMIC_RELAXED);
  *request = NULL; /* nothing to flush for host memory: complete at once */
  return NCCLNET_SUCCESS;
}

/* Requests are owned by their FIFO until matched; a completed one is freed
 * by test (sends and, for HOST, receives). */
static ncclnet_result_t f_test(void *request, int *done, int *sizes) {
  struct req *q = request;
  if (!q || !done) return NCCLNET_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  STAT_ADD(test, 1);
  *done = q->done;
  ncclnet_result_t r = q->err;
  if (q->done) {
    if (sizes && !q->err && !(UNPACK_TYPE && !q->is_send))
      sizes[0] = (int)(q->is_send ? q->size : q->got);
    STAT_ADD(live_reqs, -1);
    free(q);
  }
  pthread_mutex_unlock(&mu);
  return r;
}

static ncclnet_result_t close_end(void *comm, int is_send) {
  struct end *e = comm;
  if (!e || e->is_send != is_send) return NCCLNET_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  if (is_send)
    STAT_ADD(close_send, 1), e->p->send_open = 0;
  else
    STAT_ADD(close_recv, 1), e->p->recv_open = 0;
  STAT_ADD(live_comms, -1);
  maybe_free_pipe(e->p);
  pthread_mutex_unlock(&mu);
  free(e);
  return NCCLNET_SUCCESS;
}

static ncclnet_result_t f_close_send(void *c) {
  return close_end(c, 1);
}
static ncclnet_result_t f_close_recv(void *c) {
  return close_end(c, 0);
}

static ncclnet_result_t f_close_listen(void *lc) {
  struct lcomm *l = lc;
  if (!l || l->magic != MAGIC) return NCCLNET_INVALID_ARGUMENT;
  pthread_mutex_lock(&mu);
  STAT_ADD(close_listen, 1);
  STAT_ADD(live_comms, -1);
  for (struct lcomm **pp = &lcomms; *pp; pp = &(*pp)->next)
    if (*pp == l) {
      *pp = l->next;
      break;
    }
  if (l->pending) { /* connected but never accepted */
    l->pending->recv_open = 0;
    maybe_free_pipe(l->pending);
  }
  pthread_mutex_unlock(&mu);
  l->magic = 0;
  free(l);
  return NCCLNET_SUCCESS;
}

#ifdef FAKE_UNPACK
static ncclnet_result_t f_get_device_mr(void *comm, void *mh, void **dptr) {
  (void)comm;
  __atomic_add_fetch(&fake_stats.get_device_mr, 1, __ATOMIC_RELAXED);
  *dptr = mh;
  return NCCLNET_SUCCESS;
}
static ncclnet_result_t f_irecv_consumed(void *rc, int n, void *request) {
  (void)rc, (void)n, (void)request;
  __atomic_add_fetch(&fake_stats.irecv_consumed, 1, __ATOMIC_RELAXED);
  return NCCLNET_SUCCESS;
}
#define GET_DEVICE_MR f_get_device_mr
#define IRECV_CONSUMED f_irecv_consumed
#else
#define GET_DEVICE_MR NULL
#define IRECV_CONSUMED NULL
#endif

/* ---- per-version shims and tables ---------------------------------------------------- */

#if defined(FAKE_V7) || defined(FAKE_V8) || defined(FAKE_V9) || defined(FAKE_V10)
static ncclnet_result_t f_listen_noctx(int dev, void *handle, void **lc) {
  return f_listen(dev, handle, lc);
}
#endif

#ifdef FAKE_TCPX_NAME
#define FAKE_V7_NAME "GPUDirectTCPX_host"
#else
#define FAKE_V7_NAME "fake_v7"
#endif

#ifdef FAKE_V7
static ncclnet_result_t f_init7(ncclnet_logger_t l) {
  return f_init(7, l);
}
static ncclnet_result_t f_props7(int dev, ncclnet_props_v7_t *p) {
  FILL_PROPS(p, dev);
  return NCCLNET_SUCCESS;
}
EXPORT const ncclnet_v7_t ncclNetPlugin_v7 = {
    FAKE_V7_NAME, f_init7,      f_devices,      f_props7,      f_listen_noctx, f_connect, f_accept,
    f_regmr_int,  NULL,         f_deregmr,      f_isend_int,   f_irecv_int,    f_iflush,  f_test,
    f_close_send, f_close_recv, f_close_listen, GET_DEVICE_MR, IRECV_CONSUMED};
#endif

#ifdef FAKE_V8
static ncclnet_result_t f_init8(ncclnet_logger_t l) {
  return f_init(8, l);
}
static ncclnet_result_t f_props8(int dev, ncclnet_props_v8_t *p) {
  FILL_PROPS(p, dev);
  p->regIsGlobal = 1;
  return NCCLNET_SUCCESS;
}
EXPORT const ncclnet_v8_t ncclNetPlugin_v8 = {
    "fake_v8",    f_init8,      f_devices,      f_props8,      f_listen_noctx, f_connect, f_accept,
    f_regmr,      NULL,         f_deregmr,      f_isend_int,   f_irecv_int,    f_iflush,  f_test,
    f_close_send, f_close_recv, f_close_listen, GET_DEVICE_MR, IRECV_CONSUMED};
#endif

#if defined(FAKE_V9) || defined(FAKE_V10) || defined(FAKE_V11) || defined(FAKE_V12)
#define FILL_V9_EXTRA(p, dev)                                                                      \
  do {                                                                                             \
    (p)->regIsGlobal = 1;                                                                          \
    (p)->forceFlush = 0;                                                                           \
    (p)->vProps.ndevs = 1;                                                                         \
    (p)->vProps.devs[0] = (dev);                                                                   \
    (p)->maxP2pBytes = (size_t)1 << 36;                                                            \
    (p)->maxCollBytes = (size_t)1 << 29;                                                           \
  } while (0)
#endif
#if defined(FAKE_V9) || defined(FAKE_V10)
static ncclnet_result_t f_props9(int dev, ncclnet_props_v9_t *p) {
  FILL_PROPS(p, dev);
  FILL_V9_EXTRA(p, dev);
  return NCCLNET_SUCCESS;
}
#endif

#ifdef FAKE_V9
static ncclnet_result_t f_init9(ncclnet_logger_t l) {
  return f_init(9, l);
}
EXPORT const ncclnet_v9_t ncclNetPlugin_v9 = {
    "fake_v9",    f_init9,      f_devices,      f_props9,      f_listen_noctx, f_connect, f_accept,
    f_regmr,      NULL,         f_deregmr,      f_isend,       f_irecv,        f_iflush,  f_test,
    f_close_send, f_close_recv, f_close_listen, GET_DEVICE_MR, IRECV_CONSUMED, NULL};
#endif

#ifdef FAKE_V10
static ncclnet_result_t f_init10(ncclnet_logger_t l, ncclnet_profiler_cb_t prof) {
  (void)prof;
  return f_init(10, l);
}
static ncclnet_result_t f_connect10(int dev, ncclnet_comm_config_t *cfg, void *handle, void **sc,
                                    ncclnet_dev_handle_t **dh) {
  if (!cfg) return NCCLNET_INVALID_ARGUMENT;
  STAT_SET(traffic_class, cfg->trafficClass);
  return f_connect(dev, handle, sc, dh);
}
EXPORT const ncclnet_v10_t ncclNetPlugin_v10 = {
    "fake_v10",   f_init10,       f_devices,     f_props9,       f_listen_noctx,
    f_connect10,  f_accept,       f_regmr,       NULL,           f_deregmr,
    f_isend_ph,   f_irecv_ph,     f_iflush,      f_test,         f_close_send,
    f_close_recv, f_close_listen, GET_DEVICE_MR, IRECV_CONSUMED, NULL};
#endif

#if defined(FAKE_V11) || defined(FAKE_V12)
static int the_ctx; /* init hands out &the_ctx */
static ncclnet_result_t init_ctx(int version, void **ctx, uint64_t comm_id,
                                 ncclnet_comm_config_t *cfg, ncclnet_logger_t l) {
  if (!ctx || !cfg) return NCCLNET_INVALID_ARGUMENT;
  STAT_SET(comm_id, comm_id);
  STAT_SET(traffic_class, cfg->trafficClass);
  *ctx = &the_ctx;
  return f_init(version, l);
}
static ncclnet_result_t f_listen11(void *ctx, int dev, void *handle, void **lc) {
  STAT_SET(ctx_ok, ctx == &the_ctx);
  return f_listen(dev, handle, lc);
}
static ncclnet_result_t f_connect11(void *ctx, int dev, void *handle, void **sc,
                                    ncclnet_dev_handle_t **dh) {
  if (ctx != &the_ctx) STAT_SET(ctx_ok, 0);
  return f_connect(dev, handle, sc, dh);
}
static ncclnet_result_t f_finalize(void *ctx) {
  if (ctx != &the_ctx) return NCCLNET_INVALID_ARGUMENT;
  __atomic_add_fetch(&fake_stats.finalize, 1, __ATOMIC_RELAXED);
  return NCCLNET_SUCCESS;
}
static ncclnet_result_t f_set_net_attr(void *ctx, ncclnet_attr_t *attr) {
  (void)ctx, (void)attr;
  __atomic_add_fetch(&fake_stats.set_net_attr, 1, __ATOMIC_RELAXED);
  return NCCLNET_SUCCESS;
}
#endif

#ifdef FAKE_V11
static ncclnet_result_t f_init11(void **ctx, uint64_t comm_id, ncclnet_comm_config_t *cfg,
                                 ncclnet_logger_t l, ncclnet_profiler_cb_t prof) {
  (void)prof;
  return init_ctx(11, ctx, comm_id, cfg, l);
}
static ncclnet_result_t f_props11(int dev, ncclnet_props_v11_t *p) {
  FILL_PROPS(p, dev);
  FILL_V9_EXTRA(p, dev);
  p->maxMultiRequestSize = 1;
  return NCCLNET_SUCCESS;
}
EXPORT const ncclnet_v11_t ncclNetPlugin_v11 = {
    "fake_v11",     f_init11, f_devices,    f_props11,     f_listen11,     f_connect11,
    f_accept,       f_regmr,  NULL,         f_deregmr,     f_isend_ph,     f_irecv_ph,
    f_iflush,       f_test,   f_close_send, f_close_recv,  f_close_listen, GET_DEVICE_MR,
    IRECV_CONSUMED, NULL,     f_finalize,   f_set_net_attr};
#endif

#ifdef FAKE_V12
static ncclnet_result_t f_init12(void **ctx, uint64_t comm_id, ncclnet_comm_config_t *cfg,
                                 ncclnet_logger_t l, ncclnet_profiler_cb_t prof) {
  (void)prof;
  return init_ctx(12, ctx, comm_id, cfg, l);
}
/* v12 only: vProps may name up to 8 devices; railId / planeId are set
 * (dev 0 on rail 3, plane 1; dev 1 leaves them undefined). */
static ncclnet_result_t f_props12(int dev, ncclnet_props_v12_t *p) {
  FILL_PROPS(p, dev);
  FILL_V9_EXTRA(p, dev);
  p->maxMultiRequestSize = 1;
  p->vProps.ndevs = NCCLNET_MAX_DEVS_PER_NIC_V12;
  for (int i = 0; i < NCCLNET_MAX_DEVS_PER_NIC_V12; i++)
    p->vProps.devs[i] = i;
  p->railId = (int16_t)(dev == 0 ? 3 : NCCLNET_ID_UNDEF);
  p->planeId = (int16_t)(dev == 0 ? 1 : NCCLNET_ID_UNDEF);
  return NCCLNET_SUCCESS;
}
EXPORT const ncclnet_v12_t ncclNetPlugin_v12 = {
    "fake_v12",     f_init12, f_devices,    f_props12,     f_listen11,     f_connect11,
    f_accept,       f_regmr,  NULL,         f_deregmr,     f_isend_ph,     f_irecv_ph,
    f_iflush,       f_test,   f_close_send, f_close_recv,  f_close_listen, GET_DEVICE_MR,
    IRECV_CONSUMED, NULL,     f_finalize,   f_set_net_attr};
#endif
