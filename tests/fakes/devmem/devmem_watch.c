/* The devmem stand-in's log (DEVMEM_STANDIN_LOG), its stacks on a crash,
 * and the watch on its own driver calls. */
#include "devmem_standin.h"

/* DEVMEM_STANDIN_LOG: 1 notes, 2 also a line per devmem receive, send and
 * token return. */
int dm_log_level(void) {
  static int on = -1;
  if (on < 0) on = getenv("DEVMEM_STANDIN_LOG") ? atoi(getenv("DEVMEM_STANDIN_LOG")) : 0;
  return on;
}


void dm_note(const char *fmt, ...) {
  if (dm_log_level() < 1) return;
  va_list ap;
  va_start(ap, fmt);
  fputs("devmem-standin: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
}

/* DEVMEM_STANDIN_LOG=1: a crash prints its stack first (GPU machines have
 * no debugger). */
static void on_crash(int sig) {
  void *frames[48];
  int n = backtrace(frames, 48);
  static const char msg[] = "devmem-standin: fatal signal, stack:\n";
  if (write(2, msg, sizeof(msg) - 1) < 0) n = 0;
  backtrace_symbols_fd(frames, n, 2);
  signal(sig, SIG_DFL);
  raise(sig);
}

__attribute__((constructor)) static void crash_stacks(void) {
  const char *v = getenv("DEVMEM_STANDIN_LOG");
  if (v && v[0] == '1') {
    signal(SIGSEGV, on_crash);
    signal(SIGBUS, on_crash);
  }
}

/* ---- a watch on our own driver calls ---- */
/* With DEVMEM_STANDIN_LOG set, a driver call of ours still running after
 * 3 s is named once, with its thread: a call that waits for the device
 * while a kernel waits for the network (NCCL's does) stalls the plugin. */
#define WATCH_SLOTS 64
static struct {
  _Atomic int used;
  const char *what;
  size_t bytes;
  pid_t tid;
  uint64_t since_ns;
  int said;
} watch[WATCH_SLOTS];

uint64_t dm_mono_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* What the copies cost, said with DEVMEM_STANDIN_LOG every 20 s while it
 * changes and at exit: [0] out of GPU memory (sends), [1] into it
 * (receives). */
_Atomic uint64_t dm_copy_calls[2], dm_copy_runs[2], dm_copy_bytes[2], dm_copy_ns[2];

static void copy_totals(void) {
  for (int to_gpu = 1; to_gpu >= 0; to_gpu--)
    if (dm_copy_calls[to_gpu])
      dm_note("pid %d: copies %s GPU memory: %llu calls, %llu runs, %llu bytes, %.3f s (%.1f us a call)",
           (int)getpid(), to_gpu ? "into" : "out of", (unsigned long long)dm_copy_calls[to_gpu],
           (unsigned long long)dm_copy_runs[to_gpu], (unsigned long long)dm_copy_bytes[to_gpu],
           (double)dm_copy_ns[to_gpu] / 1e9, (double)dm_copy_ns[to_gpu] / 1e3 / (double)dm_copy_calls[to_gpu]);
}

__attribute__((destructor)) static void copy_totals_at_exit(void) { copy_totals(); }

static void *watch_main(void *arg) {
  (void)arg;
  uint64_t said_calls = 0;
  for (unsigned tick = 1;; tick++) {
    sleep(1);
    uint64_t now = dm_mono_ns(), calls = dm_copy_calls[0] + dm_copy_calls[1];
    if (tick % 20 == 0 && calls != said_calls) {
      said_calls = calls;
      copy_totals();
    }
    for (int i = 0; i < WATCH_SLOTS; i++)
      if (atomic_load(&watch[i].used) == 2 && !watch[i].said && now - watch[i].since_ns > 3000000000ull) {
        watch[i].said = 1;
        dm_note("thread %d: %s (%zu bytes) still running after %.1f s", (int)watch[i].tid, watch[i].what,
             watch[i].bytes, (double)(now - watch[i].since_ns) / 1e9);
      }
  }
  return NULL;
}

/* A thread nobody joins (it runs until the process ends, or ends itself). 0 or -1. */
int dm_spawn_detached(void *(*fn)(void *), void *arg) {
  pthread_t t;
  pthread_attr_t at;
  if (pthread_attr_init(&at) != 0) return -1;
  pthread_attr_setdetachstate(&at, PTHREAD_CREATE_DETACHED);
  int rc = pthread_create(&t, &at, fn, arg);
  pthread_attr_destroy(&at);
  return rc == 0 ? 0 : -1;
}

static int watch_on;
static void watch_start(void) { watch_on = dm_spawn_detached(watch_main, NULL) == 0; }

/* A slot for a call about to be made; -1 when not watching. */
int dm_watch_begin(const char *what, size_t bytes) {
  static pthread_once_t once = PTHREAD_ONCE_INIT;
  if (dm_log_level() < 1) return -1;
  pthread_once(&once, watch_start);
  if (!watch_on) return -1;
  for (int i = 0; i < WATCH_SLOTS; i++) {
    int free_ = 0;
    if (atomic_compare_exchange_strong(&watch[i].used, &free_, 1)) {
      watch[i].what = what;
      watch[i].bytes = bytes;
      watch[i].tid = (pid_t)syscall(SYS_gettid);
      watch[i].since_ns = dm_mono_ns();
      watch[i].said = 0;
      atomic_store(&watch[i].used, 2);
      return i;
    }
  }
  return -1;
}

void dm_watch_end(int slot) {
  if (slot >= 0) atomic_store(&watch[slot].used, 0);
}
