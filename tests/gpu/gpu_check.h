/* Minimal checks for the GPU test programs (plain C: the GPU machines have
 * no cmocka). A failed CHECK is counted and reported with its location; the
 * program exits 1 if any failed, 77 (ctest's skip code) without a GPU. */
#ifndef TPX_GPU_CHECK_H
#define TPX_GPU_CHECK_H

#include <stdio.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include "cuda/gpu.h"
#include "tpx/error.h"

static int gc_failures;
static int gc_checks;

#define CHECK(cond, ...)                                                                           \
  do {                                                                                             \
    gc_checks++;                                                                                   \
    if (!(cond)) {                                                                                 \
      gc_failures++;                                                                               \
      fprintf(stderr, "FAIL %s:%d: %s: ", __FILE__, __LINE__, #cond);                              \
      fprintf(stderr, __VA_ARGS__);                                                                \
      fprintf(stderr, " [last error: %s]\n", tpx_last_error());                                    \
    }                                                                                              \
  } while (0)

/* A tpx call that must succeed; stop the program otherwise (later checks
 * would only cascade). */
#define MUST(call)                                                                                 \
  do {                                                                                             \
    int rc_ = (call);                                                                              \
    if (rc_ != 0) {                                                                                \
      fprintf(stderr, "FATAL %s:%d: %s -> %d (%s) [%s]\n", __FILE__, __LINE__, #call, rc_,        \
              tpx_strerror(rc_), tpx_last_error());                                                \
      exit(1);                                                                                     \
    }                                                                                              \
  } while (0)

static inline int gc_finish(const char *name) {
  printf("%s: %d checks, %d failed\n", name, gc_checks, gc_failures);
  return gc_failures ? 1 : 0;
}

/* Usable GPUs, asked in a child so that this process holds no context yet
 * (tests fork their sides later). */
static inline int gc_count_gpus(void) {
  pid_t pid = fork();
  if (pid == 0) {
    int n = 0;
    tpx__gpu_device_count(&n);
    _exit(n > 100 ? 100 : n);
  }
  int st = 0;
  waitpid(pid, &st, 0);
  return WIFEXITED(st) ? WEXITSTATUS(st) : 0;
}

#endif
