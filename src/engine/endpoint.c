/* Endpoints: transport choice, control listener (port base + GPU, retried on
 * EADDRINUSE), the progress pass and its idle policy, the optional progress
 * thread, connect/accept of peers, connection info, notifications. */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <ifaddrs.h>
#include <net/if.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "common/ports.h"
#include "common/util.h"
#include "engine/engine.h"

#define SCRATCH_BYTES WIRE_MAX_CHUNK
#define CLOSE_LINGER_MS 1000

void tpx_endpoint_params_init(tpx_endpoint_params_t *p) {
  memset(p, 0, sizeof(*p));
}

/* ---- wakeups ---- */
void ep_wake(tpx_endpoint_t *ep) {
  atomic_fetch_add(&ep->work_seq, 1);
  if (atomic_load(&ep->sleeping)) {
    uint64_t one = 1;
    ssize_t r = write(ep->evfd, &one, sizeof(one));
    (void)r;
  }
}

void ep_signal(tpx_endpoint_t *ep) {
  if (ep->waiters) pthread_cond_broadcast(&ep->cv);
}

void ep_epoll_set(tpx_endpoint_t *ep, struct tpx_peer *p, uint32_t events) {
  if (p->fd < 0) {
    p->ev = 0;
    return;
  }
  struct epoll_event e = {.events = events, .data.ptr = p};
  if (events == 0) {
    if (p->ev) epoll_ctl(ep->epfd, EPOLL_CTL_DEL, p->fd, &e);
  } else if (p->ev == 0) {
    if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, p->fd, &e) != 0)
      TPX_WARN("endpoint %s: epoll add failed: %s", ep->name, strerror(errno));
  } else if (p->ev != events) {
    epoll_ctl(ep->epfd, EPOLL_CTL_MOD, p->fd, &e);
  }
  p->ev = events;
}

/* ---- comm slots (index of the per-comm registration cache) ---- */
int ep_slot_alloc(tpx_endpoint_t *ep, void *comm) {
  for (int i = 0; i < ep->nslots; i++)
    if (!ep->slots[i]) {
      ep->slots[i] = comm;
      return i;
    }
  int n = ep->nslots ? ep->nslots * 2 : 32;
  void **s = realloc(ep->slots, (size_t)n * sizeof(*s));
  if (!s) return -1;
  for (int i = ep->nslots; i < n; i++) s[i] = NULL;
  ep->slots = s;
  int i = ep->nslots;
  ep->nslots = n;
  ep->slots[i] = comm;
  return i;
}

void ep_slot_release(tpx_endpoint_t *ep, int slot) {
  if (slot < 0 || slot >= ep->nslots || !ep->slots[slot]) return;
  mem_release_slot(ep, slot); /* deregister before the comm closes */
  ep->slots[slot] = NULL;
}

/* ---- graceful close of control sockets ---- */
void ep_closing_add(tpx_endpoint_t *ep, int fd) {
  if (ep->nclosing == ep->closing_cap) {
    int n = ep->closing_cap ? ep->closing_cap * 2 : 16;
    struct closing_fd *c = realloc(ep->closing, (size_t)n * sizeof(*c));
    if (!c) {
      close(fd);
      return;
    }
    ep->closing = c;
    ep->closing_cap = n;
  }
  ep->closing[ep->nclosing].fd = fd;
  ep->closing[ep->nclosing].deadline = tpx_now_ns() + ms_to_ns(CLOSE_LINGER_MS);
  ep->nclosing++;
}

static void closing_step(tpx_endpoint_t *ep, uint64_t now, int force) {
  for (int i = 0; i < ep->nclosing;) {
    int fd = ep->closing[i].fd, done = force;
    char buf[4096];
    while (!done) {
      ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
      if (n > 0) continue;
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
        done = now > ep->closing[i].deadline;
        break;
      }
      done = 1; /* EOF or error */
    }
    if (done) {
      close(fd);
      ep->closing[i] = ep->closing[--ep->nclosing];
    } else {
      i++;
    }
  }
}

/* ---- control listener ---- */
static int set_nodelay(int fd) {
  int one = 1;
  return setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

static int ep_listen(tpx_endpoint_t *ep, const char *host, int port_req) {
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE};
  struct addrinfo *ai = NULL;
  int g = getaddrinfo(host ? host : "0.0.0.0", NULL, &hints, &ai);
  if (g != 0 || !ai)
    return tpx_err(TPX_EINVAL, "endpoint %s: listen address '%s': %s", ep->name, host ? host : "0.0.0.0",
                   gai_strerror(g));
  int first, count;
  if (port_req > 0) first = port_req, count = 1;
  else if (port_req == TPX_PORT_EPHEMERAL) first = 0, count = 1;
  else first = ep->cfg.port_base + (ep->gpu > 0 ? ep->gpu : 0), count = ep->cfg.port_span;
  int rc = TPX_EADDRINUSE, fd = -1, tried = 0;
  for (int i = 0; i < count; i++) {
    int port = first + i;
    if (port > 65535) break;
    tried++;
    fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    if (fd < 0) {
      rc = tpx_err(TPX_ESYSTEM, "endpoint %s: socket: %s", ep->name, strerror(errno));
      break;
    }
    int e = tpx_bind_port(fd, ai->ai_addr, ai->ai_addrlen, port);
    if (e == 0 && listen(fd, 256) != 0) e = errno;
    if (e == 0) {
      rc = 0;
      break;
    }
    close(fd);
    fd = -1;
    if (e != EADDRINUSE) {
      rc = tpx_err(TPX_ESYSTEM, "endpoint %s: bind/listen on port %d: %s", ep->name, port, strerror(e));
      break;
    }
  }
  freeaddrinfo(ai);
  if (rc == TPX_EADDRINUSE)
    return tpx_err(TPX_EADDRINUSE, "endpoint %s: ports %d..%d are all in use (TPX_PORT_BASE + gpu, TPX_PORT_SPAN=%d)",
                   ep->name, first, first + count - 1, ep->cfg.port_span);
  if (rc) return rc;
  struct sockaddr_storage sa;
  socklen_t sl = sizeof(sa);
  getsockname(fd, (struct sockaddr *)&sa, &sl);
  ep->port = ntohs(sa.ss_family == AF_INET ? ((struct sockaddr_in *)&sa)->sin_port
                                            : ((struct sockaddr_in6 *)&sa)->sin6_port);
  ep->listen_fd = fd;
  snprintf(ep->listen_host, sizeof(ep->listen_host), "%s", host ? host : "");
  struct epoll_event e = {.events = EPOLLIN, .data.ptr = &ep->listen_fd};
  if (epoll_ctl(ep->epfd, EPOLL_CTL_ADD, fd, &e) != 0)
    return tpx_err(TPX_ESYSTEM, "endpoint %s: epoll: %s", ep->name, strerror(errno));
  TPX_INFO("endpoint %s: control port %d%s (after %d attempt(s))", ep->name, ep->port,
           port_req == 0 ? " (port base + gpu)" : "", tried);
  return 0;
}

static void fmt_addr(const struct sockaddr *sa, char *out, size_t cap) {
  char h[INET6_ADDRSTRLEN] = "?";
  int port = 0;
  if (sa->sa_family == AF_INET) {
    inet_ntop(AF_INET, &((const struct sockaddr_in *)sa)->sin_addr, h, sizeof(h));
    port = ntohs(((const struct sockaddr_in *)sa)->sin_port);
    snprintf(out, cap, "%s:%d", h, port);
  } else {
    inet_ntop(AF_INET6, &((const struct sockaddr_in6 *)sa)->sin6_addr, h, sizeof(h));
    port = ntohs(((const struct sockaddr_in6 *)sa)->sin6_port);
    snprintf(out, cap, "[%s]:%d", h, port);
  }
}

static int ep_accept_new(tpx_endpoint_t *ep) {
  int did = 0;
  for (int i = 0; i < 16; i++) {
    struct sockaddr_storage sa;
    socklen_t sl = sizeof(sa);
    int fd = accept4(ep->listen_fd, (struct sockaddr *)&sa, &sl, SOCK_NONBLOCK | SOCK_CLOEXEC);
    if (fd < 0) {
      if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR && errno != ECONNABORTED)
        TPX_WARN("endpoint %s: accept: %s", ep->name, strerror(errno));
      break;
    }
    set_nodelay(fd);
    char where[96];
    fmt_addr((struct sockaddr *)&sa, where, sizeof(where));
    if (!peer_new(ep, fd, 1, where)) {
      close(fd);
      TPX_WARN("endpoint %s: out of memory for incoming peer %s", ep->name, where);
      continue;
    }
    TPX_DEBUG("endpoint %s: control connection from %s", ep->name, where);
    did++;
  }
  return did;
}

/* ---- progress ---- */
int ep_pass(tpx_endpoint_t *ep) {
  int did = 0;
  struct epoll_event evs[64];
  int n = epoll_wait(ep->epfd, evs, 64, 0);
  for (int i = 0; i < n; i++) {
    void *ptr = evs[i].data.ptr;
    if (ptr == &ep->listen_fd) {
      did += ep_accept_new(ep);
    } else if (ptr == &ep->evfd) {
      uint64_t v;
      ssize_t r = read(ep->evfd, &v, sizeof(v));
      (void)r;
    } else {
      did += peer_on_event((struct tpx_peer *)ptr, evs[i].events);
    }
  }
  for (struct tpx_peer *p = ep->peers; p; p = p->next) {
    if (p->state == P_NET_SETUP) {
      int r = peer_setup_step(p);
      if (r > 0) did += r;
    }
    if (p->state == P_READY || p->state == P_CLOSING) {
      did += peer_data_progress(p);
      if (p->state == P_CLOSING) peer_check_closing(p);
    }
  }
  uint64_t now = tpx_now_ns();
  if (now >= ep->next_deadline_scan) {
    ep->next_deadline_scan = now + 1000000ull;
    for (struct tpx_peer *p = ep->peers; p; p = p->next) peer_deadlines(p, now);
    peer_sweep(ep);
    if (ep->nclosing) closing_step(ep, now, 0);
  }
  return did;
}

static int ep_busy(tpx_endpoint_t *ep) { return ep->inflight > 0 || ep->queued > 0; }

/* Sleep until control activity, a wakeup, or timeout_ns; skipped when work
 * was posted since `seq` was read (the poster saw sleeping == 0). */
static void ep_sleep(tpx_endpoint_t *ep, uint64_t timeout_ns, unsigned seq) {
  atomic_store(&ep->sleeping, 1);
  if (atomic_load(&ep->work_seq) == seq) {
    struct pollfd pf = {.fd = ep->epfd, .events = POLLIN};
    struct timespec ts = {(time_t)(timeout_ns / 1000000000ull), (long)(timeout_ns % 1000000000ull)};
    (void)ppoll(&pf, 1, &ts, NULL);
  }
  atomic_store(&ep->sleeping, 0);
}

/* Idle policy when a pass made no progress. With requests in flight: spin a
 * little, yield a little, then nap with a doubling period capped at
 * IDLE_NAP_MAX_NS: windows keep the transport busy for milliseconds, so naps
 * cost no bandwidth, while spinning would steal the CPU the transport's own
 * threads need (and `test` still runs often enough for plugins that progress
 * only inside it). Without requests: sleep until an event (or a timer). */
#define IDLE_SPIN 16
#define IDLE_YIELD 48
#define IDLE_NAP_MIN_NS 10000ull
#define IDLE_NAP_MAX_NS 100000ull

/* Below 4 CPUs the progress thread naps at once: with requests in flight
 * the transport's threads need every CPU, and a waiting caller drives
 * progress itself for short answers (ep_drive). 2 cores, 64 MiB through the
 * engine: +5% GB/s, -8..11% CPU per GB. */
static int few_cpus(void) {
  static int v = -1;
  if (v < 0) v = sysconf(_SC_NPROCESSORS_ONLN) < 4;
  return v;
}

static void idle_busy(tpx_endpoint_t *ep, unsigned spins, unsigned seq, int nap_now) {
  unsigned spin = nap_now ? 0 : IDLE_SPIN, yield = nap_now ? 0 : IDLE_YIELD;
  if (spins < spin) return;
  if (spins < yield) {
    sched_yield();
    return;
  }
  unsigned k = spins - yield;
  uint64_t nap = k >= 4 ? IDLE_NAP_MAX_NS : IDLE_NAP_MIN_NS << k;
  if (nap > IDLE_NAP_MAX_NS) nap = IDLE_NAP_MAX_NS;
  ep_sleep(ep, nap, seq);
}

void ep_idle(tpx_endpoint_t *ep, unsigned *spins, int busy) {
  unsigned seq = atomic_load(&ep->work_seq);
  ++*spins;
  if (busy) idle_busy(ep, *spins, seq, 0);
  else ep_sleep(ep, *spins < 4 ? 0 : 10000000ull, seq);
}

/* A waiting caller drives progress itself (lock not held): the answer it
 * waits for is then handled by the thread that needs it, with no hand-off
 * from the progress thread (a wake-up, and contention on ep->lock: 4 KiB
 * write ping-pong on 2 cores went from 10-25 us one-way to ~7). As without a
 * progress thread, GPU calls set and restore their context per call.
 * Returns what the pass did, 0 when the lock was busy. */
int ep_drive(tpx_endpoint_t *ep) {
  if (pthread_mutex_trylock(&ep->lock) != 0) return 0;
  int did = ep_pass(ep);
  pthread_mutex_unlock(&ep->lock);
  return did;
}

/* A waiter stops driving. Its passes may have taken the wake-up meant for
 * the progress thread (a post's eventfd write): with requests in flight the
 * last driver wakes it. (Without, it sleeps until a control event or its
 * timer as before; the waiter handled the events it took.) */
void ep_drive_end(tpx_endpoint_t *ep) {
  if (atomic_fetch_sub(&ep->drivers, 1) != 1) return;
  if (__atomic_load_n(&ep->inflight, __ATOMIC_RELAXED) > 0 || __atomic_load_n(&ep->queued, __ATOMIC_RELAXED) > 0)
    ep_wake(ep);
}

static void *progress_main(void *arg) {
  tpx_endpoint_t *ep = arg;
  unsigned spins = 0;
  while (!atomic_load(&ep->stop)) {
    if (atomic_load(&ep->drivers) > 0) {
      /* A waiter drives progress: stand aside. Sleep on the eventfd alone,
       * not the epoll set (which would wake us for the events the waiter
       * handles), until ep_drive_end's ep_wake or 1 ms at most. */
      atomic_store(&ep->sleeping, 1);
      if (atomic_load(&ep->drivers) > 0) {
        struct pollfd pf = {.fd = ep->evfd, .events = POLLIN};
        struct timespec ts = {0, 1000000};
        (void)ppoll(&pf, 1, &ts, NULL);
      }
      atomic_store(&ep->sleeping, 0);
      spins = 0;
      continue;
    }
    pthread_mutex_lock(&ep->lock);
    unsigned seq = atomic_load(&ep->work_seq);
    int did = ep_pass(ep);
    int busy = ep_busy(ep);
    int timers = ep->setups > 0 || ep->nclosing > 0;
    for (struct tpx_peer *p = ep->peers; p && !timers; p = p->next) timers = p->active != NULL;
    pthread_mutex_unlock(&ep->lock);
    if (did) {
      spins = 0;
      continue;
    }
    ++spins;
    if (busy) {
      idle_busy(ep, spins, seq, few_cpus());
    } else {
      ep_sleep(ep, timers ? 2000000ull : 100000000ull, seq);
    }
  }
  return NULL;
}

/* Wait (lock held) until pred(arg) is true or the deadline passes.
 * Drives progress itself when there is no progress thread. */
int ep_wait_until(tpx_endpoint_t *ep, int (*pred)(tpx_endpoint_t *, void *), void *arg, uint64_t deadline) {
  unsigned spins = 0;
  if (ep->thread_on && !pred(ep, arg)) {
    /* Short answers (a notification, a peer's reply) come faster than a
     * sleep/wake-up: spin briefly, driving progress (ep_drive), before
     * sleeping. */
    uint64_t until = tpx_now_ns() + WAIT_SPIN_NS;
    atomic_fetch_add(&ep->drivers, 1);
    while (tpx_now_ns() < until && tpx_now_ns() < deadline) {
      int did = ep_pass(ep); /* lock held */
      if (pred(ep, arg)) break;
      pthread_mutex_unlock(&ep->lock);
      if (!did) sched_yield();
      pthread_mutex_lock(&ep->lock);
      if (pred(ep, arg)) break;
    }
    ep_drive_end(ep);
  }
  if (ep->thread_on) ep->waiters++;
  int ok;
  while (!(ok = pred(ep, arg))) {
    uint64_t now = tpx_now_ns();
    if (now >= deadline) break;
    if (ep->thread_on) {
      uint64_t step = deadline - now < 10000000ull ? deadline - now : 10000000ull;
      struct timespec ts;
      clock_gettime(CLOCK_REALTIME, &ts);
      uint64_t t = (uint64_t)ts.tv_nsec + step;
      ts.tv_sec += (time_t)(t / 1000000000ull);
      ts.tv_nsec = (long)(t % 1000000000ull);
      pthread_cond_timedwait(&ep->cv, &ep->lock, &ts);
    } else {
      int did = ep_pass(ep);
      if (pred(ep, arg)) {
        ok = 1;
        break;
      }
      int busy = ep_busy(ep) || ep->setups > 0;
      pthread_mutex_unlock(&ep->lock);
      if (did) spins = 0;
      else ep_idle(ep, &spins, busy);
      pthread_mutex_lock(&ep->lock);
    }
  }
  if (ep->thread_on) ep->waiters--;
  return ok;
}

int tpx_progress(tpx_endpoint_t *ep) {
  if (!ep) return tpx_err(TPX_EINVAL, "tpx_progress: NULL");
  pthread_mutex_lock(&ep->lock);
  (void)ep_pass(ep);
  pthread_mutex_unlock(&ep->lock);
  return 0;
}

/* ---- create / destroy ---- */
static int is_builtin(const char *s) {
  return !s || !s[0] || strcmp(s, "tpx") == 0 || strcmp(s, "builtin") == 0;
}

/* The request limit per comm of the transport: TCPX allows 16, NCCL expects
 * plugins to sustain 32. Our own transport in strict mode mimics TCPX. */
static int transport_limit(tpx_endpoint_t *ep, int builtin, int *unpack) {
  int limit = WINDOW_LIMIT_DEFAULT;
  *unpack = 0;
  if (strstr(ep->net->name, "TCPX") || strstr(ep->net->name, "tcpx")) limit = WINDOW_LIMIT_TCPX;
  if (builtin && ep->cfg.sock_strict) limit = WINDOW_LIMIT_TCPX;
  for (int d = 0; d < ep->ndev; d++) {
    tpx_net_props_t pr;
    memset(&pr, 0, sizeof(pr));
    if (ep->net->ops->get_properties(ep->net, d, &pr) != 0) continue;
    if (pr.dev_type == TPX_NET_DEV_UNPACK || strstr(pr.name, "TCPX")) limit = WINDOW_LIMIT_TCPX;
    if (pr.dev_type == TPX_NET_DEV_UNPACK) *unpack = 1;
    if (!(pr.ptr_support & TPX_PTR_HOST))
      TPX_WARN("endpoint %s: net device %d (%s) does not take host pointers", ep->name, d, pr.name);
  }
  return limit;
}

int tpx_endpoint_create(const tpx_endpoint_params_t *params, tpx_endpoint_t **out) {
  if (!out) return tpx_err(TPX_EINVAL, "tpx_endpoint_create: NULL out");
  *out = NULL;
  tpx_endpoint_params_t defp;
  if (!params) {
    tpx_endpoint_params_init(&defp);
    params = &defp;
  }
  tpx_endpoint_t *ep = calloc(1, sizeof(*ep));
  if (!ep) return tpx_err(TPX_ENOMEM, "tpx_endpoint_create: out of memory");
  ep->cfg = params->cfg ? *params->cfg : *tpx_config_global();
  ep->listen_fd = ep->epfd = ep->evfd = -1;
  ep->gpu = params->gpu;
  ep->uuid = tpx_random_u64();
  if (params->name && params->name[0]) snprintf(ep->name, sizeof(ep->name), "%s", params->name);
  else {
    char host[32] = "host";
    gethostname(host, sizeof(host) - 1);
    snprintf(ep->name, sizeof(ep->name), "%.31s:%d:%d", host, (int)getpid(), params->gpu);
  }
  pthread_mutex_init(&ep->lock, NULL);
  pthread_condattr_t ca;
  pthread_condattr_init(&ca);
  pthread_cond_init(&ep->cv, &ca);
  pthread_condattr_destroy(&ca);
  int rc = 0;
  tpx_config_t *c = &ep->cfg;
  if (c->num_channels < 1 || c->num_channels > WIRE_MAX_CHANNELS || c->chunk_bytes < 1 ||
      c->chunk_bytes > WIRE_MAX_CHUNK || c->window < 1 || c->timeout_ms < 1 || c->connect_timeout_ms < 1) {
    rc = tpx_err(TPX_EINVAL, "tpx_endpoint_create: configuration out of range (channels %d, chunk %zu, window %d)",
                 c->num_channels, c->chunk_bytes, c->window);
    goto fail;
  }
  const char *plugin = params->plugin ? params->plugin : c->net_plugin;
  int builtin = 0;
  if (params->net) {
    ep->net = params->net;
    builtin = ep->net->abi_version == 0;
  } else if (is_builtin(plugin)) {
    builtin = 1;
    /* Our channels spread the data: the transport's sockets per comm are
     * shared among them (tpx_config_nsocks). */
    tpx_config_t tc = *c;
    tc.nsocks = tpx_config_nsocks(c, c->num_channels);
    rc = tpx_net_open_builtin(&tc, &ep->net);
    ep->own_net = rc == 0;
  } else {
    rc = tpx_net_open(plugin, &ep->net);
    ep->own_net = rc == 0;
  }
  if (rc) goto fail;
  rc = ep->net->ops->devices(ep->net, &ep->ndev);
  if (rc == 0 && ep->ndev < 1) rc = tpx_err(TPX_ENOENT, "endpoint %s: transport %s has no devices", ep->name, ep->net->name);
  if (rc) goto fail;
  if ((rc = gpu_ep_init(ep)) != 0) goto fail; /* GPU path; installs the unpack stage for UNPACK transports */
  int unpack = 0;
  int limit = transport_limit(ep, builtin, &unpack);
  if (unpack && !ep->consume) {
    /* Receives would land in the transport's bounce pages, not in our buffers:
     * refuse rather than deliver garbage until the consume stage exists. */
    rc = tpx_err(TPX_ENOTSUP, "endpoint %s: transport %s delivers receives through bounce buffers "
                 "(UNPACK device); the engine's unpack stage comes with GPU support", ep->name, ep->net->name);
    goto fail;
  }
  ep->window = c->window < limit ? c->window : limit;
  if (c->window > limit)
    TPX_INFO("endpoint %s: window %d capped to %d requests per comm by transport %s", ep->name, c->window,
             limit, ep->net->name);
  /* TCPX may send without MSG_NOSIGNAL: a dead peer must not kill us. */
  struct sigaction sa;
  if (sigaction(SIGPIPE, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL) signal(SIGPIPE, SIG_IGN);

  ep->epfd = epoll_create1(EPOLL_CLOEXEC);
  ep->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (ep->epfd < 0 || ep->evfd < 0) {
    rc = tpx_err(TPX_ESYSTEM, "endpoint %s: epoll/eventfd: %s", ep->name, strerror(errno));
    goto fail;
  }
  struct epoll_event e = {.events = EPOLLIN, .data.ptr = &ep->evfd};
  epoll_ctl(ep->epfd, EPOLL_CTL_ADD, ep->evfd, &e);
  if (!params->no_listen && (rc = ep_listen(ep, params->listen_host, params->port)) != 0) goto fail;
  ep->scratch_buf = aligned_alloc(4096, SCRATCH_BYTES);
  if (!ep->scratch_buf || mem_register_internal(ep, ep->scratch_buf, SCRATCH_BYTES, &ep->scratch) != 0) {
    rc = tpx_err(TPX_ENOMEM, "endpoint %s: out of memory", ep->name);
    goto fail;
  }
  if (c->progress_thread) {
    if (pthread_create(&ep->thread, NULL, progress_main, ep) != 0) {
      rc = tpx_err(TPX_ESYSTEM, "endpoint %s: cannot start the progress thread", ep->name);
      goto fail;
    }
    ep->thread_on = 1;
  }
  TPX_INFO("endpoint %s: transport %s, %d device(s), %d channel(s), chunk %zu, window %d, port %d, %s progress",
           ep->name, ep->net->name, ep->ndev, c->num_channels, c->chunk_bytes, ep->window, ep->port,
           ep->thread_on ? "thread" : "caller");
  *out = ep;
  return 0;
fail:
  tpx_endpoint_destroy(ep);
  return rc;
}

void tpx_endpoint_destroy(tpx_endpoint_t *ep) {
  if (!ep) return;
  if (ep->thread_on) {
    atomic_store(&ep->stop, 1);
    ep_wake(ep);
    uint64_t one = 1;
    ssize_t r = write(ep->evfd, &one, sizeof(one));
    (void)r;
    pthread_join(ep->thread, NULL);
    ep->thread_on = 0;
  }
  pthread_mutex_lock(&ep->lock);
  for (struct tpx_peer *p = ep->peers; p; p = p->next)
    if (p->state != P_DEAD) peer_shutdown(p, TPX_ECANCELED);
  xfer_release_all(ep); /* handles the user did not free */
  ep->acceptq_n = 0;
  while (ep->peers) { /* peers the user did not close */
    struct tpx_peer *p = ep->peers;
    p->refs = 1;
    peer_release(p);
  }
  /* Give closing control connections a moment to see the peer's FIN. */
  for (int i = 0; i < 50 && ep->nclosing; i++) {
    closing_step(ep, tpx_now_ns(), 0);
    if (!ep->nclosing) break;
    pthread_mutex_unlock(&ep->lock);
    struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
    pthread_mutex_lock(&ep->lock);
  }
  closing_step(ep, tpx_now_ns(), 1);
  if (ep->net) mem_free_all(ep);
  gpu_ep_fini(ep); /* peers and registrations are gone: streams, pools, GPU context references */
  pthread_mutex_unlock(&ep->lock);
  free(ep->scratch_buf);
  free(ep->slots);
  free(ep->closing);
  free(ep->acceptq);
  while (ep->notif_head) {
    struct notif_node *n = ep->notif_head;
    ep->notif_head = n->next;
    free(n);
  }
  if (ep->own_net) tpx_net_close(ep->net);
  if (ep->listen_fd >= 0) close(ep->listen_fd);
  if (ep->epfd >= 0) close(ep->epfd);
  if (ep->evfd >= 0) close(ep->evfd);
  pthread_cond_destroy(&ep->cv);
  pthread_mutex_destroy(&ep->lock);
  free(ep);
}

int tpx_endpoint_port(const tpx_endpoint_t *ep) { return ep ? ep->port : 0; }
const char *tpx_endpoint_name(const tpx_endpoint_t *ep) { return ep ? ep->name : ""; }
const tpx_config_t *tpx_endpoint_config(const tpx_endpoint_t *ep) { return ep ? &ep->cfg : NULL; }
const char *tpx_endpoint_transport(const tpx_endpoint_t *ep) { return ep && ep->net ? ep->net->name : ""; }

/* ---- connect / accept ---- */
static int peer_settled(tpx_endpoint_t *ep, void *arg) {
  (void)ep;
  struct tpx_peer *p = arg;
  return p->state == P_READY || p->state == P_DEAD || p->state == P_CLOSING;
}

static int connect_one(tpx_endpoint_t *ep, const char *host, int port, tpx_peer_t **out) {
  char portstr[16];
  snprintf(portstr, sizeof(portstr), "%d", port);
  struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM};
  struct addrinfo *ai = NULL;
  int g = getaddrinfo(host, portstr, &hints, &ai);
  if (g != 0 || !ai) return tpx_err(TPX_ENOENT, "tpx_connect: cannot resolve %s: %s", host, gai_strerror(g));
  int fd = socket(ai->ai_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    freeaddrinfo(ai);
    return tpx_err(TPX_ESYSTEM, "tpx_connect: socket: %s", strerror(errno));
  }
  set_nodelay(fd);
  tpx_set_reuseaddr(fd); /* its TIME_WAIT must not hold the port (common/ports.c) */
  char where[96];
  fmt_addr(ai->ai_addr, where, sizeof(where));
  int r = connect(fd, ai->ai_addr, ai->ai_addrlen);
  int e = errno;
  freeaddrinfo(ai);
  if (r != 0 && e != EINPROGRESS) {
    close(fd);
    return tpx_err(TPX_ECLOSED, "tpx_connect: %s: %s", where, strerror(e));
  }
  pthread_mutex_lock(&ep->lock);
  struct tpx_peer *p = peer_new(ep, fd, 0, where);
  if (!p) {
    pthread_mutex_unlock(&ep->lock);
    close(fd);
    return tpx_err(TPX_ENOMEM, "tpx_connect: out of memory");
  }
  ep_wake(ep);
  uint64_t deadline = tpx_now_ns() + ms_to_ns(ep->cfg.connect_timeout_ms) + 50000000ull;
  ep_wait_until(ep, peer_settled, p, deadline);
  int rc = 0;
  if (p->state != P_READY) {
    if (p->state != P_DEAD)
      peer_fail(p, TPX_ETIMEDOUT, "peer %s: connection setup not done after %d ms", p->where,
                ep->cfg.connect_timeout_ms);
    rc = tpx_err(p->err ? p->err : TPX_ECLOSED, "tpx_connect: %s", p->errmsg);
  }
  pthread_mutex_unlock(&ep->lock);
  if (rc) tpx_peer_close(p);
  else *out = p;
  return rc;
}

int tpx_connect(tpx_endpoint_t *ep, const char *host, int port, tpx_peer_t **out) {
  if (!ep || !host || !out || port <= 0 || port > 65535) return tpx_err(TPX_EINVAL, "tpx_connect: bad argument");
  *out = NULL;
  return connect_one(ep, host, port, out);
}

static int acceptq_ready(tpx_endpoint_t *ep, void *arg) {
  (void)arg;
  return ep->acceptq_n > 0;
}

int tpx_accept(tpx_endpoint_t *ep, int timeout_ms, tpx_peer_t **out) {
  if (!ep || !out) return tpx_err(TPX_EINVAL, "tpx_accept: NULL argument");
  *out = NULL;
  if (ep->listen_fd < 0) return tpx_err(TPX_EUSAGE, "tpx_accept: endpoint %s does not listen", ep->name);
  uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : tpx_now_ns() + ms_to_ns(timeout_ms);
  pthread_mutex_lock(&ep->lock);
  if (!ep->thread_on && timeout_ms == 0) (void)ep_pass(ep);
  int rc = 0;
  if (ep_wait_until(ep, acceptq_ready, NULL, deadline)) {
    struct tpx_peer *p = ep->acceptq[0];
    memmove(&ep->acceptq[0], &ep->acceptq[1], (size_t)(ep->acceptq_n - 1) * sizeof(p));
    ep->acceptq_n--;
    p->in_acceptq = 0;
    *out = p;
  } else {
    rc = tpx_err_quiet(TPX_ETIMEDOUT, "tpx_accept: no peer connected to %s within %d ms", ep->name, timeout_ms);
  }
  pthread_mutex_unlock(&ep->lock);
  return rc;
}

/* ---- connection info ---- */
/* NCCL_SOCKET_IFNAME syntax: "^a,b" excludes prefixes, "=a,b" exact names,
 * "a,b" prefixes; empty: anything but loopback and docker bridges. */
static int ifname_match(const char *spec, const char *name) {
  if (!spec || !spec[0]) return strcmp(name, "lo") != 0 && strncmp(name, "docker", 6) != 0;
  int exclude = spec[0] == '^', exact = spec[0] == '=';
  const char *s = spec + (exclude || exact);
  char buf[256];
  snprintf(buf, sizeof(buf), "%s", s);
  int hit = 0;
  for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
    if (exact ? strcmp(tok, name) == 0 : strncmp(tok, name, strlen(tok)) == 0) {
      hit = 1;
      break;
    }
  }
  return exclude ? !hit : hit;
}

int tpx_get_conn_info(tpx_endpoint_t *ep, void *buf, size_t cap, size_t *len) {
  if (!ep || !buf || !len) return tpx_err(TPX_EINVAL, "tpx_get_conn_info: NULL argument");
  if (ep->listen_fd < 0) return tpx_err(TPX_EUSAGE, "tpx_get_conn_info: endpoint %s does not listen", ep->name);
  struct conn_info ci;
  memset(&ci, 0, sizeof(ci));
  ci.uuid = ep->uuid;
  ci.gpu = ep->gpu;
  ci.port = (uint16_t)ep->port;
  snprintf(ci.name, sizeof(ci.name), "%s", ep->name);
  int wildcard = !ep->listen_host[0] || strcmp(ep->listen_host, "0.0.0.0") == 0 || strcmp(ep->listen_host, "::") == 0;
  if (!wildcard) {
    snprintf(ci.addr[ci.naddr++], CONN_ADDR_MAX, "%s", ep->listen_host);
  } else {
    struct ifaddrs *ifa = NULL;
    if (getifaddrs(&ifa) == 0) {
      for (struct ifaddrs *i = ifa; i && ci.naddr < CONN_MAX_ADDRS; i = i->ifa_next) {
        if (!i->ifa_addr || !(i->ifa_flags & IFF_UP)) continue;
        int fam = i->ifa_addr->sa_family;
        if (fam != AF_INET && !(fam == AF_INET6 && strcmp(ep->listen_host, "::") == 0)) continue;
        if (!ifname_match(ep->cfg.socket_ifname, i->ifa_name)) continue;
        char h[INET6_ADDRSTRLEN];
        const void *a = fam == AF_INET ? (const void *)&((struct sockaddr_in *)i->ifa_addr)->sin_addr
                                       : (const void *)&((struct sockaddr_in6 *)i->ifa_addr)->sin6_addr;
        if (fam == AF_INET6 && IN6_IS_ADDR_LINKLOCAL((const struct in6_addr *)a)) continue;
        inet_ntop(fam, a, h, sizeof(h));
        snprintf(ci.addr[ci.naddr++], CONN_ADDR_MAX, "%s", h);
      }
      freeifaddrs(ifa);
    }
    if (ci.naddr == 0) snprintf(ci.addr[ci.naddr++], CONN_ADDR_MAX, "127.0.0.1");
  }
  return conn_info_encode(&ci, buf, cap, len);
}

int tpx_load_remote_conn_info(tpx_endpoint_t *ep, const void *blob, size_t len, tpx_peer_t **out) {
  if (!ep || !blob || !out) return tpx_err(TPX_EINVAL, "tpx_load_remote_conn_info: NULL argument");
  *out = NULL;
  struct conn_info ci;
  int rc = conn_info_decode(blob, len, &ci);
  if (rc) return rc;
  for (int i = 0; i < ci.naddr; i++) {
    rc = connect_one(ep, ci.addr[i], ci.port, out);
    if (rc == 0) {
      if ((*out)->uuid != ci.uuid) {
        tpx_peer_close(*out);
        *out = NULL;
        rc = tpx_err(TPX_ENOENT, "tpx_load_remote_conn_info: %s:%u is not endpoint %s", ci.addr[i], ci.port, ci.name);
        continue;
      }
      return 0;
    }
  }
  return rc;
}

/* ---- notifications ---- */
void ep_deliver_notif(tpx_endpoint_t *ep, struct tpx_peer *p, const uint8_t *msg, uint32_t len) {
  struct notif_node *n = malloc(sizeof(*n));
  if (!n) {
    TPX_ERROR("endpoint %s: out of memory: notification from %s lost", ep->name, p->where);
    return;
  }
  n->next = NULL;
  n->n.peer = p;
  snprintf(n->n.peer_name, sizeof(n->n.peer_name), "%s", p->name);
  n->n.len = len;
  if (len) memcpy(n->n.msg, msg, len);
  if (ep->notif_tail) ep->notif_tail->next = n;
  else ep->notif_head = n;
  ep->notif_tail = n;
  ep->notif_n++;
  ep_signal(ep);
}

int tpx_notify(tpx_peer_t *p, const void *msg, size_t len) {
  if (!p || (len && !msg)) return tpx_err(TPX_EINVAL, "tpx_notify: NULL argument");
  if (len > TPX_NOTIF_MAX) return tpx_err(TPX_EINVAL, "tpx_notify: %zu bytes exceeds %d", len, TPX_NOTIF_MAX);
  tpx_endpoint_t *ep = p->ep;
  pthread_mutex_lock(&ep->lock);
  int rc = p->state == P_READY ? 0
           : tpx_err(p->err ? p->err : TPX_EUSAGE, "tpx_notify: peer %s is not connected: %s", p->where, p->errmsg);
  if (rc == 0) {
    rc = peer_send_frame_done(p, wire_put_notif(&p->out, msg, (uint32_t)len));
    if (rc) rc = tpx_err(rc, "tpx_notify: peer %s: %s", p->where, p->errmsg);
  }
  pthread_mutex_unlock(&ep->lock);
  if (rc == 0) ep_wake(ep);
  return rc;
}

static int pop_notif(tpx_endpoint_t *ep, tpx_notif_t *out) {
  struct notif_node *n = ep->notif_head;
  if (!n) return 0;
  ep->notif_head = n->next;
  if (!ep->notif_head) ep->notif_tail = NULL;
  ep->notif_n--;
  memcpy(out, &n->n, offsetof(tpx_notif_t, msg) + n->n.len);
  free(n);
  return 1;
}

int tpx_get_notif(tpx_endpoint_t *ep, tpx_notif_t *out) {
  if (!ep || !out) return tpx_err(TPX_EINVAL, "tpx_get_notif: NULL argument");
  pthread_mutex_lock(&ep->lock);
  if (!ep->thread_on && !ep->notif_head) (void)ep_pass(ep);
  int r = pop_notif(ep, out);
  pthread_mutex_unlock(&ep->lock);
  return r;
}

static int notif_ready(tpx_endpoint_t *ep, void *arg) {
  (void)arg;
  return ep->notif_head != NULL;
}

int tpx_wait_notif(tpx_endpoint_t *ep, int timeout_ms, tpx_notif_t *out) {
  if (!ep || !out) return tpx_err(TPX_EINVAL, "tpx_wait_notif: NULL argument");
  uint64_t deadline = timeout_ms < 0 ? UINT64_MAX : tpx_now_ns() + ms_to_ns(timeout_ms);
  pthread_mutex_lock(&ep->lock);
  int r = 0;
  if (ep_wait_until(ep, notif_ready, NULL, deadline)) r = pop_notif(ep, out);
  pthread_mutex_unlock(&ep->lock);
  return r;
}
