/* Host memory copy bandwidth with N threads (bench/compare.sh mem): each
 * thread copies its own SIZE-byte buffer into another for SECONDS; prints
 * the total bytes copied per second (1e9 B/s). A reference for what the
 * kernel's socket copies on loopback can reach on the same machine.
 *
 *   membw THREADS SIZE_MIB SECONDS */
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

struct job {
  size_t size;
  double secs, rate;
  int rc;
};

/* Through a volatile pointer: the copies' results are never read. */
static void *(*volatile copy_fn)(void *, const void *, size_t) = memcpy;

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

static void *run(void *arg) {
  struct job *j = arg;
  char *s = aligned_alloc(4096, j->size), *d = aligned_alloc(4096, j->size);
  if (!s || !d) {
    free(s);
    free(d);
    j->rc = 1;
    return NULL;
  }
  memset(s, 1, j->size);
  memset(d, 2, j->size);
  uint64_t n = 0;
  double t0 = now(), dt = 0;
  for (int i = 0; i < 1000000 && dt < j->secs; i++) { /* bounded in count and time */
    copy_fn(d, s, j->size);
    n += j->size;
    dt = now() - t0;
  }
  j->rate = dt > 0 ? (double)n / dt : 0;
  free(s);
  free(d);
  return NULL;
}

int main(int argc, char **argv) {
  if (argc != 4) {
    fprintf(stderr, "usage: membw THREADS SIZE_MIB SECONDS\n");
    return 2;
  }
  int th = atoi(argv[1]), mib = atoi(argv[2]);
  double secs = atof(argv[3]);
  if (th < 1 || th > 256 || mib < 1 || mib > 4096 || secs <= 0 || secs > 60) {
    fprintf(stderr, "membw: THREADS 1..256, SIZE_MIB 1..4096, SECONDS (0, 60]\n");
    return 2;
  }
  pthread_t tid[256];
  struct job jobs[256];
  for (int i = 0; i < th; i++) {
    jobs[i] = (struct job){(size_t)mib << 20, secs, 0, 0};
    if (pthread_create(&tid[i], NULL, run, &jobs[i]) != 0) {
      fprintf(stderr, "membw: pthread_create failed\n");
      return 1;
    }
  }
  double total = 0;
  int rc = 0;
  for (int i = 0; i < th; i++) {
    pthread_join(tid[i], NULL);
    total += jobs[i].rate;
    rc |= jobs[i].rc;
  }
  if (rc) {
    fprintf(stderr, "membw: out of memory\n");
    return 1;
  }
  printf("membw %d threads x %d MiB: copy %.1f GB/s\n", th, mib, total / 1e9);
  return 0;
}
