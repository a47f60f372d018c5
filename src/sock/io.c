/* The I/O thread pool of one device: a few threads shared by all its comms.
 *
 * Each thread owns an epoll set (sockets registered edge-triggered, so an idle
 * socket with unread bytes does not wake anyone) and an eventfd. Work reaches
 * a thread three ways: an epoll event on one of its sockets, a kick (another
 * thread posted work for one of its sockets: lock-free push onto the thread's
 * kick stack + an eventfd write if the thread sleeps), or a command (detach).
 * Runnable sockets sit in a run queue; each visit does a bounded amount of
 * I/O so one busy socket cannot starve the others of its thread. After the
 * last runnable socket the thread spins briefly (TPX_SOCK_SPIN_NS) and then
 * blocks in epoll_wait: nothing spins on an idle comm. */
#define _GNU_SOURCE
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "common/error.h"
#include "common/log.h"
#include "common/timeline.h"
#include "common/util.h"
#include "sock/sock.h"

/* Bounded spin after activity before sleeping: catches the next post of a
 * back-to-back stream without a wake-up (several us each), costs at most this
 * much CPU per burst. Only when the process has CPUs to spare: on a small
 * machine spinning threads take the cores the working ones need. */
#define TPX_SOCK_SPIN_NS 20000ull
#define TPX_SOCK_SPIN_MIN_CPUS_PER_THREAD 4
#define TPX_SOCK_EVENTS 64
/* Pair the two ends of in-process comms below this many CPUs. */
#define TPX_SOCK_PAIR_MAX_CPUS 4

struct detach_cmd {
  struct detach_cmd *next;
  tpx_sock_conn_t *conn;
  int done; /* under pool->mu */
};

typedef struct tpx_sock_io {
  tpx_sock_pool_t *pool;
  int index;
  pthread_t tid;
  int started;
  int epfd;
  int evfd;
  _Atomic int sleeping;
  _Atomic int stop;
  _Atomic(tpx_sock_conn_t *) kicks;
  pthread_mutex_t cmd_mu;
  struct detach_cmd *cmds;
  _Atomic int cmd_pending;
  tpx_sock_conn_t *rq_head, *rq_tail; /* owner only */
  int load;                           /* weight of the sockets placed here (pool->mu) */
  int data[2];                        /* data sockets placed here, by kind (send, recv) (pool->mu) */
  void *scratch;
} tpx_sock_io_t;

static void wake(tpx_sock_io_t *t) {
  if (atomic_exchange(&t->sleeping, 0)) {
    uint64_t one = 1;
    ssize_t n;
    do
      n = write(t->evfd, &one, sizeof(one));
    while (n < 0 && errno == EINTR);
    /* EAGAIN means the counter is already non-zero: the thread will wake. */
  }
}

void tpx__sock_io_kick(tpx_sock_conn_t *c) {
  tpx_sock_io_t *t = c->thr;
  if (atomic_exchange(&c->kicked, 1)) return; /* already queued */
  TPX_TL(TL_SOCK_KICK, c->fd, 0, 0, 0);
  tpx_sock_conn_t *head = atomic_load(&t->kicks);
  do
    c->kick_next = head;
  while (!atomic_compare_exchange_weak(&t->kicks, &head, c));
  wake(t);
}

static void rq_push(tpx_sock_io_t *t, tpx_sock_conn_t *c) {
  if (c->in_rq) return;
  c->in_rq = 1;
  c->rq_next = NULL;
  c->rq_prev = t->rq_tail;
  if (t->rq_tail)
    t->rq_tail->rq_next = c;
  else
    t->rq_head = c;
  t->rq_tail = c;
}

static void rq_remove(tpx_sock_io_t *t, tpx_sock_conn_t *c) {
  if (!c->in_rq) return;
  if (c->rq_prev)
    c->rq_prev->rq_next = c->rq_next;
  else
    t->rq_head = c->rq_next;
  if (c->rq_next)
    c->rq_next->rq_prev = c->rq_prev;
  else
    t->rq_tail = c->rq_prev;
  c->in_rq = 0;
  c->rq_next = c->rq_prev = NULL;
}

/* Move kicked conns to the run queue. Returns how many. */
static int drain_kicks(tpx_sock_io_t *t) {
  tpx_sock_conn_t *c = atomic_exchange(&t->kicks, NULL);
  int n = 0;
  while (c) {
    tpx_sock_conn_t *next = c->kick_next;
    /* Clear before running: a kick that lands during the run queues it again.
     * An exchange, not a store: it reads the flag a kicker left set and so
     * acquires that kicker's published work (a plain store would not). */
    (void)atomic_exchange(&c->kicked, 0);
    rq_push(t, c);
    c = next;
    n++;
  }
  return n;
}

static void run_cmds(tpx_sock_io_t *t) {
  if (!atomic_exchange(&t->cmd_pending, 0)) return;
  pthread_mutex_lock(&t->cmd_mu);
  struct detach_cmd *list = t->cmds;
  t->cmds = NULL;
  pthread_mutex_unlock(&t->cmd_mu);
  if (list == NULL) return;
  /* Kicks for a conn being detached must leave the stack before it goes. */
  drain_kicks(t);
  for (struct detach_cmd *d = list; d; d = d->next) {
    rq_remove(t, d->conn);
    if (epoll_ctl(t->epfd, EPOLL_CTL_DEL, d->conn->fd, NULL) != 0 && errno != ENOENT &&
        errno != EBADF)
      TPX_DEBUG("sock io %s/%d: epoll DEL fd %d: %s", t->pool->devname, t->index, d->conn->fd,
                strerror(errno));
  }
  pthread_mutex_lock(&t->pool->mu);
  for (struct detach_cmd *d = list, *next; d; d = next) {
    next = d->next; /* d lives on the waiter's stack: read before marking done */
    d->done = 1;
  }
  pthread_cond_broadcast(&t->pool->cv);
  pthread_mutex_unlock(&t->pool->mu);
}

static void handle_events(tpx_sock_io_t *t, struct epoll_event *ev, int n) {
  for (int i = 0; i < n; i++) {
    tpx_sock_conn_t *c = ev[i].data.ptr;
    if (c == NULL) {
      uint64_t v;
      while (read(t->evfd, &v, sizeof(v)) < 0 && errno == EINTR) {
      }
      continue;
    }
    uint32_t e = ev[i].events;
    if (e & (EPOLLRDHUP | EPOLLHUP | EPOLLERR)) {
      if (!atomic_exchange(&c->comm->peer_closed, 1))
        TPX_DEBUG("sock io %s/%d: comm %s socket %d: peer closed or reset (events 0x%x)",
                  t->pool->devname, t->index, c->comm->peer, c->index, e);
    }
    rq_push(t, c);
  }
}

static void *io_main(void *arg) {
  tpx_sock_io_t *t = arg;
  struct epoll_event ev[TPX_SOCK_EVENTS];
  uint64_t spin_until = 0;
  while (!atomic_load(&t->stop)) {
    int work = drain_kicks(t);
    run_cmds(t);
    /* One pass over the run queue; conns that used up their budget go to the
     * back, so every runnable conn gets a turn per pass. */
    tpx_sock_conn_t *last = t->rq_tail;
    while (t->rq_head) {
      tpx_sock_conn_t *c = t->rq_head;
      rq_remove(t, c);
      if (c->progress(c, t->scratch)) rq_push(t, c);
      work = 1;
      if (c == last) break;
    }
    int timeout = 0;
    if (t->rq_head == NULL && atomic_load(&t->kicks) == NULL && !atomic_load(&t->cmd_pending)) {
      uint64_t now = tpx__now_ns();
      if (work) spin_until = now + t->pool->spin_ns;
      if (now >= spin_until) {
        /* Sleep protocol: announce, then re-check; a kicker that pushes after
         * our check sees sleeping == 1 and writes the eventfd. */
        atomic_store(&t->sleeping, 1);
        if (atomic_load(&t->kicks) == NULL && !atomic_load(&t->cmd_pending) &&
            !atomic_load(&t->stop))
          timeout = -1;
        else
          atomic_store(&t->sleeping, 0);
      }
    }
    int n = epoll_wait(t->epfd, ev, TPX_SOCK_EVENTS, timeout);
    atomic_store(&t->sleeping, 0);
    if (n < 0) {
      if (errno != EINTR)
        TPX_WARN("sock io %s/%d: epoll_wait: %s", t->pool->devname, t->index, strerror(errno));
      continue;
    }
    if (n > 0) handle_events(t, ev, n);
  }
  return NULL;
}

int tpx__sock_pool_create(const char *devname, int nthreads, tpx_sock_pool_t **out) {
  *out = NULL;
  if (nthreads < 1) nthreads = 1;
  if (nthreads > TPX_SOCK_MAX_THREADS) nthreads = TPX_SOCK_MAX_THREADS;
  tpx_sock_pool_t *p = calloc(1, sizeof(*p));
  if (p == NULL) return tpx_err_quiet(TPX_ENOMEM, "sock pool %s: out of memory", devname);
  p->thr = calloc((size_t)nthreads, sizeof(*p->thr));
  if (p->thr == NULL) {
    free(p);
    return tpx_err_quiet(TPX_ENOMEM, "sock pool %s: out of memory", devname);
  }
  snprintf(p->devname, sizeof(p->devname), "%s", devname);
  int ncpu = tpx__cpu_count();
  p->spin_ns = ncpu >= TPX_SOCK_SPIN_MIN_CPUS_PER_THREAD * nthreads ? TPX_SOCK_SPIN_NS : 0;
  p->pair = ncpu < TPX_SOCK_PAIR_MAX_CPUS;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->cv, NULL);
  int rc = 0;
  for (int i = 0; i < nthreads; i++) {
    tpx_sock_io_t *t = &p->thr[i];
    t->pool = p;
    t->index = i;
    t->epfd = t->evfd = -1;
    pthread_mutex_init(&t->cmd_mu, NULL);
    p->nthreads = i + 1;
    t->scratch = malloc(TPX_SOCK_SCRATCH);
    t->epfd = epoll_create1(EPOLL_CLOEXEC);
    t->evfd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
    if (t->scratch == NULL || t->epfd < 0 || t->evfd < 0) {
      rc = tpx_err_quiet(TPX_ESYSTEM, "sock pool %s: thread %d setup: %s", devname, i, strerror(errno));
      break;
    }
    struct epoll_event ev = {.events = EPOLLIN, .data.ptr = NULL};
    if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, t->evfd, &ev) != 0) {
      rc = tpx_err_quiet(TPX_ESYSTEM, "sock pool %s: epoll add eventfd: %s", devname, strerror(errno));
      break;
    }
    int e = pthread_create(&t->tid, NULL, io_main, t);
    if (e != 0) {
      rc = tpx_err_quiet(TPX_ESYSTEM, "sock pool %s: pthread_create: %s", devname, strerror(e));
      break;
    }
    t->started = 1;
    char name[16];
    snprintf(name, sizeof(name), "tpx-io-%.5s-%d", devname, i % 100);
    pthread_setname_np(t->tid, name);
  }
  if (rc != 0) {
    tpx__sock_pool_destroy(p);
    return rc;
  }
  TPX_DEBUG("sock pool %s: %d I/O threads, %llu ns spin (%d CPUs)", devname, nthreads,
            (unsigned long long)p->spin_ns, ncpu);
  *out = p;
  return 0;
}

void tpx__sock_pool_destroy(tpx_sock_pool_t *p) {
  if (p == NULL) return;
  for (int i = 0; i < p->nthreads; i++) {
    tpx_sock_io_t *t = &p->thr[i];
    atomic_store(&t->stop, 1);
    if (t->started) {
      atomic_store(&t->sleeping, 1);
      wake(t);
    }
  }
  for (int i = 0; i < p->nthreads; i++) {
    tpx_sock_io_t *t = &p->thr[i];
    if (t->started) pthread_join(t->tid, NULL);
    if (t->epfd >= 0) close(t->epfd);
    if (t->evfd >= 0) close(t->evfd);
    free(t->scratch);
    pthread_mutex_destroy(&t->cmd_mu);
  }
  pthread_mutex_destroy(&p->mu);
  pthread_cond_destroy(&p->cv);
  free(p->thr);
  free(p);
}

/* Placement (p->mu held): a data socket goes to the thread with the fewest
 * data sockets of its kind, then the least load (data sockets weigh
 * TPX_SOCK_W_DATA, socket 0 TPX_SOCK_W_CTRL), ties broken from a rotating
 * start. A transfer in one direction keeps the sockets of one kind busy, so
 * spreading each kind on its own keeps two busy sockets off one thread (by
 * load alone, an engine's idle receive sockets and busy send sockets mixed:
 * two sends shared a thread while another thread had none, and their parts
 * went out one after the other). A comm's data sockets land on different
 * threads, and with more threads than one comm's sockets the two ends of a
 * loopback pair in one process do not share threads. */
static int data_kind(const tpx_sock_comm_t *m, int i) { return i == 0 ? -1 : m->kind == TPX_SK_SEND ? 0 : 1; }

/* Count socket i of m on thread t (sign 1) or take it off (-1); p->mu held. */
static void weigh(tpx_sock_io_t *t, const tpx_sock_comm_t *m, int i, int sign) {
  t->load += sign * (i == 0 ? TPX_SOCK_W_CTRL : TPX_SOCK_W_DATA);
  if (data_kind(m, i) >= 0) t->data[data_kind(m, i)] += sign;
}

static tpx_sock_io_t *pick_locked(tpx_sock_pool_t *p, int kind) {
  unsigned start = p->next++;
  int best = -1;
  for (int k = 0; k < p->nthreads; k++) {
    int i = (int)((start + (unsigned)k) % (unsigned)p->nthreads);
    if (best < 0) {
      best = i;
      continue;
    }
    const tpx_sock_io_t *a = &p->thr[i], *b = &p->thr[best];
    if (kind >= 0 && a->data[kind] != b->data[kind]) {
      if (a->data[kind] < b->data[kind]) best = i;
    } else if (a->load < b->load) {
      best = i;
    }
  }
  return &p->thr[best];
}

/* With few CPUs (p->pair), the two ends of a comm whose peer is in this
 * process (a loopback pair: same comm id, other kind) share threads, socket
 * by socket: the thread that sends a part then reads it while it is still in
 * its core's cache, and no other thread has to be woken for it
 * (docs/notes/transport-defaults.md). With many CPUs the two ends keep
 * separate threads: their copies run on two cores at once. */
void tpx__sock_pool_place(tpx_sock_pool_t *p, tpx_sock_comm_t *m) {
  pthread_mutex_lock(&p->mu);
  tpx_sock_comm_t *peer = NULL;
  if (p->pair)
    for (tpx_sock_comm_t *o = p->comms; o != NULL; o = o->pool_next)
      if (o->comm_id == m->comm_id && o->kind != m->kind && o->nsocks == m->nsocks) {
        peer = o;
        break;
      }
  for (int i = 0; i <= m->nsocks; i++) {
    m->conns[i].placed = peer != NULL ? peer->conns[i].placed : pick_locked(p, data_kind(m, i));
    weigh(m->conns[i].placed, m, i, 1);
  }
  m->pool_prev = NULL;
  m->pool_next = p->comms;
  if (p->comms) p->comms->pool_prev = m;
  p->comms = m;
  m->listed = 1;
  pthread_mutex_unlock(&p->mu);
}

void tpx__sock_pool_forget(tpx_sock_pool_t *p, tpx_sock_comm_t *m) {
  pthread_mutex_lock(&p->mu);
  for (int i = 0; i <= m->nsocks; i++)
    if (m->conns[i].placed) weigh(m->conns[i].placed, m, i, -1);
  if (m->listed) {
    if (m->pool_prev) m->pool_prev->pool_next = m->pool_next;
    else p->comms = m->pool_next;
    if (m->pool_next) m->pool_next->pool_prev = m->pool_prev;
    m->listed = 0;
  }
  pthread_mutex_unlock(&p->mu);
}

int tpx__sock_io_attach(tpx_sock_io_t *t, tpx_sock_conn_t *c) {
  c->thr = t;
  /* Receivers only read; senders only write (the peer never sends on them,
   * see wire.h), so each waits for the one edge it needs. RDHUP/HUP/ERR
   * report a peer close on idle sockets too. */
  uint32_t dir = c->comm->kind == TPX_SK_SEND ? EPOLLOUT : EPOLLIN;
  struct epoll_event ev = {.events = dir | EPOLLRDHUP | EPOLLET, .data.ptr = c};
  if (epoll_ctl(t->epfd, EPOLL_CTL_ADD, c->fd, &ev) != 0)
    return tpx_err_quiet(TPX_ESYSTEM, "sock io %s/%d: epoll add fd %d: %s", t->pool->devname, t->index,
                   c->fd, strerror(errno));
  tpx__sock_io_kick(c);
  return 0;
}

void tpx__sock_io_detach(tpx_sock_conn_t **cs, int n) {
  if (n <= 0) return;
  struct detach_cmd stack_cmds[8];
  struct detach_cmd *cmds = n <= 8 ? stack_cmds : calloc((size_t)n, sizeof(*cmds));
  if (cmds == NULL) {
    /* No memory for the batch: detach one at a time. */
    for (int i = 0; i < n; i++)
      tpx__sock_io_detach(&cs[i], 1);
    return;
  }
  tpx_sock_pool_t *p = NULL;
  int used = 0;
  for (int i = 0; i < n; i++) {
    tpx_sock_io_t *t = cs[i]->thr;
    if (t == NULL) continue; /* never attached */
    p = t->pool;
    struct detach_cmd *d = &cmds[used++];
    d->conn = cs[i];
    d->done = 0;
    pthread_mutex_lock(&t->cmd_mu);
    d->next = t->cmds;
    t->cmds = d;
    pthread_mutex_unlock(&t->cmd_mu);
    atomic_store(&t->cmd_pending, 1);
    wake(t);
  }
  if (p != NULL) {
    pthread_mutex_lock(&p->mu);
    for (int i = 0; i < used; i++)
      while (!cmds[i].done)
        pthread_cond_wait(&p->cv, &p->mu);
    pthread_mutex_unlock(&p->mu);
  }
  for (int i = 0; i < n; i++)
    cs[i]->thr = NULL;
  if (cmds != stack_cmds) free(cmds);
}

/* ---- a device's pool, shared by its comms ---- */

int tpx__sock_pool_get(tpx_sock_net_t *sn, int dev, tpx_sock_pool_t **out) {
  tpx_sock_dev_t *d = &sn->devs[dev];
  int rc = 0;
  pthread_mutex_lock(&d->pool_mu);
  if (d->pool == NULL) rc = tpx__sock_pool_create(d->name, sn->cfg.nthreads, &d->pool);
  if (rc == 0) d->pool_refs++;
  *out = d->pool;
  pthread_mutex_unlock(&d->pool_mu);
  return rc;
}

void tpx__sock_pool_put(tpx_sock_net_t *sn, int dev) {
  tpx_sock_dev_t *d = &sn->devs[dev];
  tpx_sock_pool_t *dead = NULL;
  pthread_mutex_lock(&d->pool_mu);
  /* The last comm takes the threads with it: an idle net holds no threads
   * or descriptors. */
  if (--d->pool_refs == 0) {
    dead = d->pool;
    d->pool = NULL;
  }
  pthread_mutex_unlock(&d->pool_mu);
  tpx__sock_pool_destroy(dead);
}
