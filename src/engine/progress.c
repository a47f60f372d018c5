/* Progress (progress.h): the pass, the idle policy, the progress thread,
 * callers that drive progress while they wait, and the one wait loop. */
#define _GNU_SOURCE
#include <poll.h>
#include <stdatomic.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <sys/epoll.h>
#include <time.h>
#include <unistd.h>

#include "common/util.h"
#include "engine/abandon.h"
#include "engine/channel.h"
#include "engine/control.h"
#include "engine/dispatch.h"
#include "engine/core.h"
#include "engine/fail.h"
#include "engine/failover.h"
#include "engine/handshake.h"
#include "engine/listen.h"
#include "engine/live.h"
#include "engine/peer.h"
#include "engine/placement.h"
#include "engine/progress.h"
#include "engine/redial.h"
#include "engine/start.h"
#include "tpx/error.h"

/* Blocking waits with a progress thread spin this long before sleeping on
 * the condition variable; while they spin they drive progress themselves
 * and the progress thread stands aside. */
#define WAIT_SPIN_NS 50000ull

static int peer_pass(struct tpx_peer *p, uint64_t now) {
  int did = 0;
  if (p->state == P_CONNECTING && p->fd < 0) did += tpx__redial_step(p, tpx__now_ns()); /* after its pause */
  if (p->state == P_NET_SETUP) {
    int n = 0;
    if (tpx__handshake_step(p, &n, now) == 1) { /* frames that came during setup */
      int f = tpx__dispatch_parse(p);
      did += f < 0 ? 0 : 1 + f; /* < 0: the peer failed (a code, not a count) */
    }
    did += n;
  }
  if (p->start_head) did += tpx__start_deferred(p); /* posts that left their start to us */
  if (p->state == P_READY || p->state == P_CLOSING) {
    int r = tpx__failover_progress(p);
    if (r >= 0) { /* speeds, stalls, channels coming back */
      int t = tpx__failover_tick(p, now);
      if (t < 0) r = t;
    }
    if (r < 0) {
      tpx__peer_fail_last(p, r);
      return did + 1;
    }
    did += r;
    if (r > 0) tpx__peer_eof_progress(p); /* a closing peer's transfers still move */
    tpx__peer_check_closing(p);
  }
  return did;
}

int tpx__ep_pass(tpx_endpoint_t *ep) {
  int did = 0;
  struct epoll_event evs[64];
  int n = epoll_wait(ep->epfd, evs, 64, 0);
  for (int i = 0; i < n; i++) {
    void *ptr = evs[i].data.ptr;
    if (ptr == &ep->listen_fd) {
      did += tpx__listen_accept(ep);
    } else if (ptr == &ep->evfd) {
      uint64_t v;
      ssize_t r = read(ep->evfd, &v, sizeof(v));
      (void)r; /* only a wake-up */
    } else {
      did += tpx__dispatch_event((struct tpx_peer *)ptr, evs[i].events);
    }
  }
  uint64_t now = tpx__now_ns();
  for (struct tpx_peer *p = ep->peers; p; p = p->next) did += peer_pass(p, now);
  if (now >= ep->next_deadline_scan) {
    ep->next_deadline_scan = now + 1000000ull;
    for (struct tpx_peer *p = ep->peers; p; p = p->next) {
      tpx__peer_deadlines(p, now);
      tpx__live_step(p, now); /* after this pass read what had come */
    }
    tpx__peer_sweep(ep);
    tpx__listen_resume(ep, now);
    if (ep->nclosing) tpx__ctl_closing_step(ep, now, 0);
    if (ep->abandoned) tpx__abandon_step(ep, now);
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
 * progress itself for short answers (docs/notes/progress-thread-idle.md). */
static int few_cpus(void) {
  static _Atomic int v = -1; /* every endpoint's thread may ask first: same answer */
  int x = atomic_load_explicit(&v, memory_order_relaxed);
  if (x < 0) {
    x = tpx__cpu_count() < 4;
    atomic_store_explicit(&v, x, memory_order_relaxed);
  }
  return x;
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

/* Spin-then-block (cfg.progress_spin_us > 0): with requests in flight, keep
 * passing (a yield in between, so the transport's own threads get the CPU)
 * until spin_us passed without progress, then block until an event or
 * IDLE_NAP_MAX_NS as the nap policy does at its longest. NCCL's proxy thread
 * polls its plugin without napping while it has work; a plugin that moves
 * bytes only inside `test` (GPUDirect-TCPX: one request's control message
 * per call) may want that. Returns 1 when it handled the idle pass. */
static int idle_spin_block(tpx_endpoint_t *ep, uint64_t idle_since, unsigned seq) {
  int us = ep->cfg.progress_spin_us;
  if (us <= 0) return 0;
  if (tpx__now_ns() - idle_since < (uint64_t)us * 1000ull) sched_yield();
  else ep_sleep(ep, IDLE_NAP_MAX_NS, seq);
  return 1;
}

static void ep_idle(tpx_endpoint_t *ep, unsigned *spins, int busy) {
  unsigned seq = atomic_load(&ep->work_seq);
  ++*spins;
  if (busy) idle_busy(ep, *spins, seq, 0);
  else ep_sleep(ep, *spins < 4 ? 0 : 10000000ull, seq);
}

/* A waiter stops driving. Its passes may have taken the wake-up meant for
 * the progress thread (a post's eventfd write): with requests in flight the
 * last driver wakes it. So does a waiter that is about to sleep (`sleeps`):
 * it now needs the thread to handle the answer it waits for, which may come
 * on the control connection alone (an inline write's acknowledgement, a
 * notification), and the thread, standing aside, watches only its eventfd
 * (otherwise that answer waited for the thread's 1 ms stand-aside timeout).
 * Lock held. */
static void drive_end(tpx_endpoint_t *ep, int sleeps) {
  if (atomic_fetch_sub(&ep->drivers, 1) != 1) return;
  if (sleeps || ep_busy(ep)) tpx__ep_wake(ep);
}

static void *progress_main(void *arg) {
  tpx_endpoint_t *ep = arg;
  unsigned spins = 0;
  tpx__placement_bind_thread(ep); /* on its GPU's NUMA node, when known */
  uint64_t idle_since = 0; /* first pass without progress in a row */
  while (!atomic_load(&ep->stop)) {
    if (atomic_load(&ep->drivers) > 0) {
      /* A waiter drives progress: stand aside. Sleep on the eventfd alone,
       * not the epoll set (which would wake us for the events the waiter
       * handles), until drive_end's tpx__ep_wake or 1 ms at most. */
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
    int did = tpx__ep_pass(ep);
    int busy = ep_busy(ep);
    int timers = ep->setups > 0 || ep->nclosing > 0 || ep->accept_resume || ep->abandoned;
    for (struct tpx_peer *p = ep->peers; p && !timers; p = p->next) timers = p->active != NULL;
    pthread_mutex_unlock(&ep->lock);
    if (did) {
      spins = 0;
      continue;
    }
    if (++spins == 1) idle_since = tpx__now_ns();
    if (busy && idle_spin_block(ep, idle_since, seq)) continue;
    if (busy) idle_busy(ep, spins, seq, few_cpus());
    else ep_sleep(ep, timers ? 2000000ull : 100000000ull, seq);
  }
  return NULL;
}

int tpx__progress_thread_start(tpx_endpoint_t *ep) {
  if (pthread_create(&ep->thread, NULL, progress_main, ep) != 0) return TPX_ESYSTEM;
  ep->thread_on = 1;
  (void)pthread_setname_np(ep->thread, "tpx-progress"); /* top -H, gdb: a name only, never an error */
  return 0;
}

void tpx__progress_thread_stop(tpx_endpoint_t *ep) {
  if (!ep->thread_on) return;
  atomic_store(&ep->stop, 1);
  uint64_t one = 1;
  ssize_t r = write(ep->evfd, &one, sizeof(one));
  (void)r; /* a full eventfd wakes it too */
  pthread_join(ep->thread, NULL);
  ep->thread_on = 0;
}

/* Spin phase: drive progress ourselves (the answer is then handled by the
 * thread that needs it, with no hand-off), yielding after every pass that
 * did nothing: the thread that will answer (the peer's, in one process) may
 * share this CPU. */
static int wait_spin(tpx_endpoint_t *ep, int (*pred)(tpx_endpoint_t *, void *), void *arg, uint64_t deadline) {
  uint64_t until = tpx__now_ns() + WAIT_SPIN_NS;
  int ok = 0;
  atomic_fetch_add(&ep->drivers, 1);
  while (!ok && tpx__now_ns() < until && tpx__now_ns() < deadline) {
    int did = tpx__ep_pass(ep);
    if ((ok = pred(ep, arg)) != 0) break;
    pthread_mutex_unlock(&ep->lock);
    if (!did) sched_yield();
    pthread_mutex_lock(&ep->lock);
    ok = pred(ep, arg);
  }
  drive_end(ep, !ok);
  return ok;
}

static void cv_wait_step(tpx_endpoint_t *ep, uint64_t deadline, uint64_t now) {
  uint64_t step = deadline - now < 10000000ull ? deadline - now : 10000000ull;
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  uint64_t t = (uint64_t)ts.tv_nsec + step;
  ts.tv_sec += (time_t)(t / 1000000000ull);
  ts.tv_nsec = (long)(t % 1000000000ull);
  pthread_cond_timedwait(&ep->cv, &ep->lock, &ts);
}

int tpx__ep_wait(tpx_endpoint_t *ep, int (*pred)(tpx_endpoint_t *, void *), void *arg, uint64_t deadline) {
  unsigned spins = 0;
  if (pred(ep, arg)) return 1;
  if (ep->thread_on && wait_spin(ep, pred, arg, deadline)) return 1;
  if (ep->thread_on) ep->waiters++;
  int ok;
  while (!(ok = pred(ep, arg))) {
    uint64_t now = tpx__now_ns();
    if (now >= deadline) break;
    if (ep->thread_on) {
      cv_wait_step(ep, deadline, now);
      continue;
    }
    int did = tpx__ep_pass(ep);
    if ((ok = pred(ep, arg)) != 0) break;
    int busy = ep_busy(ep) || ep->setups > 0;
    pthread_mutex_unlock(&ep->lock);
    if (did) spins = 0;
    else ep_idle(ep, &spins, busy);
    pthread_mutex_lock(&ep->lock);
  }
  if (ep->thread_on) ep->waiters--;
  return ok;
}
