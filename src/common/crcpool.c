/* CRC-32C worker threads (crcpool.h). The slots are a ring in ticket order:
 * the queue is [head, tail) of it, workers take from head. */
#include "common/crcpool.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "common/crc32c.h"
#include "common/error.h"

#define SLOTS 1024u
#define MAX_THREADS 16

enum { J_FREE = 0, J_QUEUED, J_RUNNING, J_DONE, J_CANCELLED };

struct job {
  _Atomic int state;
  uint64_t ticket;
  const void *data;
  uint64_t len;
  struct iovec *iov; /* nv pieces, owned */
  int nv;
  uint32_t crc;
};

struct tpx_crcpool {
  pthread_mutex_t mu;
  pthread_cond_t work, done;
  struct job job[SLOTS];
  uint64_t head, tail; /* queued tickets: [head, tail) */
  int stop, nthreads, waiters;
  void (*done_fn)(void *);
  void *done_arg;
  pthread_t th[MAX_THREADS];
};

static void *worker(void *arg) {
  tpx_crcpool_t *p = arg;
  pthread_mutex_lock(&p->mu);
  for (;;) {
    while (!p->stop && p->head == p->tail) pthread_cond_wait(&p->work, &p->mu);
    if (p->head == p->tail) break; /* stopping, nothing queued */
    struct job *j = &p->job[p->head++ % SLOTS];
    if (atomic_load(&j->state) == J_CANCELLED) {
      free(j->iov);
      j->iov = NULL;
      atomic_store(&j->state, J_FREE);
      continue;
    }
    atomic_store(&j->state, J_RUNNING);
    pthread_mutex_unlock(&p->mu);
    j->crc = tpx__crc32c_pieces(j->data, j->len, j->iov, j->nv);
    pthread_mutex_lock(&p->mu);
    atomic_store_explicit(&j->state, J_DONE, memory_order_release);
    if (p->waiters) pthread_cond_broadcast(&p->done);
    if (p->done_fn) p->done_fn(p->done_arg);
  }
  pthread_mutex_unlock(&p->mu);
  return NULL;
}

void tpx__crcpool_destroy(tpx_crcpool_t *p) {
  if (!p) return;
  pthread_mutex_lock(&p->mu);
  p->stop = 1;
  for (uint64_t t = p->head; t < p->tail; t++) /* nobody waits for these any more */
    atomic_store(&p->job[t % SLOTS].state, J_CANCELLED);
  pthread_cond_broadcast(&p->work);
  pthread_mutex_unlock(&p->mu);
  for (int i = 0; i < p->nthreads; i++) pthread_join(p->th[i], NULL);
  for (uint32_t i = 0; i < SLOTS; i++) free(p->job[i].iov);
  pthread_cond_destroy(&p->work);
  pthread_cond_destroy(&p->done);
  pthread_mutex_destroy(&p->mu);
  free(p);
}

int tpx__crcpool_create(int threads, void (*done)(void *), void *arg, tpx_crcpool_t **out) {
  *out = NULL;
  tpx_crcpool_t *p = calloc(1, sizeof(*p));
  if (!p) return tpx_err_quiet(TPX_ENOMEM, "checksum threads: out of memory");
  p->done_fn = done;
  p->done_arg = arg;
  pthread_mutex_init(&p->mu, NULL);
  pthread_cond_init(&p->work, NULL);
  pthread_cond_init(&p->done, NULL);
  if (threads < 1) threads = 1;
  if (threads > MAX_THREADS) threads = MAX_THREADS;
  for (int i = 0; i < threads; i++) {
    int e = pthread_create(&p->th[i], NULL, worker, p);
    if (e) {
      tpx__crcpool_destroy(p);
      return tpx_err_quiet(TPX_ESYSTEM, "checksum threads: pthread_create: %s", strerror(e));
    }
    p->nthreads++;
  }
  *out = p;
  return 0;
}

int tpx__crcpool_start(tpx_crcpool_t *p, const void *data, uint64_t len, const struct iovec *iov, int nv,
                       uint64_t *ticket) {
  pthread_mutex_lock(&p->mu);
  uint64_t t = p->tail;
  struct job *j = &p->job[t % SLOTS];
  if (atomic_load(&j->state) != J_FREE) {
    pthread_mutex_unlock(&p->mu);
    return TPX_EAGAIN;
  }
  free(j->iov);
  j->iov = NULL;
  if (nv) {
    j->iov = malloc((size_t)nv * sizeof(*iov));
    if (!j->iov) {
      pthread_mutex_unlock(&p->mu);
      return TPX_EAGAIN; /* summed in place */
    }
    memcpy(j->iov, iov, (size_t)nv * sizeof(*iov));
  }
  j->nv = nv;
  j->data = data;
  j->len = len;
  j->ticket = t;
  atomic_store(&j->state, J_QUEUED);
  p->tail++;
  pthread_cond_signal(&p->work);
  pthread_mutex_unlock(&p->mu);
  *ticket = t;
  return 0;
}

int tpx__crcpool_poll(tpx_crcpool_t *p, uint64_t ticket, uint32_t *crc) {
  struct job *j = &p->job[ticket % SLOTS];
  if (j->ticket != ticket || atomic_load_explicit(&j->state, memory_order_acquire) != J_DONE) return 0;
  *crc = j->crc;
  atomic_store(&j->state, J_FREE);
  return 1;
}

void tpx__crcpool_drop(tpx_crcpool_t *p, uint64_t ticket) {
  struct job *j = &p->job[ticket % SLOTS];
  pthread_mutex_lock(&p->mu);
  if (j->ticket == ticket) {
    if (atomic_load(&j->state) == J_QUEUED) atomic_store(&j->state, J_CANCELLED);
    p->waiters++;
    while (atomic_load(&j->state) == J_RUNNING) pthread_cond_wait(&p->done, &p->mu); /* it reads the bytes */
    p->waiters--;
    if (atomic_load(&j->state) == J_DONE) atomic_store(&j->state, J_FREE);
  }
  pthread_mutex_unlock(&p->mu);
}
