#define _GNU_SOURCE
#include "common/timeline.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "common/log.h"

#define TL_CAP (1u << 21) /* 2M events, 96 MiB: about 60 transfers of 64 MiB with both sides' socket events */

struct tl_ev {
  uint64_t t;
  int32_t kind, tid;
  int64_t a;
  uint64_t b, c, d;
};

int tpx__tl_on;
static struct tl_ev *evs;
static _Atomic uint64_t n_ev;
static char out_path[300];
static pthread_mutex_t flush_mu = PTHREAD_MUTEX_INITIALIZER;
static __thread int32_t my_tid;

static const char *names[TL_KINDS] = {"op_post",    "op_done",    "target",  "send_post", "send_done",
                                      "recv_post",  "recv_done",  "landed",  "d2h_start", "d2h_done",
                                      "h2d_start",  "h2d_done",   "sock_tx", "sock_rx", "sock_kick"};

static void at_exit(void) { tpx__tl_flush(); }

void tpx__tl_open(const char *path) {
  if (tpx__tl_on || !path || !path[0]) return;
  snprintf(out_path, sizeof out_path, "%s.%d", path, (int)getpid());
  FILE *f = fopen(out_path, "w"); /* said now, not after the run */
  if (!f || fclose(f)) {
    TPX_WARN("TPX_TIMELINE: cannot write %s; timeline off", out_path);
    return;
  }
  evs = calloc(TL_CAP, sizeof *evs);
  if (!evs) {
    TPX_WARN("TPX_TIMELINE: no memory for %u events; timeline off", TL_CAP);
    return;
  }
  if (atexit(at_exit)) TPX_WARN("TPX_TIMELINE: atexit failed; call tpx__tl_flush");
  tpx__tl_on = 1;
  TPX_INFO("timeline: recording up to %u events into %s", TL_CAP, out_path);
}

void tpx__tl_rec(int kind, int64_t a, uint64_t b, uint64_t c, uint64_t d) {
  uint64_t i = atomic_fetch_add_explicit(&n_ev, 1, memory_order_relaxed);
  if (i >= TL_CAP) return;
  if (!my_tid) my_tid = (int32_t)syscall(SYS_gettid);
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  evs[i] = (struct tl_ev){(uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec, kind, my_tid, a, b, c, d};
}

void tpx__tl_flush(void) {
  if (!tpx__tl_on) return;
  pthread_mutex_lock(&flush_mu);
  uint64_t n = atomic_exchange(&n_ev, 0);
  FILE *f = fopen(out_path, "a");
  if (!f) {
    TPX_WARN("TPX_TIMELINE: cannot write %s", out_path);
  } else {
    fprintf(f, "# tpx timeline 1: pid %d, CLOCK_MONOTONIC ns; t kind tid a b c d; %llu events", (int)getpid(),
            (unsigned long long)n);
    if (n > TL_CAP) fprintf(f, " (%llu dropped: the array was full)", (unsigned long long)(n - TL_CAP));
    fputc('\n', f);
    for (uint64_t i = 0; i < n && i < TL_CAP; i++) {
      const struct tl_ev *e = &evs[i];
      if (e->t == 0) continue; /* a slot taken while flushing, not yet written */
      fprintf(f, "%llu %s %d %lld %llu %llu %llu\n", (unsigned long long)e->t,
              e->kind >= 0 && e->kind < TL_KINDS ? names[e->kind] : "?", e->tid, (long long)e->a,
              (unsigned long long)e->b, (unsigned long long)e->c, (unsigned long long)e->d);
    }
    memset(evs, 0, (n < TL_CAP ? n : TL_CAP) * sizeof *evs);
    if (fclose(f)) TPX_WARN("TPX_TIMELINE: writing %s failed", out_path);
  }
  pthread_mutex_unlock(&flush_mu);
}
